// The FHIRPath worker thread of `$csv`, CSV exports and SQL on FHIR views (fhirpath-pool.ts): evaluates `_fields`
// entries beyond the fast path and ViewDefinitions off the event loop, one task at a time, so that the pool can stop
// it at its deadline.
// https://nodejs.org/api/worker_threads.html
import { parentPort } from 'node:worker_threads';
import { FhirError, type IssueCode } from '../outcome.js';
import { checkView, viewRows } from '../views/worker-tasks.js';
import { checkColumns, evaluateRows, InvalidEntry, type SlowColumn } from './fhirpath-eval.js';
import { parseJson } from '../json/parse.js';
import { stringifyJson } from '../json/stringify.js';
import { applyFhirpathPatch } from '../patch/fhirpath-patch.js';
import { fromXml } from '../xml/index.js';

/**
 * `check`/`rows`: `$csv` `_fields` entries. `view-check`/`view-rows`: a ViewDefinition (views/worker-tasks.ts).
 * `fhirpath-patch`: a FHIRPath Patch applied to a resource (JSON texts, so that decimals keep their written form).
 * `xml`: a large FHIR XML request body turned into its JSON text (http/plugins/content-types.ts).
 */
export type WorkerTask =
  | { kind: 'check'; resourceType: string; columns: SlowColumn[] }
  | { kind: 'rows'; resourceType: string; columns: SlowColumn[]; jsons: string[] }
  | { kind: 'view-check'; view: unknown }
  | { kind: 'view-rows'; view: unknown; jsons: string[] }
  | { kind: 'fhirpath-patch'; resource: string; parameters: string }
  | { kind: 'xml'; text: string };

/** A FhirError thrown in the worker, sent as data and thrown again by the pool. */
export interface SentFhirError {
  issueCode: IssueCode;
  message: string;
  code: string;
  status: number;
  expression?: string[];
}

export type WorkerReply =
  | { ok: true; result?: unknown }
  | { ok: false; invalid?: { entry: string; why: string }; fhir?: SentFhirError; error?: string };

function perform(task: WorkerTask): unknown {
  switch (task.kind) {
    case 'check':
      checkColumns(task.resourceType, task.columns);
      return undefined;
    case 'rows':
      return evaluateRows(task.resourceType, task.columns, task.jsons);
    case 'view-check':
      return checkView(task.view);
    case 'view-rows':
      return viewRows(task.view, task.jsons);
    case 'fhirpath-patch':
      return stringifyJson(
        applyFhirpathPatch(parseJson(task.resource) as Record<string, unknown>, parseJson(task.parameters)),
      );
    case 'xml':
      return stringifyJson(fromXml(task.text));
  }
}

function failure(err: unknown): WorkerReply {
  if (err instanceof InvalidEntry) return { ok: false, invalid: { entry: err.entry, why: err.why } };
  if (err instanceof FhirError) {
    const expression = err.issues[0]?.expression;
    return {
      ok: false,
      fhir: {
        issueCode: err.issueCode,
        message: err.message,
        code: err.code,
        status: err.status,
        ...(expression ? { expression } : {}),
      },
    };
  }
  return { ok: false, error: (err as Error).message };
}

// Nothing an expression or a resource holds may reach the server's output as raw lines (log forging, issue 12):
// the engine writes `trace()` and some warnings with console; here they go nowhere. The pool drops the worker's
// stdout and stderr as well.
for (const k of ['log', 'info', 'warn', 'error', 'debug', 'trace', 'dir'] as const)
  console[k] = () => undefined;

const port = parentPort;

/** Posts a reply; one the structured clone cannot copy (too deep, too large) becomes an error reply. */
function send(reply: WorkerReply): void {
  try {
    port?.postMessage(reply);
  } catch (err) {
    port?.postMessage({ ok: false, error: `FHIRPath result cannot be sent: ${(err as Error).message}` });
  }
}

if (port) {
  port.on('message', (task: WorkerTask) => {
    let reply: WorkerReply;
    try {
      const result = perform(task);
      reply = result === undefined ? { ok: true } : { ok: true, result };
    } catch (err) {
      reply = failure(err);
    }
    send(reply);
  });
  // A task the structured clone could not rebuild here: it fails at once rather than at its deadline.
  port.on('messageerror', (err: Error) =>
    send({ ok: false, error: `The FHIRPath task could not be received: ${err.message}` }),
  );
  // Warm the engine up (its first evaluation loads the model's lazy parts), so that deadlines measure the task.
  evaluateRows(
    'Patient',
    [{ entry: 'warm-up', expression: "name.where(use = 'x').given.first()" }],
    ['{"resourceType":"Patient","name":[{"given":["x"]}]}'],
  );
  port.postMessage('ready');
}
