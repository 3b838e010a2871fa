// Reliability in one process (issue 6): the database going away and coming back, Redis down, a hanging identity
// provider, the request id on every log line, the size limits and the login rate limits.
// The PostgreSQL outage runs when TEST_DATABASE_URL is set, the shared rate limit when TEST_REDIS_URL is set.
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyBaseLogger, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_COUNT, parseSearchRequest } from '../../src/fhir/search/parse.js';
import { createRedisCache, openCache } from '../../src/storage/cache/index.js';
import type { Db } from '../../src/storage/db.js';
import { migrate } from '../../src/storage/migrate.js';
import { openPostgres } from '../../src/storage/postgres.js';
import {
  ADMIN_CLIENT_ID,
  ADMIN_CLIENT_SECRET,
  startTestApp,
  type TestApp,
  createEntry,
  postBundle,
  postResource,
  tokenRequest,
} from '../support/app.js';
import { testDatabases, type TestDatabase } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.js';

const pglite = testDatabases()[0] as TestDatabase;
// One embedded database for the whole file (migrating one takes seconds): every app below shares it.
let shared: Db;
beforeAll(async () => {
  shared = await pglite.open();
});
afterAll(async () => shared?.close());
/** A test app on the shared database. */
const start = (
  overrides: Parameters<typeof startTestApp>[1] = {},
  extras: Parameters<typeof startTestApp>[2] = {},
) => startTestApp(pglite, overrides, { db: shared, ...extras });
const PG_URL = process.env.TEST_DATABASE_URL;
const REDIS_URL = process.env.TEST_REDIS_URL;

function issue(res: LightMyRequestResponse): { code: string; details?: { text: string } } {
  const body = res.json() as { resourceType: string; issue: { code: string; details?: { text: string } }[] };
  expect(body.resourceType).toBe('OperationOutcome');
  return body.issue[0] as { code: string };
}

/** A pino logger whose JSON lines are collected. */
function capturedLogger(): { logger: FastifyBaseLogger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n'))
        if (line.trim()) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: 'info' }, stream) as unknown as FastifyBaseLogger, lines };
}

describe.skipIf(!PG_URL)('PostgreSQL outage (through a TCP proxy)', () => {
  const schema = `t_fault_${randomBytes(5).toString('hex')}`;
  let proxy: TcpProxy;
  let db: Db;
  let t: TestApp;

  beforeAll(async () => {
    const url = PG_URL as string;
    const admin = await openPostgres(url, { max: 1 });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    await admin.close();
    const direct = await openPostgres(url, { schema, max: 1 });
    await migrate(direct);
    await direct.close();
    const target = new URL(url);
    proxy = await startTcpProxy(target.hostname, Number(target.port || 5432));
    db = await openPostgres(proxy.url(url), { schema, max: 5, connectTimeoutMs: 1000 });
    t = await start({}, { db });
  });
  afterAll(async () => {
    await t?.close();
    await db?.close();
    await proxy?.close();
    const admin = await openPostgres(PG_URL as string, { max: 1 });
    await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
  });

  const search = () => t.request({ method: 'GET', url: `${t.fhir}/Patient?_count=5`, token: t.adminToken });
  const create = () =>
    postResource(t, t.adminToken, { resourceType: 'Patient', name: [{ family: 'Outage' }] });

  it('answers 503 at once while the database is down and recovers without a restart', async () => {
    expect((await create()).statusCode).toBe(201);
    await proxy.cut();
    const started = Date.now();
    const down = await search();
    const timeTo503 = Date.now() - started;
    expect(down.statusCode).toBe(503);
    expect(issue(down).code).toBe('transient');
    expect(down.headers['retry-after']).toBe('2');
    expect(timeTo503).toBeLessThan(1500);
    const write = await create();
    expect(write.statusCode).toBe(503);
    const health = await t.request({ method: 'GET', url: '/healthcheck' });
    expect(health.statusCode).toBe(503);
    expect(health.json()).toMatchObject({ ok: false, database: { kind: 'postgres', status: 'unreachable' } });

    await proxy.restore();
    const restored = Date.now();
    let res = await search();
    while (res.statusCode !== 200 && Date.now() - restored < 5000) res = await search();
    const timeToRecover = Date.now() - restored;
    expect(res.statusCode).toBe(200);
    expect(timeToRecover).toBeLessThan(2000);
    expect((await create()).statusCode).toBe(201);
    expect((await t.request({ method: 'GET', url: '/healthcheck' })).statusCode).toBe(200);
    console.info(`PostgreSQL outage: 503 after ${timeTo503} ms; 200 again ${timeToRecover} ms after restore`);
  });

  it('under load: every request answers 2xx or 503 (never hangs, never 500), and all succeed afterwards', async () => {
    const statuses: number[] = [];
    let stop = false;
    const worker = async () => {
      while (!stop) {
        const r = Math.random() < 0.5 ? await search() : await create();
        statuses.push(r.statusCode);
      }
    };
    const workers = Array.from({ length: 6 }, worker);
    await new Promise((r) => setTimeout(r, 300));
    await proxy.cut();
    await new Promise((r) => setTimeout(r, 500));
    await proxy.restore();
    await new Promise((r) => setTimeout(r, 700));
    stop = true;
    await Promise.all(workers);
    expect(statuses.filter((s) => s === 503).length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s !== 503 && s !== 200 && s !== 201)).toEqual([]);
    for (let i = 0; i < 10; i++)
      expect([200, 201]).toContain((i % 2 ? await search() : await create()).statusCode);
  });
});

