// The metrics of one server process in Prometheus's text format (https://prometheus.io/docs/instrumenting/exposition_formats/),
// kept with prom-client in a registry of their own (never the library's global one: tests build many apps in one
// process). Every label takes its values from a small fixed set (route patterns, methods, status codes, job kinds,
// the names of the configured read replicas): never an id, a project, a URL or a query string. Figures that live in
// the database (job queue, subscription outbox) are read when scraped, by one cheap query each, and kept
// QUEUE_CACHE_MS.
import client from 'prom-client';
import type { Queryable } from '../storage/db.js';
import type { DbObserver, DbOperation, ObservedDb } from '../storage/observed-db.js';
import type { ReplicaStatus } from '../storage/replicas.js';

/** Seconds: from a cache hit (about 1 ms) to the statement timeout (25 s). */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
const DB_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds from a write's commit to its notification's delivery: poll interval (200 ms) up to the retry window. */
const LAG_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** How long the queue figures read from the database are reused (a scrape every second reads them once in 5). */
export const QUEUE_CACHE_MS = 5000;
/** Undelivered subscription events counted at most (the count walks only undelivered rows, and at most this many). */
export const PENDING_EVENTS_CAP = 100_000;

export interface Metrics {
  readonly registry: client.Registry;
  /** One answered request: its method, its route pattern (undefined: no route matched), status and seconds. */
  request(method: string, route: string | undefined, status: number, seconds: number): void;
  /** The observer of one database pool's statements (`pool`: a fixed name such as `request` or `jobs`). */
  dbObserver(pool: string): DbObserver;
  /** Report this pool's connections at each scrape. */
  watchPool(pool: string, db: Pick<ObservedDb, 'stats'>): void;
  /** Read the job queue and the subscription outbox from this database at scrape time. */
  watchQueues(db: Queryable): void;
  /**
   * Report each read replica's state as last probed (up, in use, replay lag, WAL bytes behind), labelled by its name
   * (`host:port/database`, never its URL).
   */
  watchReplicas(status: () => readonly ReplicaStatus[]): void;
  /** Report the AuditEvents buffered in memory, not yet stored, at each scrape. */
  watchAuditBacklog(buffered: () => number): void;
  /** What an export job's step wrote: resources of a bulk export, rows of a view export. */
  jobWrote(kind: 'export' | 'view-export', count: number): void;
  /** A subscription notification delivered (or handed to its websockets) `lagSeconds` after its event was recorded. */
  subscriptionDelivered(lagSeconds: number): void;
  /** The text of a scrape of this process alone. */
  scrape(): Promise<string>;
  readonly contentType: string;
}

const KIND = /^[a-z][a-z-]{0,31}$/;

interface QueueFigures {
  jobs: { kind: string; status: string; n: number; age: number }[];
  pending: { n: number; age: number } | undefined;
}

export interface MetricsOptions {
  /** Process figures (memory, CPU, event-loop lag, handles) from prom-client's default collectors (default true). */
  processMetrics?: boolean;
  clock?: () => number;
}

