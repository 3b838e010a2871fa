// A task run again `intervalMs` after each run ends (never two at once), from start() until stop(), which waits for a
// run in progress. The sweeps that every server process runs (export retention, audit sealing and retention).

export interface Periodic {
  start(): void;
  stop(): Promise<void>;
  /** Whether stop() was called: a long run checks it between its steps. */
  readonly stopped: boolean;
}

export function periodic(run: () => Promise<unknown>, intervalMs: number): Periodic {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const tick = (): void => {
    running = run().finally(() => {
      if (!stopped) timer = setTimeout(tick, intervalMs);
    });
  };
  return {
    start() {
      if (timer || stopped) return;
      timer = setTimeout(tick, 0);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
    get stopped() {
      return stopped;
    },
  };
}
