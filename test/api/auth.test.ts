// client_credentials login, token claims, /auth/me, discovery, 401s, and the isolation rules of API.md §3.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import {
  ADMIN_CLIENT_ID,
  ADMIN_CLIENT_SECRET,
  startTestApp,
  type TestApp,
  postResource,
  tokenRequest,
} from '../support/app.js';

describe.each(testDatabases())('login and isolation on $name', (database) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp(database);
  });
  afterAll(async () => t?.close());

  it('issues a token with the claims third-party clients read', async () => {
    const res = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: ADMIN_CLIENT_ID,
      client_secret: ADMIN_CLIENT_SECRET,
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      token_type: 'Bearer',
      expires_in: 3600,
      scope: 'openid',
      project: { reference: `Project/${t.superProjectId}` },
      profile: { reference: `ClientApplication/${ADMIN_CLIENT_ID}` },
    });
    const claims = decodeJwt(body.access_token);
    expect(claims).toMatchObject({
      iss: 'http://cinder.test/',
      sub: ADMIN_CLIENT_ID,
      client_id: ADMIN_CLIENT_ID,
      profile: `ClientApplication/${ADMIN_CLIENT_ID}`,
    });
    for (const k of ['exp', 'iat', 'login_id', 'scope']) expect(claims[k]).toBeDefined();
  });

  it('accepts HTTP Basic client authentication', async () => {
    const res = await tokenRequest(
      t.app,
      { grant_type: 'client_credentials' },
      {
        authorization: `Basic ${Buffer.from(`${ADMIN_CLIENT_ID}:${ADMIN_CLIENT_SECRET}`).toString('base64')}`,
      },
    );
    expect(res.statusCode).toBe(200);
  });

  it('answers RFC 6749 errors', async () => {
    const post = (fields: Record<string, string>) => tokenRequest(t.app, fields);
    const wrong = await post({
      grant_type: 'client_credentials',
      client_id: ADMIN_CLIENT_ID,
      client_secret: 'nope',
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error).toBe('invalid_client');
    const unknown = await post({
      grant_type: 'client_credentials',
      client_id: 'no-such-client',
      client_secret: 'nope',
    });
    expect(unknown.statusCode).toBe(401);
    const grant = await post({ grant_type: 'magic' });
    expect(grant.statusCode).toBe(400);
    expect(grant.json().error).toBe('unsupported_grant_type');
    const missing = await post({ grant_type: 'client_credentials' });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toBe('invalid_request');
  });

  it('describes the login at /auth/me and accepts the X-Medplum header', async () => {
    const res = await t.request({
      method: 'GET',
      url: '/auth/me',
      token: t.adminToken,
      headers: { 'x-medplum': 'extended' },
    });
    expect(res.statusCode).toBe(200);
    const me = res.json();
    expect(me.profile).toMatchObject({ resourceType: 'ClientApplication', id: ADMIN_CLIENT_ID });
    expect(me.profile.secret).toBeUndefined();
    expect(me.project).toMatchObject({ resourceType: 'Project', id: t.superProjectId, superAdmin: true });
    expect(me.membership).toMatchObject({ resourceType: 'ProjectMembership', admin: true });
  });

  it('publishes JWKS and OpenID discovery; the token verifies with the published key', async () => {
    const jwks = (await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json();
    expect(jwks.keys.length).toBeGreaterThan(0);
    expect(jwks.keys[0].d).toBeUndefined();
    const { createLocalJWKSet, jwtVerify } = await import('jose');
    await expect(jwtVerify(t.adminToken, createLocalJWKSet(jwks))).resolves.toBeDefined();
    const oidc = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(oidc.token_endpoint).toBe('http://cinder.test/oauth2/token');
    expect(oidc.jwks_uri).toBe('http://cinder.test/.well-known/jwks.json');
  });

  it('answers 401 with WWW-Authenticate for a missing, malformed, wrongly signed or expired token', async () => {
    const none = await t.request({ method: 'GET', url: `${t.fhir}/Patient` });
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
    expect(none.json().resourceType).toBe('OperationOutcome');
    const garbage = await t.request({ method: 'GET', url: `${t.fhir}/Patient`, token: 'not.a.jwt' });
    expect(garbage.statusCode).toBe(401);
    expect(garbage.headers['www-authenticate']).toMatch(/invalid_token/);
    const [h, p] = t.adminToken.split('.');
    const forged = await t.request({ method: 'GET', url: `${t.fhir}/Patient`, token: `${h}.${p}.AAAA` });
    expect(forged.statusCode).toBe(401);
    const { SignJWT, generateKeyPair } = await import('jose');
    const { privateKey } = await generateKeyPair('RS256');
    const kid = (await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json().keys[0].kid;
    const expired = await new SignJWT({ login_id: 'x', profile: 'Practitioner/x' })
      .setProtectedHeader({ alg: 'RS256', kid })
      .setIssuer('http://cinder.test/')
      .setSubject('x')
      .setExpirationTime(Math.floor(Date.now() / 1000) - 10)
      .sign(privateKey);
    const exp = await t.request({ method: 'GET', url: `${t.fhir}/Patient`, token: expired });
    expect(exp.statusCode).toBe(401);
  });

  it("keeps projects apart: another project's resource is 404 for read, update, delete and absent from search", async () => {
    const a = await t.newProject('A');
    const b = await t.newProject('B');
    const created = await postResource(t, a.memberToken, {
      resourceType: 'Patient',
      name: [{ family: 'Isolated' }],
    });
    expect(created.statusCode).toBe(201);
    const p = created.json();
    expect(p.meta.project).toBe(a.projectId);
    const url = `${t.fhir}/Patient/${p.id}`;
    expect((await t.request({ method: 'GET', url, token: b.adminToken })).statusCode).toBe(404);
    const put = await t.request({
      method: 'PUT',
      url,
      token: b.adminToken,
      payload: { ...p, meta: undefined, gender: 'male' },
    });
    expect(put.statusCode).toBe(404);
    expect((await t.request({ method: 'DELETE', url, token: b.adminToken })).statusCode).toBe(404);
    expect((await t.request({ method: 'GET', url: `${url}/_history`, token: b.adminToken })).statusCode).toBe(
      404,
    );
    const search = (
      await t.request({ method: 'GET', url: `${t.fhir}/Patient?family=Isolated`, token: b.adminToken })
    ).json();
    expect(search.entry ?? []).toHaveLength(0);
    const still = (await t.request({ method: 'GET', url, token: a.memberToken })).json();
    expect(still.gender).toBeUndefined();
    expect(still.meta.versionId).toBe('1');
    // The super administrator sees every project.
    expect((await t.request({ method: 'GET', url, token: t.adminToken })).statusCode).toBe(200);
  });

  it('does not let a client place a resource in another project', async () => {
    const a = await t.newProject('C');
    const b = await t.newProject('D');
    const res = await postResource(t, a.adminToken, {
      resourceType: 'Patient',
      meta: { project: b.projectId },
    });
    expect(res.statusCode).toBe(403);
  });

  it('lets only admins change ClientApplications and memberships, and only super admins create projects', async () => {
    const a = await t.newProject('E');
    const client = await postResource(t, a.memberToken, { resourceType: 'ClientApplication', name: 'x' });
    expect(client.statusCode).toBe(403);
    const membership = await t.request({
      method: 'POST',
      url: `${t.fhir}/ProjectMembership`,
      token: a.memberToken,
      payload: {
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${a.projectId}` },
        user: { reference: 'ClientApplication/x' },
        profile: { reference: 'ClientApplication/x' },
        admin: true,
      },
    });
    expect(membership.statusCode).toBe(403);
    const project = await postResource(t, a.adminToken, { resourceType: 'Project', name: 'Mine' });
    expect(project.statusCode).toBe(403);
    const ok = await postResource(t, a.adminToken, { resourceType: 'ClientApplication', name: 'y' });
    expect(ok.statusCode).toBe(201);
    // The generated secret is shown once, in the create response, and never again.
    expect(typeof ok.json().secret).toBe('string');
    const again = await t.request({
      method: 'GET',
      url: `${t.fhir}/ClientApplication/${ok.json().id}`,
      token: a.adminToken,
    });
    expect(again.json().secret).toBeUndefined();
    expect(await t.token(ok.json().id, ok.json().secret).catch((e: Error) => e.message)).toMatch(
      /login failed: 401/,
    );
  });

  it('never returns secrets or password hashes', async () => {
    const users = await t.request({ method: 'GET', url: `${t.fhir}/User`, token: t.adminToken });
    expect(users.statusCode).toBe(200);
    expect(users.body).not.toMatch(/passwordHash|\$2[aby]\$/);
    const clients = await t.request({
      method: 'GET',
      url: `${t.fhir}/ClientApplication`,
      token: t.adminToken,
    });
    expect(clients.body).not.toContain(ADMIN_CLIENT_SECRET);
    expect(
      clients
        .json()
        .entry.every((e: { resource: Record<string, unknown> }) => e.resource.secret === undefined),
    ).toBe(true);
  });
});