export function createMetrics(opts: MetricsOptions = {}): Metrics {
  const registry = new client.Registry();
  const clock = opts.clock ?? Date.now;
  if (opts.processMetrics !== false) client.collectDefaultMetrics({ register: registry });

  const requests = new client.Counter({
    name: 'cinder_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status code.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const durations = new client.Histogram({
    name: 'cinder_http_request_duration_seconds',
    help: 'Time from a request’s arrival to its answer, by method, route pattern and status class (2xx, 4xx, ...).',
    labelNames: ['method', 'route', 'status_class'] as const,
    buckets: HTTP_BUCKETS,
    registers: [registry],
  });
  // One pair of children per (method, route, status): the label lookup is paid once, not at every request.
  const children = new Map<
    string,
    { count: client.Counter.Internal; time: client.Histogram.Internal<'method' | 'route' | 'status_class'> }
  >();
  const request: Metrics['request'] = (method, route, status, seconds) => {
    const key = `${method} ${status} ${route ?? ''}`;
    let c = children.get(key);
    if (!c) {
      const r = route ?? '(unmatched)';
      c = {
        count: requests.labels(method, r, String(status)),
        time: durations.labels(method, r, `${Math.floor(status / 100)}xx`),
      };
      children.set(key, c);
    }
    c.count.inc();
    c.time.observe(seconds);
  };

  const dbTime = new client.Histogram({
    name: 'cinder_db_query_duration_seconds',
    help: 'Database time by pool and operation: one statement (query), or a whole transaction or session.',
    labelNames: ['pool', 'op'] as const,
    buckets: DB_BUCKETS,
    registers: [registry],
  });
  const dbErrors = new client.Counter({
    name: 'cinder_db_errors_total',
    help: 'Database statements, transactions and sessions that failed, by pool and operation.',
    labelNames: ['pool', 'op'] as const,
    registers: [registry],
  });
  const dbObserver = (pool: string): DbObserver => {
    const ops = new Map<
      DbOperation,
      { time: client.Histogram.Internal<'pool' | 'op'>; errors: client.Counter.Internal }
    >();
    return {
      observe(op, seconds, failed) {
        let o = ops.get(op);
        if (!o) ops.set(op, (o = { time: dbTime.labels(pool, op), errors: dbErrors.labels(pool, op) }));
        o.time.observe(seconds);
        if (failed) o.errors.inc();
      },
    };
  };

  const pools = new Map<string, Pick<ObservedDb, 'stats'>>();
  const poolGauge = (
    name: string,
    help: string,
    pick: (s: ReturnType<ObservedDb['stats']>) => number,
  ): void => {
    new client.Gauge({
      name,
      help,
      labelNames: ['pool'] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [pool, db] of pools) this.set({ pool }, pick(db.stats()));
      },
    });
  };
  poolGauge(
    'cinder_db_pool_connections',
    'Open connections of the pool (1 for the embedded PGlite).',
    (s) => s.total,
  );
  poolGauge('cinder_db_pool_idle_connections', 'Open connections not in use.', (s) => s.idle);
  poolGauge('cinder_db_pool_waiting', 'Callers waiting for a connection of the pool.', (s) => s.waiting);

  let queueDb: Queryable | undefined;
  let cached: { at: number; figures: Promise<QueueFigures> } | undefined;
  const queues = (): Promise<QueueFigures> => {
    if (!queueDb) return Promise.resolve({ jobs: [], pending: undefined });
    const now = clock();
    if (!cached || now - cached.at >= QUEUE_CACHE_MS) {
      cached = { at: now, figures: readQueues(queueDb) };
    }
    return cached.figures;
  };
  // The job and outbox figures are the database's, the same in every process: a cluster's aggregate takes the largest.
  const queueGauge = (
    name: string,
    help: string,
    labelNames: string[],
    fill: (g: client.Gauge, f: QueueFigures) => void,
  ): void => {
    new client.Gauge({
      name,
      help,
      labelNames,
      aggregator: 'max',
      registers: [registry],
      async collect() {
        this.reset();
        if (queueDb) fill(this, await queues());
      },
    });
  };
  queueGauge(
    'cinder_jobs',
    'Jobs not yet ended (AsyncJob: $export, $reindex, $expunge, view export) by kind and status (queued, running).',
    ['kind', 'status'],
    (g, f) => {
      for (const j of f.jobs) g.set({ kind: j.kind, status: j.status }, j.n);
    },
  );
  queueGauge(
    'cinder_jobs_oldest_age_seconds',
    'Age of the oldest job not yet ended, by kind and status (since it was accepted).',
    ['kind', 'status'],
    (g, f) => {
      for (const j of f.jobs) g.set({ kind: j.kind, status: j.status }, j.age);
    },
  );
  queueGauge(
    'cinder_subscription_events_pending',
    `Subscription events recorded and not yet delivered (counted up to ${PENDING_EVENTS_CAP}).`,
    [],
    (g, f) => g.set(f.pending?.n ?? 0),
  );
  queueGauge(
    'cinder_subscription_events_oldest_pending_age_seconds',
    'Age of the oldest subscription event not yet delivered (0: none).',
    [],
    (g, f) => g.set(f.pending?.age ?? 0),
  );

  // Read replicas: each process probes them itself; a cluster's aggregate shows the worst worker's view.
  let replicaStatus: (() => readonly ReplicaStatus[]) | undefined;
  const replicaGauge = (
    name: string,
    help: string,
    aggregator: 'min' | 'max',
    value: (r: ReplicaStatus) => number | undefined,
  ): void => {
    new client.Gauge({
      name,
      help,
      labelNames: ['replica'] as const,
      aggregator,
      registers: [registry],
      collect() {
        this.reset();
        for (const r of replicaStatus?.() ?? []) {
          const v = value(r);
          if (v !== undefined) this.set({ replica: r.name }, v);
        }
      },
    });
  };
  const answered = (r: ReplicaStatus): boolean => r.state === 'ok' || r.state === 'lagging';
  replicaGauge(
    'cinder_db_replica_up',
    'Whether the read replica answered its last probe as a streaming standby (1) or not (0: down, not a standby, not yet probed).',
    'min',
    (r) => (answered(r) ? 1 : 0),
  );
  replicaGauge(
    'cinder_db_replica_in_use',
    'Whether reads are currently sent to the read replica (1: healthy and within databaseReadMaxLagMs).',
    'min',
    (r) => (r.state === 'ok' ? 1 : 0),
  );
  replicaGauge(
    'cinder_db_replica_lag_seconds',
    'Replay lag of the read replica at its last probe (an upper bound; +Inf: lagging by more than can be told). Absent while it is not up.',
    'max',
    (r) =>
      !answered(r)
        ? undefined
        : r.lagMs !== undefined
          ? r.lagMs / 1000
          : r.state === 'lagging'
            ? Infinity
            : undefined,
  );
  replicaGauge(
    'cinder_db_replica_behind_bytes',
    'WAL bytes the read replica had not replayed of what the primary had written, at its last probe. Absent while it is not up.',
    'max',
    (r) => (answered(r) ? r.behindBytes : undefined),
  );

  const auditBacklogs: (() => number)[] = [];
  new client.Gauge({
    name: 'cinder_audit_buffered_events',
    help: 'AuditEvents of requests held in memory, not yet stored (stored within a second; grows while the database is down).',
    registers: [registry],
    collect() {
      this.set(auditBacklogs.reduce((n, f) => n + f(), 0));
    },
  });

  const written = new client.Counter({
    name: 'cinder_job_output_total',
    help: 'What export jobs wrote: resources of bulk exports, rows of view exports.',
    labelNames: ['kind', 'unit'] as const,
    registers: [registry],
  });
  const lag = new client.Histogram({
    name: 'cinder_subscription_delivery_lag_seconds',
    help: 'Time from a subscription event’s recording to its delivery.',
    buckets: LAG_BUCKETS,
    registers: [registry],
  });

  return {
    registry,
    request,
    dbObserver,
    watchPool: (pool, db) => void pools.set(pool, db),
    watchQueues: (db) => {
      queueDb = db;
      cached = undefined;
    },
    watchReplicas: (status) => {
      replicaStatus = status;
    },
    watchAuditBacklog: (buffered) => void auditBacklogs.push(buffered),
    jobWrote: (kind, count) => {
      if (count > 0) written.inc({ kind, unit: kind === 'export' ? 'resources' : 'rows' }, count);
    },
    subscriptionDelivered: (lagSeconds) => lag.observe(Math.max(0, lagSeconds)),
    scrape: () => registry.metrics(),
    contentType: registry.contentType,
  };
}

/** The queue figures, or none when the database cannot answer (the scrape goes on without them). */
async function readQueues(db: Queryable): Promise<QueueFigures> {
  try {
    const [jobs, pending] = await Promise.all([
      db.query<{ kind: string; status: string; n: number; age: number }>(
        `SELECT kind, CASE WHEN lease_until > now() THEN 'running' ELSE 'queued' END AS status, count(*)::int AS n,
           coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS age
         FROM jobs WHERE state = 'accepted' GROUP BY 1, 2`,
      ),
      db.query<{ n: number; age: number }>(
        `SELECT count(*)::int AS n, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS age
         FROM (SELECT created_at FROM subscription_events WHERE delivered_at IS NULL LIMIT ${PENDING_EVENTS_CAP}) p`,
      ),
    ]);
    return {
      jobs: jobs.rows.filter((j) => KIND.test(j.kind)),
      pending: pending.rows[0],
    };
  } catch {
    return { jobs: [], pending: undefined };
  }
}
