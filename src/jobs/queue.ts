// The job queue (API.md §5): jobs are rows claimed with FOR UPDATE SKIP LOCKED and a lease, so that each runs on
// one worker at a time across any number of instances; the lease is extended by a heartbeat and, when it expires
// (the worker died), the job is claimed again and resumed from its last checkpoint. Every state change is
// conditional (`state = 'accepted'`, and for the worker also `lease_owner = me`), so a final state never changes.
import type { Queryable } from '../storage/db.js';

export type JobState = 'accepted' | 'completed' | 'failed' | 'cancelled';

export interface JobRow {
  id: string;
  kind: string;
  params: Record<string, unknown>;
  project_id: string;
  owner: string | null;
  state: JobState;
  attempts: number;
  checkpoint: unknown;
  cancel_requested: boolean;
}

export interface NewJob {
  id: string;
  kind: string;
  params: Record<string, unknown>;
  projectId: string;
  owner?: string;
}

/** Channel of the cross-instance signal: payload `new` (wake up) or `cancel <id>`. */
export const JOBS_CHANNEL = 'jobs';

/** Enqueues a job; call it in the transaction that creates the AsyncJob resource. */
export async function enqueue(tx: Queryable, job: NewJob): Promise<void> {
  await tx.query('INSERT INTO jobs (id, kind, params, project_id, owner) VALUES ($1, $2, $3, $4, $5)', [
    job.id,
    job.kind,
    JSON.stringify(job.params),
    job.projectId,
    job.owner ?? null,
  ]);
}

const COLUMNS = 'id, kind, params, project_id, owner, state, attempts, checkpoint, cancel_requested';

/**
 * Claims the oldest job that is accepted (or cancelled with files left to delete) and not leased by a live worker.
 */
export async function claim(db: Queryable, worker: string, leaseMs: number): Promise<JobRow | undefined> {
  const r = await db.query<JobRow>(
    `UPDATE jobs SET lease_owner = $1, lease_until = now() + $2 * interval '1 millisecond', heartbeat = now(),
       attempts = attempts + CASE WHEN state = 'accepted' THEN 1 ELSE 0 END, updated_at = now()
     WHERE id = (
       SELECT id FROM jobs
       WHERE (state = 'accepted' OR cancel_requested) AND (lease_until IS NULL OR lease_until < now())
       ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
     RETURNING ${COLUMNS}`,
    [worker, leaseMs],
  );
  return r.rows[0];
}

/** Extends the lease; false when the job is no longer this worker's accepted job (cancelled, or lease lost). */
export async function heartbeat(
  db: Queryable,
  id: string,
  worker: string,
  leaseMs: number,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE jobs SET lease_until = now() + $3 * interval '1 millisecond', heartbeat = now()
     WHERE id = $1 AND lease_owner = $2 AND state = 'accepted'`,
    [id, worker, leaseMs],
  );
  return r.rowCount > 0;
}

/** Records a checkpoint; false when the job was cancelled or its lease lost meanwhile (the worker must stop). */
export async function checkpoint(
  db: Queryable,
  id: string,
  worker: string,
  state: unknown,
  progress: string,
): Promise<boolean> {
  const r = await db.query(
    `UPDATE jobs SET checkpoint = $3, progress = $4, updated_at = now()
     WHERE id = $1 AND lease_owner = $2 AND state = 'accepted'`,
    [id, worker, JSON.stringify(state), progress],
  );
  return r.rowCount > 0;
}

/** Ends the job in a final state if it is still this worker's accepted job (lock the AsyncJob row first). */
export async function finish(
  tx: Queryable,
  id: string,
  worker: string,
  state: 'completed' | 'failed',
  error?: string,
): Promise<boolean> {
  const r = await tx.query(
    `UPDATE jobs SET state = $3, error = $4, lease_owner = NULL, lease_until = NULL, updated_at = now()
     WHERE id = $1 AND lease_owner = $2 AND state = 'accepted'`,
    [id, worker, state, error ?? null],
  );
  return r.rowCount > 0;
}

/** Records a cancel (only from `accepted`); the worker, wherever it runs, deletes partial files. */
export async function markCancelled(tx: Queryable, id: string): Promise<void> {
  await tx.query(
    `UPDATE jobs SET state = 'cancelled', cancel_requested = true, updated_at = now()
     WHERE id = $1 AND state = 'accepted'`,
    [id],
  );
}

/** A cancelled job's partial files are gone: nothing is left for any worker to do. */
export async function markCleaned(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE jobs SET cancel_requested = false, lease_owner = NULL, lease_until = NULL, updated_at = now()
     WHERE id = $1 AND state = 'cancelled'`,
    [id],
  );
}

/** Gives the job back (graceful stop): another worker may claim it at once and resume from the checkpoint. */
export async function release(db: Queryable, id: string, worker: string): Promise<void> {
  await db.query(
    `UPDATE jobs SET lease_owner = NULL, lease_until = NULL, attempts = greatest(attempts - 1, 0)
     WHERE id = $1 AND lease_owner = $2`,
    [id, worker],
  );
}

export async function jobProgress(db: Queryable, id: string): Promise<string | undefined> {
  const r = await db.query<{ progress: string | null }>('SELECT progress FROM jobs WHERE id = $1', [id]);
  return r.rows[0]?.progress ?? undefined;
}
