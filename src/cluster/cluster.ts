// Several worker processes per machine (config `workers`, issue 30): Node's cluster module, whose primary process
// accepts connections on the port and hands them to the workers in turn. The primary serves no request: it prepares
// the database once (starts the embedded PostgreSQL and keeps it, or migrates an external one), forks the workers,
// restarts one that dies (with back-off), and on SIGTERM/SIGINT has every worker drain and stop before it stops the
// database. Each worker is an ordinary Cinder process (src/main.ts) on the database the primary names to it.
import cluster, { type Worker } from 'node:cluster';
import os from 'node:os';
import type { Logger } from 'pino';
import type { Config } from '../config/config.js';
import { installClusterMetricsPrimary } from '../http/metrics-cluster.js';

/** Environment the primary gives each worker (internal to Cinder: not configuration). */
const SLOT_ENV = 'CINDER_CLUSTER_SLOT';
const DATABASE_ENV = 'CINDER_CLUSTER_DATABASE_URL';

/** How many worker processes `config.workers` asks for (`auto`: one per CPU). */
export function workerCount(config: Pick<Config, 'workers'>, cpus = os.availableParallelism()): number {
  return config.workers === 'auto' ? Math.max(1, cpus) : config.workers;
}

/**
 * Why this configuration cannot run several workers, or undefined when it can. PGlite is a database inside one
 * process; the embedded PostgreSQL and an external one serve every worker.
 */
export function clusterRefusal(config: Pick<Config, 'databaseUrl' | 'embeddedEngine'>): string | undefined {
  if (config.databaseUrl || config.embeddedEngine === 'postgres') return undefined;
  return (
    `workers > 1 needs PostgreSQL: embeddedEngine "${config.embeddedEngine}" (PGlite) runs inside one process. ` +
    'Use the embedded PostgreSQL (embeddedEngine "postgres", the default) or set databaseUrl, or set workers to 1'
  );
}

/** This process as a worker of a Cinder cluster, or undefined when it is not one. */
export interface ClusterWorker {
  /** 1..N: the worker's place, kept by the worker that replaces it. */
  slot: number;
  /** The database the primary prepared (migrated): the embedded PostgreSQL's socket, or databaseUrl. */
  databaseUrl: string;
}

export function clusterWorker(env: NodeJS.ProcessEnv = process.env): ClusterWorker | undefined {
  if (!cluster.isWorker) return undefined;
  const slot = Number(env[SLOT_ENV]);
  const databaseUrl = env[DATABASE_ENV];
  if (!Number.isInteger(slot) || slot < 1 || !databaseUrl) return undefined;
  return { slot, databaseUrl };
}

/** The database as the primary holds it while the workers run. */
export interface PreparedDatabase {
  /** Where the workers connect. */
  url: string;
  /** Stops it (the embedded PostgreSQL) or closes the primary's pool (external), after every worker stopped. */
  close(): Promise<void>;
}

export interface PrimaryOptions {
  config: Config;
  workers: number;
  log: Logger;
  /** Opens (embedded: starts) and migrates the database, once, before any worker starts. */
  prepare(): Promise<PreparedDatabase>;
  /** Ends the process (tests pass their own). */
  exit?: (code: number) => void;
}

/** A worker that ran at least this long before it died starts a new series of restarts (short waits again). */
const STAYED_UP_MS = 30_000;

/** The wait before restart `n` of a series (1, 2, …): 0.5 s doubling to 10 s. */
export function restartDelayMs(n: number): number {
  return Math.min(500 * 2 ** Math.max(0, n - 1), 10_000);
}

interface Slot {
  n: number;
  worker?: Worker;
  startedAt: number;
  /** Deaths in a row of workers that did not stay up STAYED_UP_MS. */
  failures: number;
  timer?: NodeJS.Timeout;
}

/**
 * The one call site where the primary aggregates the workers' metrics over IPC (issue 30 point 5, GET /metrics,
 * built beside this). Called once, before any worker is forked.
 */
