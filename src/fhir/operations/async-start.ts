// What every asynchronous kick-off shares (https://hl7.org/fhir/R4/async.html, API.md §5): `Prefer: respond-async`
// is required, parameters come from the query string or a Parameters body, and the answer is 202 with
// `Content-Location: {fhir}/AsyncJob/<id>` and an informational OperationOutcome.
import type { Db, Queryable } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { createJob } from '../../jobs/async-job.js';
import { countActive, JOBS_CHANNEL, lockOwner } from '../../jobs/queue.js';
import { FhirError, outcome } from '../outcome.js';
import type { RepoContext } from '../repository/context.js';
import type { FhirResult } from '../result.js';
import { parametersOf } from './parameters-body.js';

export interface AsyncRequest {
  /** The `Prefer` header. */
  prefer: string | undefined;
  /** The `Accept` header (the bulk export kick-off checks it). */
  accept?: string | undefined;
  query: Record<string, string | string[]>;
  body: unknown;
  /** The absolute request URL (AsyncJob.request). */
  url: string;
}

export function assertRespondAsync(prefer: string | undefined): void {
  if (!prefer || !/(^|[,;\s])respond-async($|[,;\s])/.test(prefer)) {
    throw new FhirError(
      'invalid',
      'This operation needs the header Prefer: respond-async',
      'job.prefer-async',
    );
  }
}

/** Query and Parameters-body parameters by name (values as strings; a comma list stays one value). */
export function operationParams(req: AsyncRequest): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(req.query)) out[k] = [v].flat();
  for (const p of parametersOf(req.body, 'job.body')) {
    const key = Object.keys(p).find((k) => k.startsWith('value'));
    const v = key ? p[key] : undefined;
    if (typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number')
      (out[p.name] ??= []).push(String(v));
  }
  return out;
}

/** At most `max` accepted jobs of `kinds` per login identity (API.md §1 `maxActiveExportsPerUser`). */
export interface JobQuota {
  kinds: readonly string[];
  max: number;
}

/** Seconds a throttled client is asked to wait: about the time a typical export takes to finish. */
export const QUOTA_RETRY_AFTER_SECONDS = 60;

/**
 * The quota decision, before any job exists. It counts by the job owner, the caller's profile reference
 * (`meta.author`): the same for every login of that user or client, so logging in again gives no extra room. The
 * advisory lock on that owner, taken in the transaction that then creates the job, serialises concurrent kick-offs
 * of one owner on every instance sharing the database, so they cannot both see room for the last job.
 */
async function assertQuota(tx: Queryable, owner: string | undefined, quota: JobQuota): Promise<void> {
  await lockOwner(tx, owner);
  if ((await countActive(tx, owner, quota.kinds)) < quota.max) return;
  throw new FhirError(
    'throttled',
    `Too many active exports: at most ${quota.max} may be queued or running per user (maxActiveExportsPerUser); ` +
      'wait until one ends, or cancel one',
    'job.quota',
    { headers: { 'retry-after': String(QUOTA_RETRY_AFTER_SECONDS) } },
  );
}

/** Creates the AsyncJob and its queue row (within `quota`, when given), wakes the runners, and answers 202. */
export async function startJob(
  db: Db,
  signals: Signals,
  ctx: RepoContext,
  kind: string,
  params: Record<string, unknown>,
  request: string,
  quota?: JobQuota,
): Promise<FhirResult> {
  const id = await db.transaction(async (tx) => {
    if (quota) await assertQuota(tx, ctx.author, quota);
    return createJob(tx, ctx, {
      kind,
      params,
      projectId: ctx.actor.projectId,
      request,
      ...(ctx.author ? { owner: ctx.author } : {}),
    });
  });
  await signals.publish(JOBS_CHANNEL, 'new');
  return {
    status: 202,
    body: outcome('information', 'informational', `Accepted: AsyncJob/${id}`),
    location: `AsyncJob/${id}`,
  };
}
