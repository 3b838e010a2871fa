// Entry point: load the configuration, open the database, migrate, ensure the super administrator,
// build the app, listen, and shut down cleanly on SIGINT/SIGTERM.
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { pino, type Logger } from 'pino';
import { turnBatchedLines } from './log-lines.js';
import { buildApp } from './app.js';
import { ensureSuperAdmin } from './auth/bootstrap.js';
import { loadKeyRing } from './auth/keys.js';
import { ConfigError, loadConfig, type Config } from './config/config.js';
import type { Db } from './storage/db.js';
import { DirLockedError } from './storage/dir-lock.js';
import { migrate } from './storage/migrate.js';
import { openPglite } from './storage/pglite.js';
import { openPgliteWorker } from './storage/pglite-worker.js';
import {
  EmbeddedPostgresAccessError,
  EmbeddedPostgresUnavailableError,
  hasEmbeddedPostgres,
  startEmbeddedPostgres,
} from './storage/embedded-postgres.js';
import { moveFromPglite, pgliteToMove } from './storage/from-pglite.js';
import { openPostgres } from './storage/postgres.js';
import { createReadRouter, openReplicas, primaryOnly } from './storage/replicas.js';
import { localSignals, postgresSignals } from './storage/signals.js';
import { openCache } from './storage/cache/index.js';
import { fileStoreFor } from './storage/db-files.js';
import { createJobRunner } from './jobs/runner.js';
import { createIndexBackfill } from './jobs/index-backfill.js';
import { createRetentionSweeper } from './jobs/retention.js';
import { createAuditChain } from './audit/chain.js';
import { createAuditMaintenance } from './audit/retention.js';
import { contextLogger } from './http/plugins/request-log.js';
import { defaultKinds } from './jobs/kinds/index.js';
import { createSubscriptionEngine } from './fhir/subscriptions/engine.js';
import { createSearchParamRegistry } from './fhir/search/custom-registry.js';
import { createCsvRuntime } from './fhir/csv/runtime.js';
import type { SharedSet } from './fhir/conformance/model.js';
import { createMetrics } from './metrics/metrics.js';
import { observeDb } from './storage/observed-db.js';
import { createSharedSet } from './fhir/conformance/shared-set.js';
import {
  clusterRefusal,
  clusterWorker,
  runPrimary,
  workerCount,
  type ClusterWorker,
  type PreparedDatabase,
} from './cluster/cluster.js';

/** Set in a cluster worker (config `workers` > 1): the database comes from the primary (src/cluster/cluster.ts). */
const worker: ClusterWorker | undefined = clusterWorker();

