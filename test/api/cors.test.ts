// CORS (issue 14 point 9): browser apps on any origin (the default) or on the configured ones (`corsOrigins`) can
// call the FHIR API, OAuth and discovery: preflights are answered without a token, answers carry
// Access-Control-Allow-Origin and expose the headers apps read; no credentials are allowed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { startTestApp, tokenRequest, type TestApp } from '../support/app.js';

const database = testDatabases()[0] as NonNullable<ReturnType<typeof testDatabases>[0]>;
const APP = 'https://app.example.org';

const preflight = (t: TestApp, url: string, origin = APP) =>
  t.request({
    method: 'OPTIONS',
    url,
    token: null,
    headers: {
      origin,
      'access-control-request-method': 'POST',
      'access-control-request-headers': 'authorization, content-type, prefer',
    },
  });

describe('CORS, any origin (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(database);
  });
  afterAll(async () => t?.close());

  it.each(['/fhir/R4/Patient', '/fhir/R4/$export', '/oauth2/token', '/.well-known/smart-configuration'])(
    'answers a preflight to %s without a token',
    async (url) => {
      const res = await preflight(t, url);
      expect(res.statusCode).toBe(204);
      expect(res.headers['access-control-allow-origin']).toBe('*');
      expect(String(res.headers['access-control-allow-methods'])).toContain('POST');
      expect(String(res.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
    },
  );

  it('marks FHIR, OAuth and discovery answers (errors too) and exposes the headers apps read', async () => {
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient?_count=1`,
      token: t.adminToken,
      headers: { origin: APP },
    });
    expect(read.statusCode).toBe(200);
    expect(read.headers['access-control-allow-origin']).toBe('*');
    expect(String(read.headers['access-control-expose-headers'])).toMatch(/ETag.*Location|Location.*ETag/);
    const anonymous = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient`,
      token: null,
      headers: { origin: APP },
    });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.headers['access-control-allow-origin']).toBe('*');
    const token = await tokenRequest(t.app, { grant_type: 'client_credentials' }, { origin: APP });
    expect(token.headers['access-control-allow-origin']).toBe('*');
    const discovery = await t.request({
      method: 'GET',
      url: '/.well-known/openid-configuration',
      token: null,
      headers: { origin: APP },
    });
    expect(discovery.headers['access-control-allow-origin']).toBe('*');
  });
});

describe('CORS, configured origins', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(database, { corsOrigins: [APP, 'http://localhost:3000'] });
  });
  afterAll(async () => t?.close());

  it('allows a listed origin by name and gives another none', async () => {
    const ok = await preflight(t, '/fhir/R4/Patient');
    expect(ok.headers['access-control-allow-origin']).toBe(APP);
    expect(String(ok.headers.vary)).toMatch(/origin/i);
    const other = await preflight(t, '/fhir/R4/Patient', 'https://evil.example.net');
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/metadata`,
      token: null,
      headers: { origin: 'http://localhost:3000' },
    });
    expect(read.headers['access-control-allow-origin']).toBe('http://localhost:3000');
  });
});
