// GET /metrics (issue 30 point 5): Prometheus text of this process, only for the operator's scraper (config
// metricsToken, Authorization: Bearer), never for FHIR tokens; labels hold route patterns and fixed words, never an
// id, a project or a query. Runs on PGlite, and on PostgreSQL when TEST_DATABASE_URL is set.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf, kickOff, startExport, waitForJob } from '../support/jobs.js';
import { createMetrics, QUEUE_CACHE_MS, type Metrics } from '../../src/metrics/metrics.js';

const TOKEN = 'metrics-token-0123456789-abcdefghijklmnop';

/** The value of one sample line (`name{labels} value`), or undefined when absent. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const braces = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!braces) continue;
    const have = Object.fromEntries(
      [...(braces[1] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(braces[2]);
  }
  return undefined;
}

function expectOutcome(res: { statusCode: number; body: string }, status: number, code: string): void {
  expect(res.statusCode, res.body).toBe(status);
  const oo = JSON.parse(res.body) as { resourceType: string; issue: { code: string }[] };
  expect(oo.resourceType).toBe('OperationOutcome');
  expect(oo.issue[0]?.code).toBe(code);
}

for (const database of testDatabases()) {
  describe(`metrics on ${database.name}`, () => {
    describe('not configured (the default)', () => {
      let t: TestApp;
      beforeAll(async () => {
        t = await startTestApp(database);
      });
      afterAll(async () => t?.close());

      it('answers 404 with an OperationOutcome, whatever the token', async () => {
        for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }]) {
          const res = await t.request({ method: 'GET', url: '/metrics', token: null, headers });
          expectOutcome(res, 404, 'not-found');
        }
        expectOutcome(
          await t.request({ method: 'GET', url: '/metrics', token: t.adminToken }),
          404,
          'not-found',
        );
      });
    });

    describe('configured with metricsToken', () => {
      let t: TestApp;
      let now = 1_000_000;
      let metrics: Metrics;
      const scrape = async (): Promise<string> => {
        const res = await t.request({
          method: 'GET',
          url: '/metrics',
          token: null,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(res.statusCode, res.body).toBe(200);
        return res.body;
      };
      beforeAll(async () => {
        metrics = createMetrics({ clock: () => now });
        t = await startTestApp(database, { metricsToken: TOKEN }, { metrics });
      });
      afterAll(async () => t?.close());

      it('answers the token, in Prometheus text, not cached', async () => {
        const res = await t.request({
          method: 'GET',
          url: '/metrics',
          token: null,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(res.statusCode).toBe(200);
        expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
        expect(res.headers['cache-control']).toBe('no-store');
        expect(res.body).toContain('# TYPE cinder_http_request_duration_seconds histogram');
        // prom-client's process metrics: memory and event-loop lag.
        expect(sample(res.body, 'process_resident_memory_bytes')).toBeGreaterThan(0);
        expect(res.body).toContain('nodejs_eventloop_lag_seconds');
        expect(res.body).toContain('nodejs_heap_size_used_bytes');
      });

      it('refuses every other caller with 401 and an OperationOutcome', async () => {
        const project = await t.newProject();
        const cases: { what: string; token?: string; headers?: Record<string, string>; url?: string }[] = [
          { what: 'no token' },
          { what: 'the super administrator', token: t.adminToken },
          { what: "a tenant project's admin", token: project.adminToken },
          { what: "a tenant project's member", token: project.memberToken },
          { what: 'a wrong token', headers: { authorization: `Bearer ${TOKEN}x` } },
          { what: 'a prefix of the token', headers: { authorization: `Bearer ${TOKEN.slice(0, -1)}` } },
          { what: 'an empty bearer', headers: { authorization: 'Bearer ' } },
          { what: 'the token as Basic', headers: { authorization: `Basic ${TOKEN}` } },
          { what: 'the token without a scheme', headers: { authorization: TOKEN } },
          { what: 'the token in the query string', url: `/metrics?token=${TOKEN}` },
          { what: 'the token as access_token', url: `/metrics?access_token=${TOKEN}` },
          { what: 'a huge header', headers: { authorization: `Bearer ${'x'.repeat(8000)}` } },
        ];
        for (const c of cases) {
          const res = await t.request({
            method: 'GET',
            url: c.url ?? '/metrics',
            token: c.token ?? null,
            ...(c.headers ? { headers: c.headers } : {}),
          });
          expect(res.statusCode, c.what).toBe(401);
          expectOutcome(res, 401, 'login');
          expect(res.headers['www-authenticate'], c.what).toBe('Bearer realm="metrics"');
          expect(res.body, c.what).not.toContain('cinder_http');
        }
      });

      it('answers HEAD like GET: 401 without the token, 200 without a body with it', async () => {
        const refused = await t.request({ method: 'HEAD', url: '/metrics', token: null });
        expect(refused.statusCode).toBe(401);
        expect(refused.body).toBe('');
        const ok = await t.request({
          method: 'HEAD',
          url: '/metrics',
          token: null,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(ok.statusCode).toBe(200);
        expect(ok.body).toBe('');
      });

      it('ignores a query string (the same metrics, nothing of it in the labels)', async () => {
        const res = await t.request({
          method: 'GET',
          url: '/metrics?name[]=x&format=json&query=up',
          token: null,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expect(res.statusCode).toBe(200);
        expect(res.body).toContain('cinder_http_requests_total');
        expect(res.body).not.toContain('format');
      });

      it('counts requests by route pattern and status; no id, project or query in any label', async () => {
        const a = await t.newProject();
        const b = await t.newProject();
        const ids: string[] = [a.projectId, b.projectId];
        for (const p of [a, b]) {
          const patient = await created(t, p.adminToken, {
            resourceType: 'Patient',
            name: [{ family: 'Quixotexylophone' }],
          });
          ids.push(patient.id as string);
          const read = await t.request({
            method: 'GET',
            url: `${t.fhir}/Patient/${patient.id as string}`,
            token: p.adminToken,
          });
          expect(read.statusCode).toBe(200);
          const search = await t.request({
            method: 'GET',
            url: `${t.fhir}/Patient?family=Quixotexylophone&_count=7`,
            token: p.adminToken,
          });
          expect(search.statusCode).toBe(200);
        }
        const missing = await t.request({ method: 'GET', url: '/no-such-route/Zanzibarquux', token: null });
        expect(missing.statusCode).toBe(404);
        const text = await scrape();
        for (const id of ids) expect(text).not.toContain(id);
        for (const word of ['Quixotexylophone', 'Zanzibarquux', '_count=7', 'family=', 'Project/', '?'])
          expect(text).not.toContain(word);
        expect(
          sample(text, 'cinder_http_requests_total', {
            method: 'GET',
            route: '/fhir/R4/:type/:id',
            status: '200',
          }),
        ).toBeGreaterThanOrEqual(2);
        expect(
          sample(text, 'cinder_http_requests_total', {
            method: 'GET',
            route: '/fhir/R4/:type',
            status: '200',
          }),
        ).toBeGreaterThanOrEqual(2);
        expect(
          sample(text, 'cinder_http_requests_total', {
            method: 'POST',
            route: '/fhir/R4/:type',
            status: '201',
          }),
        ).toBeGreaterThanOrEqual(2);
        expect(
          sample(text, 'cinder_http_requests_total', { method: 'GET', route: '(unmatched)', status: '404' }),
        ).toBeGreaterThanOrEqual(1);
        expect(
          sample(text, 'cinder_http_requests_total', { method: 'GET', route: '/metrics', status: '401' }),
        ).toBeGreaterThanOrEqual(1);
        expect(
          sample(text, 'cinder_http_request_duration_seconds_count', {
            method: 'GET',
            route: '/fhir/R4/:type/:id',
            status_class: '2xx',
          }),
        ).toBeGreaterThanOrEqual(2);
        expect(
          sample(text, 'cinder_http_request_duration_seconds_bucket', {
            route: '/fhir/R4/:type/:id',
            le: '+Inf',
          }),
        ).toBeGreaterThanOrEqual(2);
        // Every label value is a route pattern or a fixed word.
        for (const m of text.matchAll(/route="([^"]*)"/g))
          expect(m[1]).toMatch(/^(\/[A-Za-z0-9_:.$*\-/]*|\(unmatched\))$/);
      });

      it('times the database and reports its connections', async () => {
        const text = await scrape();
        expect(
          sample(text, 'cinder_db_query_duration_seconds_count', { pool: 'request', op: 'query' }),
        ).toBeGreaterThan(0);
        expect(
          sample(text, 'cinder_db_query_duration_seconds_count', { pool: 'request', op: 'transaction' }),
        ).toBeGreaterThan(0);
        const total = sample(text, 'cinder_db_pool_connections', { pool: 'request' }) as number;
        expect(total).toBeGreaterThanOrEqual(1);
        const idle = sample(text, 'cinder_db_pool_idle_connections', { pool: 'request' }) as number;
        expect(idle).toBeGreaterThanOrEqual(0);
        expect(idle).toBeLessThanOrEqual(total);
        expect(sample(text, 'cinder_db_pool_waiting', { pool: 'request' })).toBe(0);
        expect(sample(text, 'cinder_audit_buffered_events')).toBeGreaterThanOrEqual(0);
      });

      it('reports the job queue and the subscription outbox from the database, read at most every few seconds', async () => {
        const p = await t.newProject();
        now += QUEUE_CACHE_MS;
        const before = await scrape();
        expect(sample(before, 'cinder_jobs', { kind: 'export', status: 'queued' })).toBeUndefined();
        // No job runner in this app: the export stays queued.
        await startExport(t, p.adminToken);
        const sub = await created(t, p.adminToken, {
          resourceType: 'Subscription',
          status: 'active',
          reason: 'metrics test',
          criteria: 'Observation?code=http://loinc.org|8867-4',
          channel: { type: 'websocket' },
        });
        await created(t, p.adminToken, {
          resourceType: 'Observation',
          status: 'final',
          code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
        });
        // Within the cache's time the figures are the ones already read.
        expect(sample(await scrape(), 'cinder_jobs', { kind: 'export', status: 'queued' })).toBeUndefined();
        now += QUEUE_CACHE_MS;
        const after = await scrape();
        expect(sample(after, 'cinder_jobs', { kind: 'export', status: 'queued' })).toBe(1);
        expect(
          sample(after, 'cinder_jobs_oldest_age_seconds', { kind: 'export', status: 'queued' }),
        ).toBeGreaterThanOrEqual(0);
        expect(sample(after, 'cinder_subscription_events_pending')).toBeGreaterThanOrEqual(1);
        expect(sample(after, 'cinder_subscription_events_oldest_pending_age_seconds')).toBeGreaterThanOrEqual(
          0,
        );
        expect(after).not.toContain(sub.id as string);
        expect(after).not.toContain(p.projectId);
      });
    });

    describe('when the metrics cannot be gathered (a cluster whose primary does not answer)', () => {
      let t: TestApp;
      beforeAll(async () => {
        t = await startTestApp(
          database,
          { metricsToken: TOKEN },
          { metricsScrape: () => Promise.reject(new Error('the primary did not answer')) },
        );
      });
      afterAll(async () => t?.close());

      it('answers 503 with an OperationOutcome, and still 401 without the token', async () => {
        const res = await t.request({
          method: 'GET',
          url: '/metrics',
          token: null,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
        expectOutcome(res, 503, 'transient');
        expect(res.body).toContain('the primary did not answer');
        expectOutcome(await t.request({ method: 'GET', url: '/metrics', token: null }), 401, 'login');
      });
    });

    describe('with the job runner and the deliverer', () => {
      let t: TestApp;
      const metrics = createMetrics({ processMetrics: false });
      beforeAll(async () => {
        t = await startTestApp(database, { metricsToken: TOKEN }, { metrics, jobs: {}, deliver: {} });
      });
      afterAll(async () => t?.close());

      it('counts what exports wrote and how late subscription notifications were delivered', async () => {
        const p = await t.newProject();
        await created(t, p.adminToken, {
          resourceType: 'Subscription',
          status: 'active',
          reason: 'metrics test',
          criteria: 'Observation?code=http://loinc.org|8867-4',
          channel: { type: 'websocket' },
        });
        for (let i = 0; i < 3; i++)
          await created(t, p.adminToken, {
            resourceType: 'Observation',
            status: 'final',
            code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
          });
        const id = await startExport(t, p.adminToken);
        const job = await waitForJob(t, id, p.adminToken);
        expect(job.status).toBe('completed');
        const deadline = Date.now() + 10_000;
        let text = await metrics.scrape();
        while (
          (sample(text, 'cinder_subscription_delivery_lag_seconds_count') ?? 0) < 3 &&
          Date.now() < deadline
        ) {
          await new Promise((r) => setTimeout(r, 50));
          text = await metrics.scrape();
        }
        // At least the Subscription and the three Observations (plus the project's own resources).
        expect(
          sample(text, 'cinder_job_output_total', { kind: 'export', unit: 'resources' }),
        ).toBeGreaterThanOrEqual(4);
        expect(sample(text, 'cinder_subscription_delivery_lag_seconds_count')).toBe(3);
        expect(sample(text, 'cinder_subscription_delivery_lag_seconds_sum')).toBeGreaterThanOrEqual(0);
        expect(text).not.toContain('process_resident_memory_bytes');
      });

      it('counts the rows view exports wrote', async () => {
        const p = await t.newProject();
        for (const family of ['Ash', 'Birch'])
          await created(t, p.adminToken, { resourceType: 'Patient', name: [{ family }] });
        const before =
          sample(await metrics.scrape(), 'cinder_job_output_total', { kind: 'view-export', unit: 'rows' }) ??
          0;
        const view = {
          resourceType: 'ViewDefinition',
          name: 'families',
          resource: 'Patient',
          select: [{ column: [{ name: 'family', path: 'name.first().family', type: 'string' }] }],
        };
        const id = jobIdOf(
          await kickOff(t, p.adminToken, '$viewdefinition-export', {
            parameter: [{ name: 'view', part: [{ name: 'viewResource', resource: view }] }],
          }),
        );
        expect((await waitForJob(t, id, p.adminToken)).status).toBe('completed');
        const after = sample(await metrics.scrape(), 'cinder_job_output_total', {
          kind: 'view-export',
          unit: 'rows',
        });
        expect(after).toBe(before + 2);
      });
    });
  });
}
