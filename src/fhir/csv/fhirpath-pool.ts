// A small pool of FHIRPath worker threads with a deadline (issue 12 point 11): `_fields` entries beyond the fast
// path and SQL on FHIR ViewDefinitions (checkView, viewRows) are parsed and run there, so a costly expression never
// stalls the event loop (every tenant's requests), and a worker that passes the deadline or its memory limit is
// terminated and replaced; the request answers 422 too-costly naming the limit.
// https://nodejs.org/api/worker_threads.html
import { restoreDecimalTexts } from '../views/decimal-text.js';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { FhirError } from '../outcome.js';
import type { Row, ViewColumnInfo } from '../views/index.js';
import type { CellResult, SlowColumn } from './fhirpath-eval.js';
import type { WorkerReply, WorkerTask } from './fhirpath-worker.js';

export type { CellResult, SlowColumn };

export interface FhirpathPool {
  /** Parses the columns and runs them on an empty resource: 400 for an entry that does not parse or names an unknown function. */
  check(resourceType: string, columns: readonly SlowColumn[]): Promise<void>;
  /** The cells of each resource (stored JSON text), one per column. */
  rows(
    resourceType: string,
    columns: readonly SlowColumn[],
    jsons: readonly string[],
  ): Promise<CellResult[][]>;
  /** Checks and compiles a ViewDefinition (untrusted JSON): its columns, or the 422 FhirError of compileView. */
  checkView(view: unknown): Promise<ViewColumnInfo[]>;
  /** The rows of a ViewDefinition over resources (stored JSON text); 422 too-costly beyond the deadline. */
  viewRows(view: unknown, jsons: readonly string[]): Promise<Row[]>;
  /**
   * Applies a FHIRPath Patch (Parameters, JSON text) to a resource (JSON text) and returns the patched resource's
   * text; its FhirErrors (400, 413, 422) come back as they are, and 422 too-costly beyond the deadline.
   */
  patch(resource: string, parameters: string): Promise<string>;
  /** The JSON text of a FHIR XML body (fromXml); its FhirError 400s come back as they are. */
  xml(text: string): Promise<string>;
  /** Terminates the workers; tasks still waiting fail. */
  close(): Promise<void>;
}

export interface FhirpathPoolOptions {
  /** Milliseconds one task (a check, or the rows of one `$csv` or export page) may run (config fhirpathTimeout). */
  timeoutMs: number;
  /** Workers (default: the cores but one, at least 1, at most 4). */
  size?: number;
  /** Heap of each worker in MiB (default 256): beyond it the task fails as too costly. */
  maxHeapMb?: number;
}

// From the compiled `dist/` the worker is JavaScript. Under tsx/vitest it is the TypeScript source: a small
// bootstrap registers tsx's loader in the worker first (Node 20 does not apply `--import tsx` hooks to a worker's
// own entry module).
const fromSource = import.meta.url.endsWith('.ts');

function workerEntry(): { file: URL | string; eval: boolean } {
  if (!fromSource) return { file: new URL('./fhirpath-worker.js', import.meta.url), eval: false };
  const tsxApi = createRequire(import.meta.url)
    .resolve('tsx/esm/api')
    .replace(/index\.cjs$/, 'index.mjs');
  const worker = new URL('./fhirpath-worker.ts', import.meta.url).href;
  const code = `import(${JSON.stringify(pathToFileURL(tsxApi).href)}).then((m) => { m.register(); return import(${JSON.stringify(worker)}); })`;
  return { file: code, eval: true };
}

interface Task {
  message: WorkerTask;
  resolve(reply: WorkerReply): void;
  reject(err: Error): void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  task?: Task;
  timer?: NodeJS.Timeout;
}

const tooCostly = (task: WorkerTask, why: string): FhirError =>
  task.kind === 'xml'
    ? new FhirError('too-costly', `The XML body is too costly to read: ${why}`, 'xml.too-costly', {
        status: 413,
      })
    : task.kind === 'fhirpath-patch'
      ? new FhirError('too-costly', `The FHIRPath Patch is too costly: ${why}`, 'fhirpatch.too-costly')
      : task.kind === 'view-check' || task.kind === 'view-rows'
        ? new FhirError(
            'too-costly',
            `The ViewDefinition's FHIRPath is too costly: ${why}`,
            'views.fhirpath-too-costly',
          )
        : new FhirError(
            'too-costly',
            `The _fields FHIRPath is too costly: ${why}`,
            'csv.fhirpath-too-costly',
          );

