// The job queue (API.md §5): jobs are rows claimed with FOR UPDATE SKIP LOCKED and a lease, so that each runs on
// one worker at a time across any number of instances; the lease is extended by a heartbeat and, when it expires
// (the worker died), the job is claimed again and resumed from its last checkpoint. Every state change is
// conditional (`state = 'accepted'`, and for the worker also `lease_owner = me`), so a final state never changes.
// Once final, `updated_at` is when the job ended by the server's clock (the retention sweep counts from it).
import { createHash } from 'node:crypto';
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

/** Job kinds whose output is files (API.md §1: `maxActiveExportsPerUser` and `exportRetention` apply to them). */
export const EXPORT_KINDS: readonly string[] = ['export', 'view-export'];

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
       attempts = attempts + CASE WHEN state = 'accepted' THEN 1 ELSE 0 END,
       updated_at = CASE WHEN state = 'accepted' THEN now() ELSE updated_at END
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

/** Ends the job in a final state at `endedAt` if it is still this worker's accepted job (lock the AsyncJob row first). */
export async function finish(
  tx: Queryable,
  id: string,
  worker: string,
  state: 'completed' | 'failed',
  endedAt: Date,
  error?: string,
): Promise<boolean> {
  const r = await tx.query(
    `UPDATE jobs SET state = $3, error = $4, lease_owner = NULL, lease_until = NULL, updated_at = $5::timestamptz
     WHERE id = $1 AND lease_owner = $2 AND state = 'accepted'`,
    [id, worker, state, error ?? null, endedAt.toISOString()],
  );
  return r.rowCount > 0;
}

/** Records a cancel (only from `accepted`); the worker, wherever it runs, deletes partial files. */
export async function markCancelled(tx: Queryable, id: string, endedAt: Date): Promise<void> {
  await tx.query(
    `UPDATE jobs SET state = 'cancelled', cancel_requested = true, updated_at = $2::timestamptz
     WHERE id = $1 AND state = 'accepted'`,
    [id, endedAt.toISOString()],
  );
}

/** A cancelled job's partial files are gone: nothing is left for any worker to do. */
export async function markCleaned(db: Queryable, id: string): Promise<void> {
  await db.query(
    `UPDATE jobs SET cancel_requested = false, lease_owner = NULL, lease_until = NULL
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

/**
 * Accepted (queued or running) jobs of these kinds started by `owner`. Called under `lockOwner` in the transaction
 * that enqueues the next one, so concurrent kick-offs (on any instance) cannot both see room for one more.
 */
export async function countActive(
  tx: Queryable,
  owner: string | undefined,
  kinds: readonly string[],
): Promise<number> {
  const r = await tx.query<{ n: number | string }>(
    `SELECT count(*) AS n FROM jobs WHERE state = 'accepted' AND owner IS NOT DISTINCT FROM $1 AND kind = ANY($2::text[])`,
    [owner ?? null, kinds],
  );
  return Number(r.rows[0]?.n ?? 0);
}

/** Namespace (first key) of the per-owner transaction advisory locks; the migration lock uses the one-key form. */
const OWNER_LOCK_SPACE = 72_410_015;

/** Serialises, until the end of the transaction, every transaction that locks the same owner (all instances). */
export async function lockOwner(tx: Queryable, owner: string | undefined): Promise<void> {
  // A stable 32-bit key from the owner reference; a collision only makes two owners wait for each other briefly.
  const key = createHash('sha256')
    .update(owner ?? '')
    .digest()
    .readInt32BE(0);
  await tx.query('SELECT pg_advisory_xact_lock($1::int, $2::int)', [OWNER_LOCK_SPACE, key]);
}

/** Ended jobs of these kinds that ended before `cutoff` and have nothing left for a worker (oldest first). */
export async function endedBefore(
  db: Queryable,
  kinds: readonly string[],
  cutoff: Date,
  limit: number,
): Promise<string[]> {
  const r = await db.query<{ id: string }>(
    `SELECT id FROM jobs
     WHERE state <> 'accepted' AND NOT cancel_requested AND kind = ANY($1::text[]) AND updated_at < $2::timestamptz
     ORDER BY updated_at, id LIMIT $3`,
    [kinds, cutoff.toISOString(), limit],
  );
  return r.rows.map((x) => x.id);
}

/** Forgets an ended job whose output is gone; false when it is not (or no longer) there to forget. */
export async function forgetEnded(tx: Queryable, id: string): Promise<boolean> {
  const r = await tx.query(
    `DELETE FROM jobs WHERE id = $1 AND state <> 'accepted' AND NOT cancel_requested`,
    [id],
  );
  return r.rowCount > 0;
}

export async function jobProgress(db: Queryable, id: string): Promise<string | undefined> {
  const r = await db.query<{ progress: string | null }>('SELECT progress FROM jobs WHERE id = $1', [id]);
  return r.rows[0]?.progress ?? undefined;
}