function installPrimaryMetrics(config: Config, log: Logger): void {
  if (!config.metricsToken) return;
  installClusterMetricsPrimary();
  log.debug("cluster metrics: the primary aggregates the workers' figures for GET /metrics");
}

/** Runs the primary process until SIGTERM/SIGINT (or a start-up failure), then ends the process. */
export async function runPrimary(opts: PrimaryOptions): Promise<void> {
  const { config, workers, log } = opts;
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  let database: PreparedDatabase;
  try {
    database = await opts.prepare();
  } catch (err) {
    log.fatal({ err: (err as Error).message }, 'cannot prepare the database for the workers');
    exit(1);
    return;
  }
  installPrimaryMetrics(config, log);

  const slots: Slot[] = Array.from({ length: workers }, (_, i) => ({ n: i + 1, startedAt: 0, failures: 0 }));
  const everReady = new Set<number>();
  let allReadyLogged = false;
  let stopping = false;

  const fork = (slot: Slot): void => {
    slot.timer = undefined;
    if (stopping) return;
    slot.startedAt = Date.now();
    const worker = cluster.fork({ [SLOT_ENV]: String(slot.n), [DATABASE_ENV]: database.url });
    slot.worker = worker;
    worker.on('listening', () => {
      everReady.add(slot.n);
      log.info({ workerSlot: slot.n, workerPid: worker.process.pid }, 'worker is listening');
      if (!allReadyLogged && everReady.size === workers) {
        allReadyLogged = true;
        log.info({ workers, baseUrl: config.baseUrl }, 'all workers are ready');
      }
    });
    worker.on('exit', (code, signal) => {
      if (slot.worker === worker) slot.worker = undefined;
      if (stopping) return;
      // A worker that never served and whose place never did either: the configuration or the port is wrong (the
      // worker logged why); the cluster stops as a single process would.
      if (!everReady.has(slot.n)) {
        log.fatal(
          { workerSlot: slot.n, workerPid: worker.process.pid, code, signal },
          'a worker failed to start; stopping',
        );
        void stop('worker start-up failure', 1);
        return;
      }
      slot.failures = Date.now() - slot.startedAt >= STAYED_UP_MS ? 1 : slot.failures + 1;
      const delay = restartDelayMs(slot.failures);
      log.error(
        {
          workerSlot: slot.n,
          workerPid: worker.process.pid,
          code,
          signal,
          restartInMs: delay,
          failures: slot.failures,
        },
        slot.failures >= 5 ? 'worker keeps dying; restarting' : 'worker died; restarting',
      );
      slot.timer = setTimeout(() => fork(slot), delay);
    });
  };

  const stop = async (why: string, code = 0): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info({ signal: why }, 'shutting down: stopping the workers');
    // The workers have shutdownTimeout to drain; a little longer here, then they are killed.
    const deadline = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeout }, 'workers took too long to stop; killing them');
      for (const s of slots) s.worker?.process.kill('SIGKILL');
    }, config.shutdownTimeout + 2000);
    deadline.unref();
    let failed = code !== 0;
    const exits = slots.map((s) => {
      if (s.timer) clearTimeout(s.timer);
      const w = s.worker;
      if (!w || w.process.exitCode !== null || w.process.signalCode !== null) return Promise.resolve();
      return new Promise<void>((resolve) => {
        w.once('exit', (c: number | null) => {
          if (c !== 0) failed = true;
          resolve();
        });
        w.process.kill('SIGTERM');
      });
    });
    await Promise.all(exits);
    clearTimeout(deadline);
    try {
      await database.close();
    } catch (err) {
      log.error({ err: (err as Error).message }, 'error while closing the database');
      failed = true;
    }
    log.info('stopped');
    exit(failed ? 1 : 0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));

  log.info({ workers, port: config.port }, 'starting worker processes');
  for (const slot of slots) fork(slot);
}
