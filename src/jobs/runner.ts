// The job runner of one server process (API.md §5, ARCHITECTURE habit 9): polls the queue (and wakes up on the
// `jobs` signal), runs up to `concurrency` jobs one checkpointed chunk at a time, extends leases by heartbeat, and
// stops a job between chunks when it learns of a cancel — from the signal (any instance) or, as the safety net,
// from the conditional checkpoint write that fails once the job is no longer `accepted`.
import { randomUUID } from 'node:crypto';
import { DbUnavailableError } from '../storage/db.js';
import type { Signals } from '../storage/signals.js';
import { FhirError, outcome, type IssueCode } from '../fhir/outcome.js';
import type { JobEnv, JobKind } from './kind.js';
import { finalizeJob } from './async-job.js';
import { checkpoint, claim, heartbeat, JOBS_CHANNEL, markCleaned, release, type JobRow } from './queue.js';

export interface RunnerOptions {
  env: JobEnv;
  signals: Signals;
  kinds: Record<string, JobKind<never>>;
  concurrency: number;
  pollMs?: number;
  leaseMs?: number;
  /** A job whose lease expired this many times (its worker died each time) fails instead of resuming. */
  maxAttempts?: number;
  log?: { warn(obj: unknown, msg: string): void; error(obj: unknown, msg: string): void };
  /** Pause after each chunk, leaving database capacity to interactive traffic (0: none). */
  pauseMs?: number;
  /** Test hook: awaited after each chunk (e.g. to slow a job down). */
  afterChunk?: (job: JobRow) => Promise<void>;
}

export interface JobRunner {
  readonly worker: string;
  start(): void;
  /** Stops claiming, lets running jobs end their current chunk and gives their leases back. */
  stop(): Promise<void>;
}

export function createJobRunner(opts: RunnerOptions): JobRunner {
  const { env, signals } = opts;
  const worker = `${randomUUID()}`;
  const pollMs = opts.pollMs ?? 1000;
  const leaseMs = opts.leaseMs ?? 30_000;
  const maxAttempts = opts.maxAttempts ?? 3;
  const running = new Map<string, { cancelled: boolean; done: Promise<void> }>();
  let started = false;
  let stopping = false;
  let wake: (() => void) | undefined;
  let loop: Promise<void> | undefined;

  signals.subscribe(JOBS_CHANNEL, (payload) => {
    if (payload.startsWith('cancel ')) {
      const job = running.get(payload.slice(7));
      if (job) job.cancelled = true;
    }
    wake?.();
  });

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  async function cleanUp(job: JobRow, kind: JobKind<never> | undefined): Promise<void> {
    await kind?.cancel(env, job);
    await markCleaned(env.db, job.id);
  }

  /** Fails the job with an error OperationOutcome: the issue code of a FhirError (a limit: too-costly), else exception. */
  async function fail(job: JobRow, message: string, code: IssueCode = 'exception'): Promise<void> {
    const output = {
      resourceType: 'Parameters',
      parameter: [{ name: 'outcome', resource: outcome('error', code, message) }],
    };
    await finalizeJob(env.db, env, job.id, worker, 'failed', { error: message, output });
  }

  async function runJob(job: JobRow, self: { cancelled: boolean }): Promise<void> {
    const kind = opts.kinds[job.kind];
    if (job.state === 'cancelled') return cleanUp(job, kind);
    if (!kind) return fail(job, `Unknown job kind: ${job.kind}`);
    if (job.attempts > maxAttempts) {
      await fail(job, `The job was interrupted ${maxAttempts} times (its server stopped); giving up`);
      return kind.cancel(env, job);
    }
    const beat = setInterval(() => {
      heartbeat(env.db, job.id, worker, leaseMs)
        .then((mine) => {
          if (!mine) self.cancelled = true;
        })
        .catch(() => undefined);
    }, leaseMs / 3);
    try {
      let state: never;
      if (job.checkpoint == null) state = (await kind.start(env, job)) as never;
      else {
        state = job.checkpoint as never;
        await kind.resume(env, job, state);
      }
      for (;;) {
        if (self.cancelled) return cleanUp(job, kind);
        if (stopping) return release(env.db, job.id, worker);
        const step = await kind.runStep(env, job, state);
        await opts.afterChunk?.(job);
        if (opts.pauseMs) await new Promise((r) => setTimeout(r, opts.pauseMs));
        if (self.cancelled) return cleanUp(job, kind);
        if (step.done) {
          const ok = await finalizeJob(env.db, env, job.id, worker, 'completed', {
            ...(step.output ? { output: step.output } : {}),
          });
          if (!ok) await cleanUp(job, kind);
          return;
        }
        if (!(await checkpoint(env.db, job.id, worker, step.state, step.progress))) return cleanUp(job, kind);
        state = step.state;
      }
    } catch (err) {
      // A database outage is not the job's fault: give it back, to be resumed from its checkpoint (or, if even
      // that fails, claimed again when the lease expires).
      if (stopping || err instanceof DbUnavailableError) {
        opts.log?.warn({ err, jobId: job.id }, 'job interrupted; it will resume');
        return release(env.db, job.id, worker).catch(() => undefined);
      }
      opts.log?.error({ err, jobId: job.id }, 'job failed');
      await fail(job, (err as Error).message, err instanceof FhirError ? err.issueCode : 'exception');
      await kind.cancel(env, job).catch(() => undefined);
    } finally {
      clearInterval(beat);
    }
  }

  async function claimLoop(): Promise<void> {
    while (!stopping) {
      let claimed: JobRow | undefined;
      if (running.size < opts.concurrency) {
        try {
          claimed = await claim(env.db, worker, leaseMs);
        } catch (err) {
          opts.log?.warn({ err }, 'claiming a job failed');
        }
      }
      if (!claimed) {
        await sleep(pollMs);
        continue;
      }
      const job = claimed;
      const self = { cancelled: false, done: Promise.resolve() };
      self.done = runJob(job, self)
        .catch((err: unknown) => opts.log?.error({ err, jobId: job.id }, 'job runner error'))
        .finally(() => {
          running.delete(job.id);
          wake?.();
        });
      running.set(job.id, self);
    }
  }

  return {
    worker,
    start() {
      if (started || opts.concurrency <= 0) return;
      started = true;
      loop = claimLoop();
    },
    async stop() {
      stopping = true;
      wake?.();
      await loop;
      await Promise.all([...running.values()].map((r) => r.done));
    },
  };
}
