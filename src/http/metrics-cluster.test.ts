// Metrics of a cluster (metrics-cluster.ts): two real workers of node:cluster (test/fixtures/metrics-cluster), whose
// counters the primary sums and whose database gauges it does not multiply; and a worker whose primary never answers.
import { execFile } from 'node:child_process';
import { EventEmitter } from 'node:events';
import path from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { clusterScrape, type WorkerChannel } from './metrics-cluster.js';
import { createMetrics } from '../metrics/metrics.js';

const run = promisify(execFile);

describe('metrics of a cluster', () => {
  it('a worker’s scrape answers the sum of both workers’ counters and one copy of the queue', async () => {
    const { stdout } = await run(
      path.resolve('node_modules/.bin/tsx'),
      [path.resolve('test/fixtures/metrics-cluster/main.ts')],
      { timeout: 60_000 },
    );
    expect(stdout).not.toMatch(/^ERROR/);
    // Worker 0 counted one request, worker 1 two.
    expect(stdout).toContain(
      'cinder_http_requests_total{method="GET",route="/fhir/R4/:type/:id",status="200"} 3\n',
    );
    expect(stdout).toMatch(
      /cinder_http_request_duration_seconds_count\{method="GET",route="\/fhir\/R4\/:type\/:id",status_class="2xx"\} 3\n/,
    );
    // Both workers read the same 3 queued jobs from the database: 3, not 6; the oldest age is the larger one.
    expect(stdout).toContain('cinder_jobs{kind="export",status="queued"} 3\n');
    expect(stdout).toContain('cinder_jobs_oldest_age_seconds{kind="export",status="queued"} 11\n');
  }, 90_000);

  it('a worker whose primary does not answer fails the scrape in time, naming the cause', async () => {
    const events = new EventEmitter();
    const sent: unknown[] = [];
    const channel: WorkerChannel = {
      send: (m) => void sent.push(m),
      on: (e, l) => void events.on(e, l),
      off: (e, l) => void events.off(e, l),
    };
    const scrape = clusterScrape(createMetrics({ processMetrics: false }).registry, {
      channel,
      timeoutMs: 50,
    });
    await expect(scrape()).rejects.toThrow(/installClusterMetricsPrimary/);
    expect(sent).toEqual([{ type: 'cinder:metrics:scrape', id: 0 }]);
    // Its listener for the answer is gone; the one answering the primary's collection requests stays.
    expect(events.listenerCount('message')).toBe(1);
  });

  it('a worker answers the primary’s collection request with its registry’s figures', async () => {
    const events = new EventEmitter();
    const sent: { type: string; id: number; metrics?: { name: string }[] }[] = [];
    const channel: WorkerChannel = {
      send: (m) => void sent.push(m as (typeof sent)[number]),
      on: (e, l) => void events.on(e, l),
      off: (e, l) => void events.off(e, l),
    };
    const metrics = createMetrics({ processMetrics: false });
    metrics.request('GET', '/healthcheck', 200, 0.001);
    clusterScrape(metrics.registry, { channel });
    events.emit('message', { type: 'cinder:metrics:collect', id: 7 });
    events.emit('message', { type: 'something else', id: 8 });
    await new Promise((r) => setTimeout(r, 20));
    expect(sent).toHaveLength(1);
    expect(sent[0]?.type).toBe('cinder:metrics:figures');
    expect(sent[0]?.id).toBe(7);
    expect(sent[0]?.metrics?.map((m) => m.name)).toContain('cinder_http_requests_total');
  });
});