describe('Redis down', () => {
  it('keeps serving: caches and rate limits fall back to memory, one warning, healthcheck reports it', async () => {
    const { logger, lines } = capturedLogger();
    // Nothing listens on port 1.
    const cache = openCache({ redisUrl: 'redis://127.0.0.1:1', timeoutMs: 200, log: logger });
    const t = await start({ rateLimit: { failedLogins: 2 } }, { cache, counters: cache, logger });
    try {
      const health = await t.request({ method: 'GET', url: '/healthcheck' });
      expect(health.statusCode).toBe(200);
      expect(health.json()).toMatchObject({
        ok: true,
        database: { status: 'ok' },
        cache: { kind: 'redis', status: 'unreachable' },
      });
      const wrong = () =>
        tokenRequest(t.app, {
          grant_type: 'client_credentials',
          client_id: ADMIN_CLIENT_ID,
          client_secret: 'wrong',
        });
      expect((await wrong()).statusCode).toBe(401);
      expect((await wrong()).statusCode).toBe(401);
      expect((await wrong()).statusCode).toBe(429); // counted in memory meanwhile
      const warnings = lines.filter((l) => /Redis cache unavailable/.test(String(l.msg)));
      expect(warnings).toHaveLength(1);
    } finally {
      await t.close();
      await cache.close();
    }
  });
});

describe('identity provider down or slow', () => {
  let idp: MockIdp;
  let t: TestApp;
  beforeAll(async () => {
    idp = await startMockIdp();
    t = await start({
      externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }],
      externalAuthTimeout: 400,
    });
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('a hanging provider: 401 within the timeout, one provider call for concurrent requests, no pile-up', async () => {
    idp.mode = 'hang';
    idp.calls = 0;
    const token = await idp.token({ sub: 'someone' });
    const started = Date.now();
    const pending = Array.from({ length: 20 }, () => t.request({ method: 'GET', url: '/auth/me', token }));
    // The server keeps answering other requests meanwhile.
    const health = await t.request({ method: 'GET', url: '/healthcheck' });
    expect(health.statusCode).toBe(200);
    expect(Date.now() - started).toBeLessThan(300);
    const results = await Promise.all(pending);
    const elapsed = Date.now() - started;
    for (const r of results) {
      expect(r.statusCode).toBe(401);
      expect(r.headers['www-authenticate']).toMatch(/invalid_token/);
    }
    expect(idp.calls).toBe(1);
    expect(elapsed).toBeGreaterThanOrEqual(350);
    expect(elapsed).toBeLessThan(1500);
    // Failures are not cached: the next request asks the provider again.
    idp.mode = 'ok';
    await t.request({ method: 'GET', url: '/auth/me', token });
    expect(idp.calls).toBe(2);
    console.info(
      `Hanging identity provider: 20 concurrent requests answered 401 after ${elapsed} ms, 1 call`,
    );
  });

  it('an unreachable provider: 401 at once', async () => {
    const down = await start({
      externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: 'http://127.0.0.1:1/userinfo' }],
      externalAuthTimeout: 400,
    });
    try {
      const started = Date.now();
      const res = await down.request({
        method: 'GET',
        url: '/auth/me',
        token: await idp.token({ sub: 'x' }),
      });
      expect(res.statusCode).toBe(401);
      expect(Date.now() - started).toBeLessThan(400);
    } finally {
      await down.close();
    }
  });
});

