// Where the log's lines go (standard output): the lines logged during one turn of the event loop are written in one
// system call when the turn ends, instead of one write each (issue 30 point 6: one line per request at logLevel info,
// the default). A line is never held longer than the turn that logged it, never split, and what is pending when the
// process exits (process.exit after a fatal error, a signal's graceful stop) is written before it goes.
// https://getpino.io/#/docs/api?id=destination

/** What the lines are finally written to: a synchronous writer (pino.destination with `sync: true`). */
export interface LineTarget {
  write(text: string): unknown;
}

export interface TurnBatchedLines {
  /** pino's stream interface: one call per line (each ends with a line feed). */
  write(line: string): boolean;
  /** Writes what is pending now (pino's `logger.flush`). */
  flush(cb?: (err?: Error) => void): void;
  /** Writes what is pending now; for the process's `exit` event. */
  flushSync(): void;
}

export interface TurnBatchedOptions {
  /** Pending text beyond this many characters is written at once, without waiting for the turn's end (64 KiB). */
  maxPending?: number;
  /** Runs `fn` when the current turn's work is done (default setImmediate); tests run it by hand. */
  atTurnEnd?: (fn: () => void) => void;
}

export function turnBatchedLines(target: LineTarget, opts: TurnBatchedOptions = {}): TurnBatchedLines {
  const maxPending = opts.maxPending ?? 65_536;
  const atTurnEnd = opts.atTurnEnd ?? ((fn: () => void) => void setImmediate(fn));
  let pending = '';
  let scheduled = false;

  const flushSync = (): void => {
    if (pending === '') return;
    const text = pending;
    pending = '';
    target.write(text);
  };
  const onTurnEnd = (): void => {
    scheduled = false;
    flushSync();
  };

  return {
    write(line: string): boolean {
      pending += line;
      if (pending.length >= maxPending) flushSync();
      else if (!scheduled) {
        scheduled = true;
        atTurnEnd(onTurnEnd);
      }
      return true;
    },
    flush(cb?: (err?: Error) => void): void {
      try {
        flushSync();
      } catch (err) {
        if (cb) return cb(err as Error);
        throw err;
      }
      cb?.();
    },
    flushSync,
  };
}
