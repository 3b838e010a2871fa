// Server-side request forgery (API.md §2): URLs a project admin sets on a ClientApplication (identityProvider.userInfoUrl,
// jwksUri) may not make the server call loopback, private or link-local addresses — literal or through DNS — unless the
// operator lists the host in allowedOutboundHosts; checked when saved and again at each use; and every failed token
// exchange answers alike, so the answer tells nothing about the address (open or closed port, internal or not).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  inviteRequest,
  postBundle,
  postResource,
  startTestApp,
  tokenRequest,
  type TestApp,
} from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';

const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const FAILED = { error: 'invalid_grant', error_description: 'The subject token could not be exchanged' };

/** A port on loopback where nothing listens. */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe.each(testDatabases())('outbound requests on $name', (database) => {
  let idp: MockIdp;
  let port: number;
  /** Lists the internal hosts of the tests in allowedOutboundHosts. */
  let open: TestApp;
  /** The same database, with no allowedOutboundHosts. */
  let strict: TestApp;
  let admin: string;
  let projectId: string;
  const logLines: string[] = [];

  /** Internal targets, each by its userInfoUrl (the mock provider's port where a listener could be reached). */
  const internal = (): string[] => [
    `http://127.0.0.1:${port}/userinfo`,
    `http://localhost:${port}/userinfo`, // a DNS name that resolves to 127.0.0.1
    `http://[::1]:${port}/userinfo`,
    `http://[::ffff:127.0.0.1]:${port}/userinfo`,
    `http://0.0.0.0:${port}/userinfo`,
    'http://10.0.0.1/userinfo',
    'http://172.16.0.1/userinfo',
    'http://192.168.1.1/userinfo',
    'http://169.254.169.254/latest/meta-data/',
  ];
  const client = (userInfoUrl: string, extra: Record<string, unknown> = {}) => ({
    resourceType: 'ClientApplication',
    name: `IdP at ${userInfoUrl}`,
    identityProvider: {
      authorizeUrl: 'https://idp.invalid/authorize',
      tokenUrl: 'https://idp.invalid/token',
      userInfoUrl,
      clientId: 'cinder',
    },
    ...extra,
  });
  const exchange = (t: TestApp, subjectToken: string, clientId: string) =>
    tokenRequest(t.app, {
      grant_type: TOKEN_EXCHANGE,
      subject_token: subjectToken,
      subject_token_type: ACCESS_TOKEN_TYPE,
      client_id: clientId,
    });
  const subject = () => idp.token({ sub: 'olivia', email: 'olivia@outbound.example' });
  const saved = async (t: TestApp, resource: Record<string, unknown>): Promise<string> => {
    const res = await postResource(t, admin, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const expectRefusedAtSave = (
    res: { statusCode: number; json(): unknown; body: string },
    expression: string,
  ) => {
    expect(res.statusCode, res.body).toBe(400);
    const oo = res.json() as { resourceType: string; issue: Record<string, unknown>[] };
    expect(oo.resourceType).toBe('OperationOutcome');
    expect(oo.issue[0]).toMatchObject({ severity: 'error', code: 'invalid', expression: [expression] });
  };

  beforeAll(async () => {
    idp = await startMockIdp();
    port = Number(new URL(idp.issuer).port);
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
          done();
        },
      }),
    );
    open = await startTestApp(
      database,
      {
        allowedOutboundHosts: [
          '127.0.0.1', // any port
          `localhost:${port}`,
          `[::1]:${port}`,
          '::ffff:127.0.0.1',
          '0.0.0.0',
          '10.0.0.1',
          '172.16.0.1:80',
          '192.168.1.1',
          '169.254.169.254',
        ],
      },
      { logger },
    );
    strict = await startTestApp(database, {}, { db: open.db });
    const project = await open.newProject('Outbound');
    admin = project.adminToken;
    projectId = project.projectId;
    const invited = await inviteRequest(open, admin, projectId, {
      resourceType: 'Practitioner',
      firstName: 'Olivia',
      lastName: 'Out',
      email: 'olivia@outbound.example',
    });
    expect(invited.statusCode, invited.body).toBe(200);
  });
  afterAll(async () => {
    await strict?.close();
    await open?.close();
    await idp?.close();
  });

  it('refuses internal addresses when a ClientApplication is saved (create, update, patch, batch, transaction)', async () => {
    for (const url of internal()) {
      expectRefusedAtSave(
        await postResource(strict, admin, client(url)),
        'ClientApplication.identityProvider.userInfoUrl',
      );
    }
    expectRefusedAtSave(
      await postResource(
        strict,
        admin,
        client('https://idp.invalid/userinfo', { jwksUri: 'http://10.1.2.3/jwks' }),
      ),
      'ClientApplication.jwksUri',
    );
    // An update, a patch, a batch entry and a transaction naming an internal address change nothing.
    const id = await saved(strict, client('https://idp.invalid/userinfo'));
    const put = await strict.request({
      method: 'PUT',
      url: `${strict.fhir}/ClientApplication/${id}`,
      token: admin,
      payload: { ...client('http://169.254.169.254/latest/meta-data/'), id },
    });
    expectRefusedAtSave(put, 'ClientApplication.identityProvider.userInfoUrl');
    const patch = await strict.request({
      method: 'PATCH',
      url: `${strict.fhir}/ClientApplication/${id}`,
      token: admin,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([
        { op: 'replace', path: '/identityProvider/userInfoUrl', value: `http://localhost:${port}/` },
      ]),
    });
    expectRefusedAtSave(patch, 'ClientApplication.identityProvider.userInfoUrl');
    const batch = await postBundle(strict, admin, 'batch', [
      {
        resource: client('http://192.168.1.1/userinfo'),
        request: { method: 'POST', url: 'ClientApplication' },
      },
    ]);
    expect(batch.statusCode).toBe(200);
    const entry = batch.json().entry[0].response;
    expect(entry.status).toMatch(/^400/);
    expect(entry.outcome.issue[0]).toMatchObject({
      code: 'invalid',
      expression: ['ClientApplication.identityProvider.userInfoUrl'],
    });
    expectRefusedAtSave(
      await postBundle(strict, admin, 'transaction', [
        { resource: client('http://[::1]/userinfo'), request: { method: 'POST', url: 'ClientApplication' } },
      ]),
      'ClientApplication.identityProvider.userInfoUrl',
    );
    const current = await strict.request({
      method: 'GET',
      url: `${strict.fhir}/ClientApplication/${id}`,
      token: admin,
    });
    expect(current.json().meta.versionId).toBe('1');
    expect(current.json().identityProvider.userInfoUrl).toBe('https://idp.invalid/userinfo');
  });

  it('accepts public addresses and names that do not resolve yet', async () => {
    await saved(strict, client('https://idp.invalid/userinfo'));
    await saved(
      strict,
      client('https://93.184.215.14/userinfo', { jwksUri: 'https://not-yet.invalid/jwks' }),
    );
  });

  it('allows the hosts the operator lists, at save and at use', async () => {
    for (const url of internal()) await saved(open, client(url));
    for (const url of [`http://127.0.0.1:${port}/userinfo`, `http://localhost:${port}/userinfo`]) {
      const id = await saved(open, client(url));
      const calls = idp.calls;
      const res = await exchange(open, await subject(), id);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
      expect(res.json().project).toEqual({ reference: `Project/${projectId}` });
      expect(idp.calls).toBe(calls + 1);
    }
    // host:port entries allow that port only.
    expectRefusedAtSave(
      await postResource(open, admin, client(`http://localhost:${port + 1}/userinfo`)),
      'ClientApplication.identityProvider.userInfoUrl',
    );
  });

  it('checks again at each use: an unlisted internal address is never called', async () => {
    // Saved while allowed (or, as for a name that resolves inside later, while not internal); used where it is not.
    for (const url of internal()) {
      const id = await saved(open, client(url));
      const calls = idp.calls;
      const res = await exchange(strict, await subject(), id);
      expect(res.statusCode, url).toBe(400);
      expect(res.json(), url).toEqual(FAILED);
      expect(idp.calls, url).toBe(calls);
    }
  });

  it('answers every failed exchange alike: closed port, open port, internal address, no user, expired', async () => {
    const closed = await saved(open, client(`http://127.0.0.1:${await closedPort()}/userinfo`));
    const notFound = await saved(open, client(`http://127.0.0.1:${port}/nothing-here`));
    const noEmail = await saved(open, client(`http://127.0.0.1:${port}/jwks`)); // JSON, but no userinfo
    const working = await saved(open, client(`http://127.0.0.1:${port}/userinfo`));
    const token = await subject();
    const stranger = await idp.token({ sub: 'x', email: 'nobody@outbound.example' });
    const expired = await idp.token(
      { sub: 'olivia', email: 'olivia@outbound.example' },
      { now: Math.floor(Date.now() / 1000) - 7200, lifetime: 60 },
    );
    const answers = [
      await exchange(open, token, closed),
      await exchange(open, token, notFound),
      await exchange(open, token, noEmail),
      await exchange(strict, token, working),
      await exchange(open, stranger, working),
      await exchange(open, expired, working),
    ];
    idp.mode = 'reject';
    answers.push(await exchange(open, token, working));
    idp.mode = 'ok';
    for (const res of answers) {
      expect(res.statusCode).toBe(400);
      expect(res.body).toBe(JSON.stringify(FAILED));
      expect(res.headers['content-type']).toBe(answers[0]?.headers['content-type']);
    }
    // The reason is in the log, and only there.
    const reasons = logLines
      .map((l) => JSON.parse(l) as { msg?: string; reason?: string })
      .filter((l) => l.msg === 'Token exchange failed')
      .map((l) => l.reason);
    expect(reasons).toEqual(
      expect.arrayContaining([
        'userinfo unreachable',
        'userinfo answered non-2xx',
        'userinfo answered no email',
        'no membership matches',
        'subject token expired',
      ]),
    );
  });
});
