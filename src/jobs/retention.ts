// Export retention (API.md §1 `exportRetention`): a periodic sweep, run by every server process, that deletes the
// files of export jobs which ended (completed, failed, cancelled) longer ago than the retention, removes the job's
// `output`, and then forgets the job's queue row, which is the sweep's only to-do list. Safe with several
// instances at once and after a restart: the state is in the database, files are deleted before the row (a crash in
// between leaves the row, and the next sweep deletes again), and only the sweep whose DELETE of the row succeeds
// writes the AsyncJob's next version.
import { periodic } from './periodic.js';
import { selectCurrent } from '../fhir/repository/store.js';
import { dropJobOutput } from './async-job.js';
import type { JobEnv } from './kind.js';
import { EXPORT_KINDS, endedBefore, forgetEnded } from './queue.js';
import { exportDirKey } from './kinds/export.js';

export interface RetentionOptions {
  env: JobEnv;
  /** Seconds after a job ends until its files and `output` are deleted. */
  retentionSeconds: number;
  /** Pause between sweeps (default: a tenth of the retention, between 1 s and 10 minutes). */
  intervalMs?: number;
  /** Jobs handled per database query. */
  batchSize?: number;
  log?: { warn(obj: unknown, msg: string): void };
}

export interface RetentionSweeper {
  start(): void;
  stop(): Promise<void>;
  /** One sweep now (tests, with an advanced clock); the number of jobs whose output it deleted. */
  sweepOnce(): Promise<number>;
}

export function createRetentionSweeper(opts: RetentionOptions): RetentionSweeper {
  const { env } = opts;
  const intervalMs = opts.intervalMs ?? Math.min(Math.max(opts.retentionSeconds * 100, 1000), 600_000);
  const batchSize = opts.batchSize ?? 100;
  const loop = periodic(
    () =>
      sweepOnce().catch((err: unknown) =>
        opts.log?.warn({ err }, 'export retention sweep failed; retrying later'),
      ),
    intervalMs,
  );

  async function expire(id: string): Promise<boolean> {
    await env.files.deleteDir(exportDirKey(id));
    return env.db.transaction(async (tx) => {
      // Lock order everywhere: the AsyncJob row, then the queue row.
      const row = await selectCurrent(tx, 'AsyncJob', id, true);
      if (!(await forgetEnded(tx, id))) return false;
      if (row) await dropJobOutput(tx, env, row);
      return true;
    });
  }

  async function sweepOnce(): Promise<number> {
    const cutoff = new Date(env.clock().getTime() - opts.retentionSeconds * 1000);
    let expired = 0;
    for (;;) {
      const ids = await endedBefore(env.db, EXPORT_KINDS, cutoff, batchSize);
      let failed = 0;
      for (const id of ids) {
        try {
          if (await expire(id)) expired++;
        } catch (err) {
          // One job's trouble (a file system error) must not keep the others' files forever; it is retried later.
          failed++;
          opts.log?.warn({ err, jobId: id }, "export retention: deleting a job's output failed");
        }
      }
      // A full batch that failed entirely would come back unchanged: stop until the next sweep.
      if (ids.length < batchSize || failed === ids.length || loop.stopped) return expired;
    }
  }

  return {
    start: () => loop.start(),
    stop: () => loop.stop(),
    sweepOnce,
  };
}
