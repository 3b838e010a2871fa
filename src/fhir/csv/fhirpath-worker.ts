// The FHIRPath worker thread of `$csv` and CSV exports (fhirpath-pool.ts): evaluates `_fields` entries beyond the
// fast path off the event loop, one task at a time, so that the pool can stop it at its deadline.
// https://nodejs.org/api/worker_threads.html
import { parentPort } from 'node:worker_threads';
import { checkColumns, evaluateRows, InvalidEntry, type SlowColumn } from './fhirpath-eval.js';

export type WorkerTask =
  | { kind: 'check'; resourceType: string; columns: SlowColumn[] }
  | { kind: 'rows'; resourceType: string; columns: SlowColumn[]; jsons: string[] };

export type WorkerReply =
  { ok: true; result?: unknown } | { ok: false; invalid?: { entry: string; why: string }; error?: string };

// Nothing an expression or a resource holds may reach the server's output as raw lines (log forging, issue 12):
// the engine writes `trace()` and some warnings with console; here they go nowhere. The pool drops the worker's
// stdout and stderr as well.
for (const k of ['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir'] as const)
  console[k] = () => undefined;

const port = parentPort;
if (port) {
  port.on('message', (task: WorkerTask) => {
    let reply: WorkerReply;
    try {
      if (task.kind === 'check') {
        checkColumns(task.resourceType, task.columns);
        reply = { ok: true };
      } else reply = { ok: true, result: evaluateRows(task.resourceType, task.columns, task.jsons) };
    } catch (err) {
      reply =
        err instanceof InvalidEntry
          ? { ok: false, invalid: { entry: err.entry, why: err.why } }
          : { ok: false, error: (err as Error).message };
    }
    try {
      port.postMessage(reply);
    } catch (err) {
      // A value the structured clone cannot copy.
      port.postMessage({ ok: false, error: `FHIRPath result cannot be sent: ${(err as Error).message}` });
    }
  });
  // Warm the engine up (its first evaluation loads the model's lazy parts), so that deadlines measure the task.
  evaluateRows(
    'Patient',
    [{ entry: 'warm-up', expression: "name.where(use = 'x').given.first()" }],
    ['{"resourceType":"Patient","name":[{"given":["x"]}]}'],
  );
  port.postMessage('ready');
}
