// Secrets stay secret (API.md §2–§4): client secrets, passwords and their hashes, refresh tokens, authorization codes
// and raw bearer tokens (the service's own and an external provider's) never appear in a response body or header —
// other than the one response that issues them — nor in a log line, the cache store or stored resource content.
// Every login flow is driven, then every response, log line and cache entry captured on the way is scanned.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryCache, createRedisCache, type Cache } from '../../src/storage/cache/index.js';
import type { Db } from '../../src/storage/db.js';
import { migrate, MIGRATIONS } from '../../src/storage/migrate.js';
import { openPglite } from '../../src/storage/pglite.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { testDatabases } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET, startTestApp, type TestApp } from '../support/app.js';
import { downloadOutput, startExport, waitForJob } from '../support/jobs.js';

const redisUrl = process.env.TEST_REDIS_URL;
const form = (o: Record<string, string>) => new URLSearchParams(o).toString();
/** Fields of a response that issue a credential: allowed there, and nowhere else. */
const ISSUED = ['access_token', 'refresh_token', 'id_token', 'code'] as const;

interface Recorded {
  what: string;
  status: number;
  text: string;
}

describe('secrets never leak', () => {
  const database = testDatabases()[0] as NonNullable<ReturnType<typeof testDatabases>[0]>;
  const prefix = `cinder-secrets:${randomUUID()}:`;
  const logLines: string[] = [];
  const cacheWrites: string[] = [];
  const responses: Recorded[] = [];
  /** Secret text → what it is and the index of the one response allowed to show it. */
  const secrets = new Map<string, { what: string; issuedBy?: number }>();
  let t: TestApp;
  let idp: MockIdp;
  let dir: string;
  let redisCache: Cache | undefined;

  const secret = (text: string, what: string, issuedBy?: number): string => {
    secrets.set(text, { what, ...(issuedBy !== undefined ? { issuedBy } : {}) });
    // A JWT's signature alone is as good as the token for finding it in a log or a cache.
    const parts = text.split('.');
    if (parts.length === 3 && (parts[2] as string).length > 20)
      secrets.set(parts[2] as string, {
        what: `${what} (signature)`,
        ...(issuedBy !== undefined ? { issuedBy } : {}),
      });
    return text;
  };
  const record = (what: string, res: LightMyRequestResponse): void => {
    const index = responses.length;
    responses.push({ what, status: res.statusCode, text: `${JSON.stringify(res.headers)}\n${res.body}` });
    let body: Record<string, unknown> = {};
    try {
      body = res.json();
    } catch {
      return;
    }
    for (const k of ISSUED) if (typeof body[k] === 'string') secret(body[k] as string, `${what} ${k}`, index);
    // A generated ClientApplication secret is shown once, in its create response.
    if (body.resourceType === 'ClientApplication' && typeof body.secret === 'string')
      secret(body.secret, `${what} generated secret`, index);
  };
  const call = async (what: string, opts: InjectOptions & { token?: string | null }) => {
    const res = await t.request(opts);
    record(what, res);
    return res;
  };
  const tokenRequest = (what: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
    call(what, {
      method: 'POST',
      url: '/oauth2/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      payload: form(fields),
    });
  const json = (what: string, method: 'POST' | 'PUT', url: string, token: string, payload: unknown) =>
    call(what, {
      method,
      url,
      token,
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
    });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-secrets-'));
    const stream = new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    const logger = pino({ level: 'trace' }, stream);
    const inner = redisUrl
      ? (redisCache = createRedisCache(redisUrl, { keyPrefix: prefix, log: logger }))
      : createMemoryCache({ max: 1000 });
    // Every write to the cache store is kept for the scan (Redis is also scanned itself below).
    const cache: Cache = {
      kind: inner.kind,
      get: (k) => inner.get(k),
      set: async (k, v, ttl) => {
        cacheWrites.push(`${k}\n${v}`);
        return inner.set(k, v, ttl);
      },
      delete: (k) => inner.delete(k),
      close: () => inner.close(),
    };
    idp = await startMockIdp();
    t = await startTestApp(
      database,
      { dataDir: dir, externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }] },
      { logger, cache, jobs: { pollMs: 50 } },
    );
    secret(ADMIN_CLIENT_SECRET, 'super admin client secret');
    secret('admin-password-1', 'super admin password');
    secret(t.adminToken, 'super admin access token');
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
    await redisCache?.close();
    if (redisUrl) {
      const redis = new Redis(redisUrl);
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
      await redis.quit();
    }
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('drives every login flow and every read of auth resources', async () => {
    // client_credentials: form fields, HTTP Basic, a wrong secret.
    expect(
      (
        await tokenRequest('cc form', {
          grant_type: 'client_credentials',
          client_id: ADMIN_CLIENT_ID,
          client_secret: ADMIN_CLIENT_SECRET,
        })
      ).statusCode,
    ).toBe(200);
    const basic = Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64');
    secret(basic, 'HTTP Basic credentials');
    expect(
      (
        await tokenRequest(
          'cc basic',
          { grant_type: 'client_credentials' },
          { authorization: `Basic ${basic}` },
        )
      ).statusCode,
    ).toBe(200);
    const wrong = secret(`wrong-secret-${randomUUID()}`, 'a wrong client secret');
    expect(
      (
        await tokenRequest('cc wrong', {
          grant_type: 'client_credentials',
          client_id: ADMIN_CLIENT_ID,
          client_secret: wrong,
        })
      ).statusCode,
    ).toBe(401);

    // A project, a ClientApplication with a chosen secret, one with a generated secret, a secret rotated by PUT.
    const project = (
      await call('create project', {
        method: 'POST',
        url: `${t.fhir}/Project`,
        token: t.adminToken,
        payload: { resourceType: 'Project', name: 'Secrets' },
      })
    ).json();
    const chosen = secret(`chosen-${randomUUID()}`, 'chosen client secret');
    const client = (
      await call('create client', {
        method: 'POST',
        url: `${t.fhir}/ClientApplication`,
        token: t.adminToken,
        payload: {
          resourceType: 'ClientApplication',
          name: 'c',
          secret: chosen,
          meta: { project: project.id },
        },
      })
    ).json();
    expect(client.secret).toBeUndefined();
    const membership = {
      resourceType: 'ProjectMembership',
      meta: { project: project.id },
      project: { reference: `Project/${project.id}` },
      user: { reference: `ClientApplication/${client.id}` },
      profile: { reference: `ClientApplication/${client.id}` },
      admin: true,
    };
    expect(
      (
        await call('client membership', {
          method: 'POST',
          url: `${t.fhir}/ProjectMembership`,
          token: t.adminToken,
          payload: membership,
        })
      ).statusCode,
    ).toBe(201);
    const cc = await tokenRequest('cc chosen', {
      grant_type: 'client_credentials',
      client_id: client.id,
      client_secret: chosen,
    });
    expect(cc.statusCode).toBe(200);
    const projectAdmin = cc.json().access_token as string;
    const generated = await call('create generated', {
      method: 'POST',
      url: `${t.fhir}/ClientApplication`,
      token: projectAdmin,
      payload: { resourceType: 'ClientApplication', name: 'g' },
    });
    expect(typeof generated.json().secret).toBe('string');
    const rotated = secret(`rotated-${randomUUID()}`, 'rotated client secret');
    expect(
      (
        await call('rotate', {
          method: 'PUT',
          url: `${t.fhir}/ClientApplication/${client.id}`,
          token: projectAdmin,
          payload: { resourceType: 'ClientApplication', id: client.id, name: 'c', secret: rotated },
        })
      ).statusCode,
    ).toBe(200);
    expect(
      (
        await tokenRequest('cc rotated', {
          grant_type: 'client_credentials',
          client_id: client.id,
          client_secret: rotated,
        })
      ).statusCode,
    ).toBe(200);
    // A batch whose ClientApplication entry fails (the failure is logged): the secret in it stays out of the log.
    const inBatch = secret(`batch-${randomUUID()}`, 'client secret in a failing batch entry');
    const batch = await call('batch', {
      method: 'POST',
      url: t.fhir,
      token: projectAdmin,
      payload: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            resource: { resourceType: 'ClientApplication', secret: inBatch, bogus: true },
            request: { method: 'POST', url: 'ClientApplication' },
          },
          {
            resource: { resourceType: 'ClientApplication', secret: inBatch, name: 7 },
            request: { method: 'PUT', url: 'ClientApplication/x' },
          },
        ],
      },
    });
    expect(batch.statusCode).toBe(200);
    // Passwords and password hashes sent through FHIR are dropped.
    const viaFhir = secret(`fhir-password-${randomUUID()}`, 'password sent through FHIR');
    const hashViaFhir = secret(
      `$2b$10$${randomBytes(20).toString('hex')}`,
      'password hash sent through FHIR',
    );
    expect(
      (
        await call('user via fhir', {
          method: 'POST',
          url: `${t.fhir}/User`,
          token: t.adminToken,
          payload: {
            resourceType: 'User',
            email: 'fhir-user@secrets.example',
            firstName: 'F',
            lastName: 'U',
            password: viaFhir,
            passwordHash: hashViaFhir,
            meta: { project: project.id },
          },
        })
      ).statusCode,
    ).toBe(201);

    // Password login, code + PKCE, refresh rotation, reuse of a spent refresh token, a wrong password.
    const invited = (
      await json('invite', 'POST', `/admin/projects/${project.id}/invite`, projectAdmin, {
        resourceType: 'Practitioner',
        firstName: 'Sec',
        lastName: 'Ret',
        email: 'sec@secrets.example',
        externalId: 'secrets|sec',
      })
    ).json();
    const userId = (invited.user.reference as string).split('/')[1] as string;
    const password = secret(`pw-${randomUUID()}`, 'user password');
    expect(
      (await json('set password', 'POST', `/admin/users/${userId}/password`, t.adminToken, { password }))
        .statusCode,
    ).toBe(200);
    const verifier = secret(randomBytes(48).toString('base64url'), 'PKCE verifier');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const loginBody = {
      email: 'sec@secrets.example',
      password,
      codeChallenge: challenge,
      codeChallengeMethod: 'S256',
    };
    const wrongPw = secret(`wrong-pw-${randomUUID()}`, 'a wrong password');
    expect(
      (
        await call('login wrong', {
          method: 'POST',
          url: '/auth/login',
          headers: { 'content-type': 'application/json' },
          payload: JSON.stringify({ ...loginBody, password: wrongPw }),
        })
      ).statusCode,
    ).toBe(400);
    const login = await call('login', {
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(loginBody),
    });
    expect(login.statusCode, login.body).toBe(200);
    const code = await tokenRequest('code', {
      grant_type: 'authorization_code',
      code: login.json().code,
      code_verifier: verifier,
    });
    expect(code.statusCode, code.body).toBe(200);
    const first = code.json().refresh_token as string;
    const refreshed = await tokenRequest('refresh', { grant_type: 'refresh_token', refresh_token: first });
    expect(refreshed.statusCode).toBe(200);
    expect(
      (await tokenRequest('refresh reuse', { grant_type: 'refresh_token', refresh_token: first })).statusCode,
    ).toBe(400);
    const userToken = code.json().access_token as string;
    expect(
      (await call('me', { method: 'GET', url: '/auth/me', token: userToken })).statusCode,
    ).toBeGreaterThanOrEqual(200);

    // An external provider's token: userinfo (issues a service token), used directly, and a rejected one.
    const external = secret(await idp.token({ sub: 'secrets|sec' }), 'external JWT');
    expect(
      (await call('userinfo external', { method: 'GET', url: '/oauth2/userinfo', token: external }))
        .statusCode,
    ).toBe(200);
    expect(
      (
        await call('read with external', {
          method: 'GET',
          url: `${t.fhir}/Practitioner?_count=1`,
          token: external,
        })
      ).statusCode,
    ).toBe(200);
    const rejected = secret(
      await idp.token({ sub: 'secrets|sec', jti2: randomUUID() }),
      'rejected external JWT',
    );
    idp.mode = 'reject';
    expect(
      (await call('userinfo rejected', { method: 'GET', url: '/oauth2/userinfo', token: rejected }))
        .statusCode,
    ).toBe(401);
    idp.mode = 'ok';
    const unknown = secret(await idp.token({ sub: 'secrets|nobody' }), 'external JWT of nobody');
    expect(
      (await call('userinfo unknown', { method: 'GET', url: '/oauth2/userinfo', token: unknown })).statusCode,
    ).toBe(401);
    const forged = secret(
      `${external.split('.').slice(0, 2).join('.')}.${randomBytes(64).toString('base64url')}`,
      'forged token',
    );
    expect(
      (await call('forged', { method: 'GET', url: `${t.fhir}/Patient`, token: forged })).statusCode,
    ).toBe(401);

    // Every read of the auth resources, by the super and the project admin.
    for (const token of [t.adminToken, projectAdmin]) {
      for (const url of [
        'ClientApplication',
        `ClientApplication/${client.id}`,
        `ClientApplication/${client.id}/_history`,
        'User',
        `User/${userId}`,
        'Login',
        'ProjectMembership',
        'ProjectMembership?_include=ProjectMembership:user',
        `Project/${project.id}`,
      ]) {
        const res = await call(`GET ${url}`, { method: 'GET', url: `${t.fhir}/${url}`, token });
        expect(res.statusCode, `${url}: ${res.body}`).toBeLessThan(500);
      }
      expect((await call('me', { method: 'GET', url: '/auth/me', token })).statusCode).toBe(200);
      expect((await call('userinfo', { method: 'GET', url: '/oauth2/userinfo', token })).statusCode).toBe(
        200,
      );
    }
    // A bulk export of the auth resources, files downloaded.
    const job = await startExport(t, t.adminToken, '_type=ClientApplication,User,ProjectMembership,Login');
    const done = await waitForJob(t, job, t.adminToken);
    expect(done.status).toBe('completed');
    const files = await downloadOutput(t, done, t.adminToken);
    responses.push({ what: 'export files', status: 200, text: JSON.stringify(files) });
    expect(files.ClientApplication?.length).toBeGreaterThan(1);
  });

  it('keeps the identity provider client secret out of every answer (write-only, optional)', async () => {
    const { projectId, adminToken } = await t.newProject('IdP secrets');
    const idpSecret = (label: string) =>
      secret(`idp-${label}-${randomUUID()}`, `IdP client secret (${label})`);
    const provider = (clientSecret?: string) => ({
      authorizeUrl: 'https://idp.invalid/authorize',
      tokenUrl: 'https://idp.invalid/token',
      userInfoUrl: 'https://idp.invalid/userinfo',
      clientId: 'cinder',
      ...(clientSecret !== undefined ? { clientSecret } : {}),
    });
    const app = (name: string, clientSecret?: string) => ({
      resourceType: 'ClientApplication',
      name,
      identityProvider: provider(clientSecret),
    });
    const stored = async (id: string): Promise<string | undefined> =>
      (
        await t.db.query<{ secret: string | null }>(
          `SELECT secret FROM credentials WHERE resource_type = 'ClientApplication' AND id = $1 AND kind = 'idp_client_secret'`,
          [id],
        )
      ).rows[0]?.secret ?? undefined;

    // Create with a secret: stored apart, not in the answer.
    const first = idpSecret('create');
    const created = await json(
      'idp create',
      'POST',
      `${t.fhir}/ClientApplication`,
      adminToken,
      app('idp', first),
    );
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    expect(created.json().identityProvider).toEqual(provider());
    expect(await stored(id)).toBe(first);
    // clientSecret is optional (API.md §2).
    const without = await json('idp none', 'POST', `${t.fhir}/ClientApplication`, adminToken, app('none'));
    expect(without.statusCode, without.body).toBe(201);
    expect(await stored(without.json().id as string)).toBeUndefined();
    // An update without clientSecret keeps the stored one; with one, replaces it.
    const keep = await json('idp keep', 'PUT', `${t.fhir}/ClientApplication/${id}`, adminToken, {
      ...app('idp kept'),
      id,
    });
    expect(keep.statusCode, keep.body).toBe(200);
    expect(await stored(id)).toBe(first);
    const second = idpSecret('update');
    const put = await json('idp rotate', 'PUT', `${t.fhir}/ClientApplication/${id}`, adminToken, {
      ...app('idp rotated', second),
      id,
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json().identityProvider).toEqual(provider());
    expect(await stored(id)).toBe(second);
    const third = idpSecret('patch');
    const patched = await call('idp patch', {
      method: 'PATCH',
      url: `${t.fhir}/ClientApplication/${id}`,
      token: adminToken,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'add', path: '/identityProvider/clientSecret', value: third }]),
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(await stored(id)).toBe(third);
    // Batch and transaction entries, created and updated.
    const inBatch = idpSecret('batch');
    const batchPut = idpSecret('batch put');
    const batch = await json('idp batch', 'POST', t.fhir, adminToken, {
      resourceType: 'Bundle',
      type: 'batch',
      entry: [
        { resource: app('batch', inBatch), request: { method: 'POST', url: 'ClientApplication' } },
        {
          resource: { ...app('batch put', batchPut), id },
          request: { method: 'PUT', url: `ClientApplication/${id}` },
        },
      ],
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const batchEntries = batch.json().entry as { response: { status: string; location?: string } }[];
    expect(batchEntries.map((e) => e.response.status)).toEqual(['201 Created', '200 OK']);
    expect(await stored(id)).toBe(batchPut);
    const inTransaction = idpSecret('transaction');
    const transaction = await json('idp transaction', 'POST', t.fhir, adminToken, {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        {
          fullUrl: 'urn:uuid:3f0c2a52-0f5e-4a43-9d83-0f3c1c1b7a10',
          resource: app('transaction', inTransaction),
          request: { method: 'POST', url: 'ClientApplication' },
        },
        {
          resource: {
            resourceType: 'ProjectMembership',
            project: { reference: `Project/${projectId}` },
            user: { reference: 'urn:uuid:3f0c2a52-0f5e-4a43-9d83-0f3c1c1b7a10' },
            profile: { reference: 'urn:uuid:3f0c2a52-0f5e-4a43-9d83-0f3c1c1b7a10' },
          },
          request: { method: 'POST', url: 'ProjectMembership' },
        },
      ],
    });
    expect(transaction.statusCode, transaction.body).toBe(200);
    const txId = (transaction.json().entry[0].response.location as string).split('/')[1] as string;
    expect(await stored(txId)).toBe(inTransaction);
    // A clientSecret that is not a string is refused, its value not quoted.
    const bad = await json('idp bad', 'POST', `${t.fhir}/ClientApplication`, adminToken, {
      ...app('bad'),
      identityProvider: { ...provider(), clientSecret: { value: idpSecret('object') } },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().issue[0]).toMatchObject({
      code: 'invalid',
      expression: ['ClientApplication.identityProvider.clientSecret'],
    });

    // Every way of reading them, by the project admin and the super administrator.
    const versions = Number(
      (
        await call('idp read', { method: 'GET', url: `${t.fhir}/ClientApplication/${id}`, token: adminToken })
      ).json().meta.versionId,
    );
    expect(versions).toBe(5);
    for (const token of [adminToken, t.adminToken]) {
      const urls = [
        `ClientApplication/${id}`,
        ...Array.from({ length: versions }, (_, i) => `ClientApplication/${id}/_history/${i + 1}`),
        `ClientApplication/${id}/_history`,
        'ClientApplication/_history',
        '_history',
        `ClientApplication?_id=${id},${txId}`,
        'ClientApplication?_lastUpdated=gt2000-01-01&_count=100',
        `ProjectMembership?user=ClientApplication/${txId}&_include=ProjectMembership:user`,
        `ClientApplication?_id=${txId}&_revinclude=ProjectMembership:user`,
        `ClientApplication/$csv?_fields=identityProvider.clientSecret`,
        `ProjectMembership/$csv?_fields=user.resolve().identityProvider.clientSecret,user`,
      ];
      for (const url of urls) {
        const res = await call(`GET ${url}`, { method: 'GET', url: `${t.fhir}/${url}`, token });
        expect(res.statusCode, `${url}: ${res.body}`).toBeLessThan(500);
      }
      const readBatch = await json('idp read batch', 'POST', t.fhir, token, {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          { request: { method: 'GET', url: `ClientApplication/${id}` } },
          { request: { method: 'GET', url: `ClientApplication/${id}/_history` } },
          { request: { method: 'GET', url: 'ClientApplication?name=transaction' } },
        ],
      });
      expect(readBatch.statusCode, readBatch.body).toBe(200);
      expect(
        (readBatch.json().entry as { response: { status: string } }[]).map((e) => e.response.status),
      ).toEqual(['200 OK', '200 OK', '200 OK']);
      // Bulk export, files downloaded.
      const job = await startExport(t, token, '_type=ClientApplication,ProjectMembership');
      const done = await waitForJob(t, job, token);
      expect(done.status).toBe('completed');
      const files = await downloadOutput(t, done, token);
      responses.push({ what: 'idp export files', status: 200, text: JSON.stringify(files) });
      expect(files.ClientApplication?.map((c) => c.id)).toEqual(expect.arrayContaining([id, txId]));
    }
  });

  it('finds none of them in responses, log lines, the cache or stored content', async () => {
    // Hashes of the stored credentials and refresh tokens are secrets too.
    const hashes = await t.db.query<{ h: string }>(
      `SELECT coalesce(hash, secret) AS h FROM credentials UNION ALL SELECT token_hash AS h FROM refresh_tokens`,
    );
    expect(hashes.rows.length).toBeGreaterThan(3);
    for (const r of hashes.rows) secret(r.h, 'stored credential hash');
    const leaks: string[] = [];
    const scan = (where: string, text: string, index?: number) => {
      for (const [s, { what, issuedBy }] of secrets)
        if ((index === undefined || issuedBy !== index) && text.includes(s))
          leaks.push(`${what} in ${where}`);
      if (/\$2[aby]\$\d\d\$/.test(text)) leaks.push(`a bcrypt hash in ${where}`);
    };
    // The scanner itself finds a planted leak.
    scan('a planted line', `token=${t.adminToken.split('.')[2] as string}`);
    expect(leaks).toEqual(['super admin access token (signature) in a planted line']);
    leaks.length = 0;
    responses.forEach((r, i) => scan(`response ${i} (${r.what})`, r.text, i));
    logLines.forEach((l, i) => scan(`log line ${i}: ${l.slice(0, 200)}`, l));
    cacheWrites.forEach((c, i) => scan(`cache write ${i}`, c));
    if (redisUrl) {
      const redis = new Redis(redisUrl);
      try {
        const keys = await redis.keys(`${prefix}*`);
        expect(keys.length).toBeGreaterThan(0);
        for (const k of keys) scan(`Redis key ${k}`, `${k}\n${(await redis.get(k)) ?? ''}`);
      } finally {
        await redis.quit();
      }
    }
    const stored = await t.db.query<{ text: string }>(
      `SELECT content::text AS text FROM resource_history WHERE content IS NOT NULL
       UNION ALL SELECT content::text FROM resources WHERE content IS NOT NULL`,
    );
    stored.rows.forEach((r, i) => scan(`stored resource ${i}`, r.text));
    // The scan saw what it should: requests were logged, the external token's validation was cached.
    expect(logLines.length).toBeGreaterThan(50);
    expect(cacheWrites.length).toBeGreaterThan(0);
    expect(secrets.size).toBeGreaterThan(20);
    expect(leaks).toEqual([]);
  });
});

