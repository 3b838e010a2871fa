// Metrics of a cluster (node:cluster, several worker processes behind one port): whichever worker answers a scrape of
// `{base}metrics` asks the primary over IPC; the primary asks every worker for its registry's figures
// (`getMetricsAsJSON`), merges them with prom-client's AggregatorRegistry.aggregate (counters and histograms summed,
// database-derived gauges by their `aggregator`), and sends the text back. A worker or the primary that does not
// answer within the timeout fails the scrape (503) rather than give counters that went backwards.
//
// The primary calls `installClusterMetricsPrimary()` once, before or after forking; each worker's app calls
// `clusterScrape(registry)` (app.ts does when `cluster.isWorker`).
import nodeCluster, { type Cluster, type Worker } from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

/** One worker's figures, as `getMetricsAsJSON` gives them. */
type Figures = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

const SCRAPE = 'cinder:metrics:scrape';
const COLLECT = 'cinder:metrics:collect';
const FIGURES = 'cinder:metrics:figures';
const RESULT = 'cinder:metrics:result';

/** How long the primary waits for each worker, and a worker for the primary's answer (below Prometheus's 10 s). */
export const CLUSTER_SCRAPE_TIMEOUT_MS = 4000;

interface Message {
  type?: unknown;
  id?: unknown;
}

const isMessage = (m: unknown, type: string): m is Message & Record<string, unknown> =>
  typeof m === 'object' &&
  m !== null &&
  (m as Message).type === type &&
  typeof (m as Message).id === 'number';

/** The process-side channel of a worker (process.send / process.on('message')); tests give their own. */
export interface WorkerChannel {
  send(message: unknown): void;
  on(event: 'message', listener: (message: unknown) => void): void;
  off(event: 'message', listener: (message: unknown) => void): void;
}

const processChannel = (): WorkerChannel | undefined =>
  process.send
    ? {
        send: (m) => void process.send?.(m),
        on: (e, l) => void process.on(e, l),
        off: (e, l) => void process.off(e, l),
      }
    : undefined;

/**
 * In the primary: answers the workers' scrape requests with the aggregate of every worker's metrics. Call once;
 * returns a function that removes the listener.
 */
export function installClusterMetricsPrimary(
  opts: { cluster?: Cluster; timeoutMs?: number } = {},
): () => void {
  const cluster = opts.cluster ?? nodeCluster;
  const timeoutMs = opts.timeoutMs ?? CLUSTER_SCRAPE_TIMEOUT_MS;
  let next = 0;
  const pending = new Map<number, { figures: Figures[]; waiting: number; done: (err?: Error) => void }>();

  const gather = (): Promise<string> =>
    new Promise((resolve, reject) => {
      const id = next++;
      const workers = Object.values(cluster.workers ?? {}).filter(
        (w): w is Worker => w !== undefined && w.isConnected(),
      );
      const figures: Figures[] = [];
      const timer = setTimeout(() => done(new Error('a worker did not send its metrics in time')), timeoutMs);
      const done = (err?: Error): void => {
        if (!pending.delete(id)) return;
        clearTimeout(timer);
        if (err) reject(err);
        else AggregatorRegistry.aggregate(figures).metrics().then(resolve, reject);
      };
      pending.set(id, { figures, waiting: workers.length, done });
      if (workers.length === 0) return done();
      for (const w of workers) w.send({ type: COLLECT, id });
    });

  const onMessage = (worker: Worker, message: unknown): void => {
    if (isMessage(message, FIGURES)) {
      const p = pending.get(message.id as number);
      if (!p) return;
      if (typeof message.error === 'string') return p.done(new Error(message.error));
      p.figures.push(message.metrics as Figures);
      if (--p.waiting === 0) p.done();
      return;
    }
    if (isMessage(message, SCRAPE)) {
      const id = message.id;
      gather().then(
        (text) => worker.isConnected() && worker.send({ type: RESULT, id, text }),
        (err: Error) => worker.isConnected() && worker.send({ type: RESULT, id, error: err.message }),
      );
    }
  };
  cluster.on('message', onMessage);
  return () => void cluster.off('message', onMessage);
}

/**
 * In a worker: answers the primary's collection requests with this registry's figures, and returns the scrape
 * function of the route (the cluster's aggregate, from the primary).
 */
export function clusterScrape(
  registry: Registry,
  opts: { channel?: WorkerChannel; timeoutMs?: number } = {},
): () => Promise<string> {
  const channel = opts.channel ?? processChannel();
  if (!channel) throw new Error('clusterScrape: this process has no IPC channel to a primary');
  const timeoutMs = opts.timeoutMs ?? CLUSTER_SCRAPE_TIMEOUT_MS + 1000;
  channel.on('message', (message) => {
    if (!isMessage(message, COLLECT)) return;
    const id = message.id;
    registry.getMetricsAsJSON().then(
      (metrics) => channel.send({ type: FIGURES, id, metrics }),
      (err: Error) => channel.send({ type: FIGURES, id, error: err.message }),
    );
  });
  let next = 0;
  return () =>
    new Promise((resolve, reject) => {
      const id = next++;
      const onMessage = (message: unknown): void => {
        if (!isMessage(message, RESULT) || message.id !== id) return;
        finish();
        if (typeof message.text === 'string') resolve(message.text);
        else reject(new Error(String(message.error ?? 'no metrics from the primary')));
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error('the primary did not answer (is installClusterMetricsPrimary() called there?)'));
      }, timeoutMs);
      const finish = (): void => {
        clearTimeout(timer);
        channel.off('message', onMessage);
      };
      channel.on('message', onMessage);
      channel.send({ type: SCRAPE, id });
    });
}