/** The embedded database of `dataDir`: PostgreSQL binaries by default, PGlite when configured (or moved from). */
async function openEmbedded(
  config: Config,
  log: Logger,
  workers = 1,
): Promise<{ db: Db; requestDb: Db; url?: string }> {
  if (config.embeddedEngine !== 'postgres') {
    log.info(
      { dataDir: config.dataDir, engine: config.embeddedEngine },
      'using the embedded database (PGlite)',
    );
    const db =
      config.embeddedEngine === 'pglite'
        ? await openPglite(config.dataDir)
        : await openPgliteWorker(config.dataDir);
    await migrate(db);
    return { db, requestDb: db };
  }
  let server;
  try {
    server = await startEmbeddedPostgres(config.dataDir, {
      poolSize: config.databasePoolSize,
      // Cluster: each worker's two pools and its signal connection, beside the primary's pool.
      ...(workers > 1 ? { maxConnections: (2 * workers + 1) * config.databasePoolSize + workers + 10 } : {}),
      settings: config.embeddedPostgresSettings,
      onError: (err) => log.error({ err: err.message }, 'embedded PostgreSQL error'),
      // PostgreSQL stopped by itself (killed, out of memory): it is started again on the same directory, its crash
      // recovery keeping committed work; requests answer 503 meanwhile.
      onExit: ({ code, signal, log: lastLog, restartInMs, failures }) =>
        log.error(
          { code, signal, log: lastLog, restartInMs, failures },
          failures >= 5
            ? 'embedded PostgreSQL keeps exiting; restarting'
            : 'embedded PostgreSQL exited; restarting',
        ),
      onRestartFailed: ({ error, attempt, retryInMs, failures }) =>
        log.error(
          { err: error.message, attempt, retryInMs, failures },
          failures >= 5
            ? 'embedded PostgreSQL keeps failing to start; still retrying'
            : 'embedded PostgreSQL did not restart; retrying',
        ),
      onRestart: ({ attempts, downSeconds }) =>
        log.warn({ attempts, downSeconds: Number(downSeconds.toFixed(2)) }, 'embedded PostgreSQL restarted'),
    });
  } catch (err) {
    // Where PostgreSQL cannot run (no binaries for this platform, or root in a private directory) and has no data
    // yet, PGlite serves instead; a later start where it can run moves the data into it.
    const unusable =
      err instanceof EmbeddedPostgresUnavailableError || err instanceof EmbeddedPostgresAccessError;
    if (!unusable || hasEmbeddedPostgres(config.dataDir) || workers > 1) throw err;
    log.warn({ reason: err.message }, 'embedded PostgreSQL cannot run here; using PGlite instead');
    return openEmbedded({ ...config, embeddedEngine: 'pglite' }, log);
  }
  const db = server.db;
  try {
    log.info(
      { dataDir: config.dataDir, startSeconds: Number(server.startSeconds.toFixed(2)) },
      'using the embedded database (PostgreSQL)',
    );
    if (pgliteToMove(config.dataDir)) {
      log.warn(
        { dataDir: config.dataDir },
        'moving the PGlite database of dataDir into the embedded PostgreSQL (once; this may take a while)',
      );
      const moved = await moveFromPglite(config.dataDir, db);
      log.warn(
        moved,
        `moved ${moved.rows} rows of ${moved.tables} tables from PGlite; the old directory is kept as ${moved.backup} and can be deleted`,
      );
    }
    await migrate(db);
    // Requests get their own pool whose statements stop at statementTimeout, as on PostgreSQL.
    const requestDb =
      config.statementTimeout > 0
        ? await server.openPool({
            connectTimeoutMs: config.databaseConnectTimeout,
            statementTimeoutMs: config.statementTimeout,
          })
        : db;
    return { db, requestDb, url: server.url };
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}

/** A cluster worker's pools, on the database its primary started or migrated. */
async function openWorkerDatabase(
  config: Config,
  log: Logger,
  url: string,
): Promise<{ db: Db; requestDb: Db }> {
  const open = (statementTimeoutMs?: number): Promise<Db> =>
    openPostgres(url, {
      max: config.databasePoolSize,
      connectTimeoutMs: config.databaseConnectTimeout,
      ...(statementTimeoutMs ? { statementTimeoutMs } : {}),
      onError: (err) => log.warn({ err: err.message }, 'idle PostgreSQL client error'),
    });
  const db = await open();
  try {
    return { db, requestDb: config.statementTimeout > 0 ? await open(config.statementTimeout) : db };
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}

/**
 * The primary of a cluster: starts the embedded PostgreSQL (kept until the workers stopped) or migrates the external
 * one, and makes the super administrator and the signing keys once, before the workers start.
 */
async function prepareForWorkers(config: Config, log: Logger, workers: number): Promise<PreparedDatabase> {
  const refusal = clusterRefusal(config);
  if (refusal) throw new Error(refusal);
  const opened: { db: Db; requestDb: Db; url?: string } = config.databaseUrl
    ? await openDatabase(config, log)
    : await openEmbedded({ ...config, statementTimeout: 0 }, log, workers);
  const { db } = opened;
  try {
    if (opened.requestDb !== db) await opened.requestDb.close();
    const url = config.databaseUrl ?? opened.url;
    if (!url) throw new Error(clusterRefusal({ databaseUrl: undefined, embeddedEngine: 'pglite' }));
    await bootstrap(db, config, log);
    await loadKeyRing(db);
    return { url, close: () => db.close() };
  } catch (err) {
    await db.close().catch(() => undefined);
    throw err;
  }
}

/** Ensures the super administrator, saying what was generated (once: a cluster's primary, or the single process). */
async function bootstrap(db: Db, config: Config, log: Logger): ReturnType<typeof ensureSuperAdmin> {
  const fhirBase = `${config.baseUrl}fhir/R4`;
  const boot = await ensureSuperAdmin(
    db,
    { clock: () => new Date(), newId: randomUUID, fhirBase },
    config.admin,
  );
  if (!boot.consoleClient)
    log.warn(
      'The admin console cannot sign anyone in: ClientApplication/cinder-console belongs to a tenant project',
    );
  const g = boot.generated;
  if (g.password)
    log.warn(
      `Generated super administrator password for ${config.admin.email}: ${g.password} (shown once; set admin.password to choose one)`,
    );
  if (g.clientId) log.warn(`Generated super administrator client id: ${g.clientId}`);
  if (g.clientSecret)
    log.warn(
      `Generated super administrator client secret: ${g.clientSecret} (shown once; set admin.clientSecret to choose one)`,
    );
  return boot;
}

async function openDatabase(config: Config, log: Logger): Promise<{ db: Db; requestDb: Db }> {
  if (worker) return openWorkerDatabase(config, log, worker.databaseUrl);
  if (!config.databaseUrl) return openEmbedded(config, log);
  // PostgreSQL may come up after us (containers, restarts): retry with backoff, saying so.
  for (let attempt = 1; ; attempt++) {
    const db = await openPostgres(config.databaseUrl, {
      max: config.databasePoolSize,
      connectTimeoutMs: config.databaseConnectTimeout,
      onError: (err) => log.warn({ err: err.message }, 'idle PostgreSQL client error'),
    });
    try {
      await migrate(db);
      log.info('using PostgreSQL');
      // On PostgreSQL, requests get their own pool whose statements stop at statementTimeout; migrations and jobs
      // keep the first pool, without a limit (a job's chunk or a migration may rightly take longer).
      const requestDb =
        config.statementTimeout > 0
          ? await openPostgres(config.databaseUrl, {
              max: config.databasePoolSize,
              connectTimeoutMs: config.databaseConnectTimeout,
              statementTimeoutMs: config.statementTimeout,
              onError: (err) => log.warn({ err: err.message }, 'idle PostgreSQL client error'),
            })
          : db;
      return { db, requestDb };
    } catch (err) {
      await db.close().catch(() => undefined);
      if (attempt >= 30) throw err;
      const wait = Math.min(500 * 2 ** (attempt - 1), 5000);
      log.warn(
        { attempt, waitMs: wait, err: (err as Error).message },
        'PostgreSQL not reachable yet; retrying',
      );
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(process.argv.slice(2), process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    throw err;
  }
  // The configured packages are checked before anything opens (a bad name stops start-up, naming it); their
  // resources are read on first use (API.md §9).
  let sharedConformance: SharedSet;
  try {
    sharedConformance = createSharedSet({ packages: config.packages });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exit(1);
  }
  const workers = workerCount(config);
  const clustered = workers > 1 && !worker;
  // In a cluster every line says which process wrote it: the primary, or worker 1..N (and its pid).
  // The lines of one turn of the event loop in one write (log-lines.ts); what is pending is written on exit.
  const logLines = turnBatchedLines(pino.destination({ dest: 1, sync: true }));
  process.on('exit', () => logLines.flushSync());
  const log: Logger = pino(
    {
      level: config.logLevel,
      base: worker
        ? { service: 'cinder', worker: worker.slot, pid: process.pid }
        : clustered
          ? { service: 'cinder', worker: 'primary', pid: process.pid }
          : { service: 'cinder' },
    },
    logLines,
  );
  // Last resort: failures are handled where they happen (a worker's in the FHIRPath pool fails only its own request,
  // issue 25), so nothing a request does should get here. An exception nothing caught leaves the process in an
  // unknown state: it is logged and the process exits 1, for its supervisor to restart. A rejection nothing awaited
  // has already been given up on by the code that made it: it is logged as an error and every other tenant goes on
  // being served (Node's default would end the process).
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception; exiting');
    process.exit(1);
  });
  process.on('unhandledRejection', (reason) => {
    log.error({ err: reason }, 'unhandled promise rejection');
  });
  if (clustered) {
    const refusal = clusterRefusal(config);
    if (refusal) {
      log.fatal(refusal);
      process.exit(1);
    }
    await runPrimary({ config, workers, log, prepare: () => prepareForWorkers(config, log, workers) });
    return;
  }
  let db: Db;
  let requestDb: Db;
  try {
    ({ db, requestDb } = await openDatabase(config, log));
  } catch (err) {
    if (
      err instanceof DirLockedError ||
      err instanceof EmbeddedPostgresUnavailableError ||
      err instanceof EmbeddedPostgresAccessError
    ) {
      log.fatal(err.message);
      process.exit(1);
    }
    throw err;
  }
  const fhirBase = `${config.baseUrl}fhir/R4`;
  // Metrics (config metricsToken, src/metrics): the app times the requests' pool; the jobs' pool is timed here.
  const metrics = config.metricsToken ? createMetrics() : undefined;
  const observedJobs = metrics ? observeDb(db, metrics.dbObserver('jobs')) : undefined;
  const jobsDb = observedJobs ?? db;
  if (observedJobs && requestDb !== db) metrics?.watchPool('jobs', observedJobs);
  const boot = await bootstrap(db, config, log);
  const keys = await loadKeyRing(db);
  // Several processes on one database (external, or a cluster's embedded one) hear each other through it.
  const sharedUrl = config.databaseUrl ?? worker?.databaseUrl;
  const signals = sharedUrl
    ? postgresSignals(sharedUrl, {
        connectTimeoutMs: config.databaseConnectTimeout,
        onError: (err) => log.warn({ err: err.message }, 'signal connection error'),
      })
    : localSignals();
  // Inside a request, lines logged by the cache carry the request's id.
  const cache = openCache({
    ...(config.redisUrl ? { redisUrl: config.redisUrl } : {}),
    timeoutMs: config.redisTimeout,
    log: contextLogger(log as unknown as FastifyBaseLogger),
  });
  // Read replicas (databaseReadUrls, only with an external PostgreSQL): src/storage/replicas.ts decides per read.
  // With metrics, reads are timed like the app's other statements: on the primary under `request`, on a replica
  // under `replica <name>` (with its pool's connections).
  const timedReads = <D extends Db>(d: D, pool: string): Db => {
    if (!metrics) return d;
    const observed = observeDb(d, metrics.dbObserver(pool));
    if (pool !== 'request') metrics.watchPool(pool, observed);
    return observed;
  };
  const readPrimary = timedReads(requestDb, 'request');
  const reads =
    config.databaseUrl && config.databaseReadUrls.length > 0
      ? createReadRouter({
          primary: readPrimary,
          replicas: (
            await openReplicas(config.databaseReadUrls, {
              max: config.databasePoolSize,
              connectTimeoutMs: config.databaseConnectTimeout,
              statementTimeoutMs: config.statementTimeout,
              onError: (err) => log.warn({ err: err.message }, 'idle PostgreSQL replica client error'),
            })
          ).map((r) => ({ ...r, db: timedReads(r.db, `replica ${r.name}`) })),
          maxLagMs: config.databaseReadMaxLagMs,
          checkMs: config.databaseReadCheckMs,
          shared: cache,
          log,
        })
      : primaryOnly(readPrimary);
  await reads.check();
  reads.start();
  const files = fileStoreFor(db, config.dataDir, !config.databaseUrl);
  // One FHIRPath worker pool for `$csv` requests and CSV export jobs alike.
  const csv = createCsvRuntime({ fhirpathTimeout: config.fhirpathTimeout });
  // Subscriptions: the delivery workers use the jobs' pool (no statement timeout).
  const subscriptions = createSubscriptionEngine({
    workerDb: jobsDb,
    signals,
    fhirBase,
    allowedOutboundHosts: config.allowedOutboundHosts,
    maxSubscriptionsPerProject: config.maxSubscriptionsPerProject,
    log,
    // A delivery's lease is a job's: a deliverer that died gives its subscriptions back after jobLeaseSeconds.
    delivery: {
      leaseMs: config.jobLeaseSeconds * 1000,
      ...(metrics ? { onDelivered: metrics.subscriptionDelivered } : {}),
    },
  });
  const app = await buildApp({
    subscriptions,
    sharedConformance,
    csv,
    config,
    db: requestDb,
    keys,
    signals,
    cache,
    counters: cache,
    files,
    reads,
    logger: log as unknown as FastifyBaseLogger,
    ...(metrics ? { metrics } : {}),
  });
  const searchParams = createSearchParamRegistry({ signals, shared: sharedConformance, log });
  const runner = createJobRunner({
    env: {
      db: jobsDb,
      files,
      fhirBase,
      clock: () => new Date(),
      newId: randomUUID,
      searchParams,
      ...(metrics ? { wrote: metrics.jobWrote } : {}),
      reads,
    },
    signals,
    kinds: defaultKinds({
      export: {
        pageSize: config.exportPageSize,
        fileResources: config.exportFileResources,
        log,
        fhirpath: csv.fhirpath,
      },
      viewExportMaxCells: config.viewExportMaxCells,
    }),
    concurrency: config.jobConcurrency,
    leaseMs: config.jobLeaseSeconds * 1000,
    pauseMs: config.jobPauseMs,
    log,
  });
  // Index tables added by an upgrade are filled for older resources in the background, by the instances that run
  // jobs, once across them (src/jobs/index-backfill.ts).
  const backfill = createIndexBackfill({
    db: jobsDb,
    searchParams,
    leaseMs: config.jobLeaseSeconds * 1000,
    pauseMs: config.jobPauseMs,
    log,
  });
  // Every instance sweeps; the sweep is safe to run concurrently (src/jobs/retention.ts).
  const retention = createRetentionSweeper({
    env: { db: jobsDb, files, fhirBase, clock: () => new Date(), newId: randomUUID },
    retentionSeconds: config.exportRetention,
    log,
  });
  // Every instance seals audit chains and applies auditRetention; both are safe concurrently (src/audit/retention.ts).
  const auditMaintenance = createAuditMaintenance({
    db: jobsDb,
    clock: () => new Date(),
    retentionSeconds: config.auditRetention,
    chain: createAuditChain(db),
    log,
  });
  let stopping = false;
  const stop = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing in-flight requests');
    const deadline = setTimeout(() => {
      log.error({ timeoutMs: config.shutdownTimeout }, 'shutdown took too long; exiting');
      process.exit(1);
    }, config.shutdownTimeout);
    deadline.unref();
    try {
      // At once: stop accepting connections (in-flight requests finish; requests on kept-alive connections get
      // 503), and let running jobs end their current chunk and give their leases back, to be resumed anywhere.
      await Promise.all([
        app.close(),
        runner.stop(),
        backfill.stop(),
        retention.stop(),
        auditMaintenance.stop(),
        subscriptions.deliverer.stop(),
      ]);
      await csv.fhirpath.close();
      await signals.close();
      await cache.close();
      await reads.close();
      if (requestDb !== db) await requestDb.close();
      await db.close();
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'error while shutting down');
      process.exit(1);
    }
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
  // A worker whose primary is gone (killed) has no one to hand it connections: it stops.
  if (worker) process.on('disconnect', () => void stop('primary gone'));
  await app.listen({ port: config.port, host: config.host });
  runner.start();
  if (config.jobConcurrency > 0) backfill.start();
  retention.start();
  auditMaintenance.start();
  subscriptions.deliverer.start();
  log.info({ baseUrl: config.baseUrl, superAdminClientId: boot.clientId }, 'Cinder is ready');
}

main().catch((err: unknown) => {
  // PGlite throws plain objects; say what they hold rather than [object Object].
  const why =
    err instanceof Error ? err.message : typeof err === 'object' ? JSON.stringify(err) : String(err);
  process.stderr.write(`Cinder failed to start: ${why}\n`);
  process.exit(1);
});