// A database written before identity provider secrets left resource content: migration 7 moves them out of every
// version, and the server then answers without them.
describe.each(testDatabases())(
  'existing databases ($name): IdP client secrets move out of content',
  (database) => {
    const schema = `t_mig_${randomBytes(6).toString('hex')}`;
    const url = process.env.TEST_DATABASE_URL;
    let db: Db;
    let t: TestApp | undefined;

    beforeAll(async () => {
      if (database.name === 'pglite') db = await openPglite(null);
      else {
        const admin = await openPostgres(url as string, { max: 1 });
        await admin.exec(`CREATE SCHEMA ${schema}`);
        await admin.close();
        db = await openPostgres(url as string, { schema, max: 5 });
      }
      await migrate(
        db,
        MIGRATIONS.filter((m) => m.version < 7),
      );
    });
    afterAll(async () => {
      await t?.close();
      await db?.close();
      if (database.name === 'postgres') {
        const admin = await openPostgres(url as string, { max: 1 });
        await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
        await admin.close();
      }
    });

    it('keeps the current secret in credentials and strips every stored version', async () => {
      const idp = (clientSecret?: string) => ({
        authorizeUrl: 'https://idp.invalid/a',
        tokenUrl: 'https://idp.invalid/t',
        userInfoUrl: 'https://idp.invalid/u',
        clientId: 'c',
        ...(clientSecret ? { clientSecret } : {}),
      });
      const client = (id: string, v: number, clientSecret?: string) => ({
        resourceType: 'ClientApplication',
        id,
        name: id,
        identityProvider: idp(clientSecret),
        meta: { versionId: String(v), lastUpdated: '2025-01-01T00:00:00.000Z', project: 'p-old' },
      });
      // Versions as the old server stored them: live (v1 → v2), deleted (its row keeps its last content), and a client
      // whose current version has no secret (an update without clientSecret used to drop it).
      const rows: [string, boolean, Record<string, unknown>[]][] = [
        ['ca-live', false, [client('ca-live', 1, 'old-secret-v1'), client('ca-live', 2, 'old-secret-v2')]],
        ['ca-gone', true, [client('ca-gone', 1, 'old-secret-gone')]],
        ['ca-dropped', false, [client('ca-dropped', 1, 'old-secret-dropped'), client('ca-dropped', 2)]],
      ];
      for (const [id, deleted, versions] of rows) {
        const last = versions[versions.length - 1] as Record<string, unknown>;
        const { rows: inserted } = await db.query<{ rid: string }>(
          `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
         VALUES ('ClientApplication', $1, 'p-old', $2, now(), $3, $4::jsonb) RETURNING rid`,
          [id, versions.length + (deleted ? 1 : 0), deleted, JSON.stringify(last)],
        );
        const rid = (inserted[0] as { rid: string }).rid;
        for (const [i, v] of versions.entries())
          await db.query(
            `INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
           VALUES ($1, 'ClientApplication', $2, $3, 'p-old', now(), false, $4::jsonb)`,
            [rid, id, i + 1, JSON.stringify(v)],
          );
      }
      expect(await migrate(db)).toEqual(MIGRATIONS.map((m) => m.version).filter((v) => v >= 7));

      const stored = await db.query<{ text: string }>(
        `SELECT content::text AS text FROM resources WHERE content IS NOT NULL
       UNION ALL SELECT content::text FROM resource_history WHERE content IS NOT NULL`,
      );
      // 3 current rows and 3 past versions (migration 024 drops the history's copies of ca-live's and ca-dropped's
      // current versions).
      expect(stored.rows).toHaveLength(6);
      for (const r of stored.rows) {
        expect(r.text).not.toContain('old-secret');
        expect(JSON.parse(r.text).identityProvider).toEqual(idp());
      }
      const creds = await db.query<{ id: string; hash: string | null; secret: string | null }>(
        `SELECT id, hash, secret FROM credentials WHERE kind = 'idp_client_secret' ORDER BY id`,
      );
      expect(creds.rows).toEqual([{ id: 'ca-live', hash: null, secret: 'old-secret-v2' }]);

      // The server on the migrated database: reads answer without the secret, an update keeps it. The clients'
      // project must exist for a write to be accepted (write-rules.ts).
      await db.query(
        `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
         VALUES ('Project', 'p-old', 'p-old', 1, now(), false, $1::jsonb)`,
        [
          JSON.stringify({
            resourceType: 'Project',
            id: 'p-old',
            name: 'Old',
            meta: { versionId: '1', project: 'p-old' },
          }),
        ],
      );
      t = await startTestApp(database, {}, { db });
      for (const url of ['ClientApplication/ca-live', 'ClientApplication/ca-live/_history']) {
        const res = await t.request({ method: 'GET', url: `${t.fhir}/${url}`, token: t.adminToken });
        expect(res.statusCode).toBe(200);
        expect(res.body).not.toContain('old-secret');
      }
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/ca-live`,
        token: t.adminToken,
        payload: {
          resourceType: 'ClientApplication',
          id: 'ca-live',
          name: 'renamed',
          identityProvider: idp(),
        },
      });
      expect(put.statusCode, put.body).toBe(200);
      const after = await db.query<{ secret: string }>(
        `SELECT secret FROM credentials WHERE kind = 'idp_client_secret' AND id = 'ca-live'`,
      );
      expect(after.rows).toEqual([{ secret: 'old-secret-v2' }]);
    });
  },
);