describe('logs', () => {
  it('carry the request id on every line of a request, including lines logged below the HTTP layer', async () => {
    const idp = await startMockIdp();
    const { logger, lines } = capturedLogger();
    const t = await start(
      {
        externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }],
        externalAuthTimeout: 200,
      },
      { logger },
    );
    try {
      idp.mode = 'hang';
      const token = await idp.token({ sub: 'logged' });
      // A FHIR request with a body (parsed before the handler runs) and the external validator's warning.
      lines.length = 0;
      const res = await postResource(t, token, { resourceType: 'Patient' });
      expect(res.statusCode).toBe(401);
      const id = res.headers['x-request-id'];
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      expect(lines.map((l) => l.msg)).toEqual(
        expect.arrayContaining(['request completed', 'External identity provider userinfo unreachable']),
      );
      for (const line of lines) expect(line.reqId, JSON.stringify(line)).toBe(id);

      // A request whose body is parsed and handled: every line it logs carries its id too.
      lines.length = 0;
      const ok = await postResource(t, t.adminToken, {
        resourceType: 'Patient',
        name: [{ family: 'Logged' }],
      });
      expect(ok.statusCode).toBe(201);
      expect(lines.map((l) => l.msg)).toContain('request completed');
      for (const line of lines) expect(line.reqId).toBe(ok.headers['x-request-id']);
    } finally {
      await t.close();
      await idp.close();
    }
  });
});

describe('request log (config requestLog)', () => {
  const requests = async (mode: 'all' | 'errors' | 'none') => {
    const { logger, lines } = capturedLogger();
    const t = await start({ requestLog: mode }, { logger });
    try {
      lines.length = 0;
      const ok = await t.app.inject({
        method: 'GET',
        url: '/fhir/R4/Patient?name=Secret-Name&_count=1',
        headers: { authorization: `Bearer ${t.adminToken}` },
      });
      expect(ok.statusCode).toBe(200);
      const missing = await t.app.inject({
        method: 'GET',
        url: '/fhir/R4/Patient/nope',
        headers: { authorization: `Bearer ${t.adminToken}` },
      });
      expect(missing.statusCode).toBe(404);
      const done = lines.filter((l) => l.msg === 'request completed');
      return { done, lines, ids: [ok.headers['x-request-id'], missing.headers['x-request-id']] };
    } finally {
      await t.close();
    }
  };

  it('all: one line per request, at completion, with its id, method, path (no query string) and status', async () => {
    const { done, lines, ids } = await requests('all');
    expect(lines.some((l) => l.msg === 'incoming request')).toBe(false);
    expect(done).toHaveLength(2);
    expect(done.map((l) => [l.reqId, l.method, l.url, l.statusCode])).toEqual([
      [ids[0], 'GET', '/fhir/R4/Patient', 200],
      [ids[1], 'GET', '/fhir/R4/Patient/nope', 404],
    ]);
    for (const l of done) expect(typeof l.responseTime).toBe('number');
    expect(JSON.stringify(lines)).not.toContain('Secret-Name');
  });

  it('errors: only answers of 400 and above; none: no request lines', async () => {
    const errors = await requests('errors');
    expect(errors.done.map((l) => [l.reqId, l.statusCode])).toEqual([[errors.ids[1], 404]]);
    expect((await requests('none')).done).toEqual([]);
  });
});

