// The AsyncJob resource side of a job (API.md §5): created with the queue row in one transaction, and moved to a
// final status only together with a conditional change of that row, so `cancelled` is never overwritten.
import type { Queryable } from '../storage/db.js';
import { systemContext, type RepoContext } from '../fhir/repository/context.js';
import { prepareWrite } from '../fhir/repository/prepare.js';
import { insertResources, selectCurrent, writeVersion, type StoredRow } from '../fhir/repository/store.js';
import { writeNextVersion } from '../fhir/repository/update.js';
import type { Resource } from '../fhir/types.js';
import { enqueue, finish, markCancelled, type NewJob } from './queue.js';

export interface AsyncJobResource extends Resource {
  status: string;
  meta?: Resource['meta'] & { author?: { reference?: string } };
}

type Env = Pick<RepoContext, 'clock' | 'newId' | 'fhirBase'>;

/** Only the environment of a context (a caller's context passed as `env` must not lend its actor). */
const envOf = (e: Env): Env => ({ clock: e.clock, newId: e.newId, fhirBase: e.fhirBase });

/** Creates the AsyncJob resource (`accepted`) and its queue row; returns the job id. Run it in a transaction. */
export async function createJob(
  tx: Queryable,
  env: Env,
  job: Omit<NewJob, 'id'> & { request: string },
): Promise<string> {
  const id = env.newId();
  const ctx: RepoContext = {
    ...systemContext(job.projectId, envOf(env)),
    ...(job.owner ? { author: job.owner } : {}),
  };
  const now = env.clock();
  const resource: Resource = {
    resourceType: 'AsyncJob',
    status: 'accepted',
    requestTime: now.toISOString(),
    request: job.request,
    meta: { project: job.projectId },
  };
  await insertResources(tx, [prepareWrite(ctx, resource, id, 1, now)]);
  await enqueue(tx, { ...job, id });
  return id;
}

/** Writes the next version of an AsyncJob row, keeping its author (who may read and cancel it). */
export async function writeJobVersion(
  tx: Queryable,
  env: Env,
  row: StoredRow,
  change: Partial<AsyncJobResource>,
): Promise<void> {
  const current = JSON.parse(row.json) as AsyncJobResource;
  await writeNextVersion(tx, jobContext(env, row, current), row, { ...current, ...change });
}

function jobContext(env: Env, row: StoredRow, job: AsyncJobResource): RepoContext {
  const author = job.meta?.author?.reference;
  return { ...systemContext(row.project_id, envOf(env)), ...(author ? { author } : {}) };
}

/**
 * Moves a job the worker holds to `completed`/`failed` (AsyncJob and queue row together); false when it was
 * cancelled (or its lease lost) meanwhile, in which case nothing is written.
 */
export async function finalizeJob(
  db: { transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> },
  env: Env,
  id: string,
  worker: string,
  status: 'completed' | 'failed',
  extra: { output?: Resource; error?: string },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    // Lock order everywhere: the AsyncJob row, then the queue row (as $cancel does).
    const row = await selectCurrent(tx, 'AsyncJob', id, true);
    const now = env.clock();
    if (!(await finish(tx, id, worker, status, now, extra.error))) return false;
    if (!row || row.deleted || (JSON.parse(row.json) as AsyncJobResource).status !== 'accepted') return true;
    await writeJobVersion(tx, env, row, {
      status,
      transactionTime: now.toISOString(),
      ...(extra.output ? { output: extra.output } : {}),
    });
    return true;
  });
}

/** The $cancel transition `accepted` → `cancelled` on a locked AsyncJob row (queue row included, if any). */
export async function cancelJobRow(tx: Queryable, env: Env, row: StoredRow): Promise<void> {
  await markCancelled(tx, row.id, env.clock());
  await writeJobVersion(tx, env, row, { status: 'cancelled' });
}

/** The next version of a locked AsyncJob row without `output` (its files are gone: API.md §1 `exportRetention`). */
export async function dropJobOutput(tx: Queryable, env: Env, row: StoredRow): Promise<void> {
  const current = JSON.parse(row.json) as AsyncJobResource;
  if (row.deleted || current.output === undefined) return;
  const { output: _dropped, ...rest } = current;
  await writeNextVersion(tx, jobContext(env, row, current), row, rest);
}

/** Deletes a locked, ended AsyncJob resource (the Bulk Data IG's delete request); its queue row stays for the sweep. */
export async function deleteJobResource(tx: Queryable, env: Env, row: StoredRow): Promise<void> {
  await writeVersion(tx, row.rid, 'AsyncJob', row.id, {
    resource: null,
    projectId: row.project_id,
    versionId: row.version_id + 1,
    lastUpdated: env.clock(),
  });
}