/** A task whose data the structured clone of `postMessage` refused: too deep, too large, or not plain data. */
const unsendable = (task: WorkerTask, err: unknown): FhirError =>
  task.kind === 'xml'
    ? new FhirError('too-costly', 'The XML body cannot be passed to the parsing worker', 'xml.unsendable', {
        status: 413,
      })
    : task.kind === 'fhirpath-patch'
      ? new FhirError(
          'too-costly',
          `The FHIRPath Patch cannot be passed to the FHIRPath worker: ${String((err as Error)?.message ?? err).slice(0, 200)}`,
          'fhirpatch.unsendable',
        )
      : new FhirError(
          'too-costly',
          `The ${task.kind === 'view-check' || task.kind === 'view-rows' ? 'ViewDefinition' : '_fields request'} cannot be passed to the FHIRPath worker: ${String((err as Error)?.message ?? err).slice(0, 200)}`,
          task.kind === 'view-check' || task.kind === 'view-rows' ? 'views.unsendable' : 'csv.unsendable',
        );

// Nothing a worker, its messages or this pool do may reach the process as an uncaught exception or an unhandled
// rejection (issue 25 point 1: a deep view once made `postMessage` throw inside the worker's 'message' handler,
// which ended the process and every tenant with it). A task that fails fails alone: the worker that ran it is
// replaced when its state is in doubt, and the other tasks go on.
export function createFhirpathPool(opts: FhirpathPoolOptions): FhirpathPool {
  const size = opts.size ?? Math.min(4, Math.max(1, availableParallelism() - 1));
  const slots: Slot[] = [];
  const queue: Task[] = [];
  let closed = false;

  const finish = (slot: Slot): Task | undefined => {
    const task = slot.task;
    clearTimeout(slot.timer);
    slot.task = undefined;
    return task;
  };
  const discard = (slot: Slot): void => {
    const at = slots.indexOf(slot);
    if (at >= 0) slots.splice(at, 1);
    slot.worker.terminate().catch(() => undefined);
  };
  /** The worker is gone or in doubt: its task fails with `err`, and a worker that never started fails the queue. */
  const lose = (slot: Slot, err: Error): void => {
    if (!slots.includes(slot)) return; // already handled ('error' is followed by 'exit')
    const task = finish(slot);
    discard(slot);
    // A worker that cannot even start would fail again: the waiting tasks fail instead of respawning forever.
    if (!slot.ready) for (const t of queue.splice(0)) t.reject(err);
    task?.reject(err);
    pump();
  };
  /** An event handler that cannot throw: a fault in it fails the slot's task rather than the process. */
  const guarded =
    <A extends unknown[]>(slot: Slot, handler: (...args: A) => void) =>
    (...args: A): void => {
      try {
        handler(...args);
      } catch (err) {
        try {
          lose(slot, err instanceof Error ? err : new Error(String(err)));
        } catch {
          // Nothing more can be done for this slot; it is no longer in the pool.
        }
      }
    };
  const spawn = (): Slot => {
    const entry = workerEntry();
    const worker = new Worker(entry.file, {
      eval: entry.eval,
      resourceLimits: { maxOldGenerationSizeMb: opts.maxHeapMb ?? 256 },
      // Whatever the worker writes is dropped: request text never reaches the server's output (issue 12 point 10).
      stdout: true,
      stderr: true,
    });
    worker.stdout.resume();
    worker.stderr.resume();
    worker.unref();
    const slot: Slot = { worker, ready: false };
    worker.on(
      'message',
      guarded(slot, (reply: WorkerReply | 'ready') => {
        if (reply === 'ready') {
          slot.ready = true;
          return pump();
        }
        finish(slot)?.resolve(reply);
        pump();
      }),
    );
    // A reply the structured clone could not rebuild here: its task fails, and the worker is replaced (one
    // whose reply went missing is not trusted with the next task).
    worker.on(
      'messageerror',
      guarded(slot, (err: Error) => {
        const task = slot.task;
        lose(slot, task ? unsendable(task.message, err) : err);
      }),
    );
    worker.on(
      'error',
      guarded(slot, (err: Error & { code?: string }) => {
        const task = slot.task;
        lose(
          slot,
          task && err.code === 'ERR_WORKER_OUT_OF_MEMORY'
            ? tooCostly(task.message, `it needed more than the memory limit of ${opts.maxHeapMb ?? 256} MiB`)
            : err,
        );
      }),
    );
    worker.on(
      'exit',
      guarded(slot, () => lose(slot, new Error('The FHIRPath worker stopped'))),
    );
    slots.push(slot);
    return slot;
  };
  const start = (slot: Slot, task: Task): void => {
    slot.task = task;
    // The deadline runs from when the worker takes the task: time spent waiting in the queue does not count.
    slot.timer = setTimeout(
      guarded(slot, () => {
        finish(slot);
        discard(slot);
        task.reject(
          tooCostly(
            task.message,
            `it ran longer than the limit of ${opts.timeoutMs} ms (fhirpathTimeout); ${task.message.kind === 'xml' ? 'send it as JSON or in smaller parts' : 'simplify the expression'}`,
          ),
        );
        pump();
      }),
      opts.timeoutMs,
    );
    try {
      slot.worker.postMessage(task.message);
    } catch (err) {
      // The structured clone refused the task before anything was sent (DataCloneError; RangeError for data nested
      // past its stack): the worker never saw it and stays free for the next one; only this task fails.
      finish(slot);
      task.reject(unsendable(task.message, err));
    }
  };
  function pump(): void {
    while (!closed && queue.length > 0) {
      const free = slots.find((s) => s.ready && !s.task);
      if (free) {
        start(free, queue.shift() as Task);
        continue;
      }
      if (slots.length < size) {
        try {
          spawn();
        } catch (err) {
          // No thread can be made now (memory, thread limits): with no worker left to take them, the tasks fail.
          if (slots.length === 0) for (const t of queue.splice(0)) t.reject(err as Error);
        }
      }
      return; // a worker that is starting takes the next task once ready
    }
  }
  const run = (message: WorkerTask): Promise<WorkerReply> =>
    new Promise<WorkerReply>((resolve, reject) => {
      if (closed) return reject(new Error('The FHIRPath pool is closed'));
      queue.push({ message, resolve, reject });
      pump();
    }).then((reply) => {
      if (reply.ok) return reply;
      if (reply.invalid) {
        const { entry, why } = reply.invalid;
        throw new FhirError(
          'invalid',
          `Invalid FHIRPath expression: ${entry.slice(0, 200)}: ${why.slice(0, 200)}`,
          'csv.fhirpath',
        );
      }
      if (reply.fhir) {
        const f = reply.fhir;
        throw new FhirError(f.issueCode, f.message, f.code, {
          status: f.status,
          ...(f.expression ? { expression: f.expression } : {}),
        });
      }
      throw new Error(reply.error ?? 'FHIRPath worker failed');
    });

  return {
    async check(resourceType, columns) {
      if (columns.length > 0) await run({ kind: 'check', resourceType, columns: [...columns] });
    },
    async rows(resourceType, columns, jsons) {
      if (columns.length === 0 || jsons.length === 0) return jsons.map(() => []);
      const reply = await run({ kind: 'rows', resourceType, columns: [...columns], jsons: [...jsons] });
      return (reply as { result: CellResult[][] }).result;
    },
    async checkView(view) {
      const reply = await run({ kind: 'view-check', view });
      return (reply as { result: ViewColumnInfo[] }).result;
    },
    async viewRows(view, jsons) {
      const reply = await run({ kind: 'view-rows', view, jsons: [...jsons] });
      const result = (reply as { result?: { rows: Row[]; texts: [number, string, string][] } }).result;
      return result ? restoreDecimalTexts(result.rows, result.texts) : [];
    },
    async patch(resource, parameters) {
      const reply = await run({ kind: 'fhirpath-patch', resource, parameters });
      return (reply as { result: string }).result;
    },
    async xml(text) {
      const reply = await run({ kind: 'xml', text });
      return (reply as { result: string }).result;
    },
    async close() {
      closed = true;
      for (const task of queue.splice(0)) task.reject(new Error('The FHIRPath pool is closed'));
      await Promise.all(
        slots.splice(0).map((s) => {
          finish(s)?.reject(new Error('The FHIRPath pool is closed'));
          return s.worker.terminate();
        }),
      );
    },
  };
}