describe('size limits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await start({ maxHeaderSize: 4096, maxBundleEntries: 3, maxBodySize: 4096 });
  });
  afterAll(async () => t?.close());

  it('answers 431 with an OperationOutcome for headers beyond maxHeaderSize', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const port = (t.app.server.address() as AddressInfo).port;
    const get = (headers: Record<string, string>) =>
      new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
        const req = http.get({ host: '127.0.0.1', port, path: '/healthcheck', headers }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'] ?? '', body }),
          );
        });
        req.on('error', reject);
      });
    expect((await get({ 'x-small': 'a'.repeat(1000) })).status).toBe(200);
    const big = await get({ 'x-big': 'a'.repeat(5000) });
    expect(big.status).toBe(431);
    expect(big.type).toMatch(/^application\/fhir\+json/);
    expect(JSON.parse(big.body)).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'too-long' }],
    });
  });

  it('answers 413 for a body beyond maxBodySize and a Bundle beyond maxBundleEntries', async () => {
    const body = await postResource(t, t.adminToken, {
      resourceType: 'Patient',
      name: [{ family: 'x'.repeat(5000) }],
    });
    expect(body.statusCode).toBe(413);
    expect(issue(body).code).toBe('too-long');
    const bundle = await postBundle(
      t,
      t.adminToken,
      'transaction',
      Array.from({ length: 4 }, () => createEntry({ resourceType: 'Patient' })),
    );
    expect(bundle.statusCode).toBe(413);
    expect(issue(bundle).code).toBe('too-long');
  });

  it('caps _count at 1000 (a server may return fewer than asked, https://hl7.org/fhir/R4/search.html#count)', async () => {
    expect(parseSearchRequest('Patient', { _count: '100000' }).count).toBe(MAX_COUNT);
    expect(MAX_COUNT).toBe(1000);
    const res = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient?_count=100000`,
      token: t.adminToken,
    });
    expect(res.statusCode).toBe(200);
    const bad = await t.request({ method: 'GET', url: `${t.fhir}/Patient?_count=-1`, token: t.adminToken });
    expect(bad.statusCode).toBe(400);
  });
});

describe('login rate limits', () => {
  const pkce = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
  const login = (t: TestApp, email: string, password: string) =>
    t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: { email, password, codeChallenge: pkce, codeChallengeMethod: 'S256' },
    });
  const clientLogin = (t: TestApp, secret: string, clientId = ADMIN_CLIENT_ID) =>
    tokenRequest(t.app, { grant_type: 'client_credentials', client_id: clientId, client_secret: secret });

  it('refuses a (client IP, email) after N failed passwords, even the right one, with 429 and Retry-After', async () => {
    const t = await start({ rateLimit: { failedLogins: 3, failedLoginWindow: 60 } });
    try {
      for (let i = 0; i < 3; i++)
        expect((await login(t, 'admin@example.com', 'wrong password')).statusCode).toBe(400);
      const refused = await login(t, 'Admin@Example.com', 'admin-password-1');
      expect(refused.statusCode).toBe(429);
      expect(issue(refused).code).toBe('throttled');
      const retryAfter = Number(refused.headers['retry-after']);
      expect(retryAfter).toBeGreaterThan(50);
      expect(retryAfter).toBeLessThanOrEqual(60);
      // Another identity from the same address is not affected.
      expect((await login(t, 'someone@example.com', 'wrong password')).statusCode).toBe(400);
    } finally {
      await t.close();
    }
  });

  it('a success clears the count; client secrets are counted per client_id and refused as OAuth errors', async () => {
    const t = await start({ rateLimit: { failedLogins: 2, failedLoginWindow: 60 } });
    try {
      expect((await login(t, 'admin@example.com', 'wrong')).statusCode).toBe(400);
      expect((await login(t, 'admin@example.com', 'admin-password-1')).statusCode).toBe(200);
      expect((await login(t, 'admin@example.com', 'wrong')).statusCode).toBe(400);
      expect((await login(t, 'admin@example.com', 'admin-password-1')).statusCode).toBe(200);

      expect((await clientLogin(t, 'wrong')).json()).toMatchObject({ error: 'invalid_client' });
      expect((await clientLogin(t, 'wrong')).statusCode).toBe(401);
      const refused = await clientLogin(t, ADMIN_CLIENT_SECRET);
      expect(refused.statusCode).toBe(429);
      expect(refused.json()).toMatchObject({ error: 'temporarily_unavailable' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      // Other clients still log in.
      expect((await clientLogin(t, 'whatever', 'other-client')).statusCode).toBe(401);
    } finally {
      await t.close();
    }
  });

  it('limits all requests per client IP to the login endpoints', async () => {
    const t = await start({ rateLimit: { authRequests: 4, authRequestWindow: 60 } });
    try {
      // startTestApp logged in once already.
      for (let i = 0; i < 3; i++) expect((await clientLogin(t, ADMIN_CLIENT_SECRET)).statusCode).toBe(200);
      const token = await clientLogin(t, ADMIN_CLIENT_SECRET);
      expect(token.statusCode).toBe(429);
      expect(token.json()).toMatchObject({ error: 'temporarily_unavailable' });
      expect(token.headers['retry-after']).toBeDefined();
      const password = await login(t, 'admin@example.com', 'admin-password-1');
      expect(password.statusCode).toBe(429);
      expect(issue(password).code).toBe('throttled');
      // Other endpoints are not limited.
      expect((await t.request({ method: 'GET', url: '/healthcheck' })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });

  it.skipIf(!REDIS_URL)('counts across instances through Redis', async () => {
    const prefix = `cinder-test:rl:${randomUUID()}:`;
    const log = { warn: () => undefined };
    const ca = createRedisCache(REDIS_URL as string, { keyPrefix: prefix, log });
    const cb = createRedisCache(REDIS_URL as string, { keyPrefix: prefix, log });
    const overrides = { rateLimit: { failedLogins: 3, failedLoginWindow: 60 } };
    const a = await start(overrides, { counters: ca });
    const b = await start(overrides, { counters: cb });
    try {
      expect((await clientLogin(a, 'wrong')).statusCode).toBe(401);
      expect((await clientLogin(b, 'wrong')).statusCode).toBe(401);
      expect((await clientLogin(a, 'wrong')).statusCode).toBe(401);
      expect((await clientLogin(b, ADMIN_CLIENT_SECRET)).statusCode).toBe(429);
      expect((await clientLogin(a, ADMIN_CLIENT_SECRET)).statusCode).toBe(429);
    } finally {
      await a.close();
      await b.close();
      await ca.close();
      await cb.close();
    }
  });
});
