// The service's own user login (API.md §2) through HTTP: password login + authorization code + PKCE, refresh token
// rotation and reuse detection, ID Tokens, revocation and logout, token exchange against a mock identity provider,
// and MedplumClient driving the code flow.
import { createHash, randomBytes } from 'node:crypto';
import { MedplumClient } from '@medplum/core';
import type { FastifyInstance } from 'fastify';
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp, postResource, tokenRequest } from '../support/app.js';

const form = (o: Record<string, string>) => new URLSearchParams(o).toString();
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
const PASSWORD = 'correct horse battery staple';

function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** A fetch that serves MedplumClient's requests from the app without a listening port. */
function injectFetch(app: FastifyInstance): typeof fetch {
  return (async (input: string | URL | Request, init: RequestInit = {}) => {
    const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((v, k) => {
      headers[k] = v;
    });
    const res = await app.inject({
      method: (init.method ?? 'GET') as 'GET',
      url: url.pathname + url.search,
      headers,
      ...(typeof init.body === 'string' ? { payload: init.body } : {}),
    });
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) {
      if (v !== undefined) out.set(k, Array.isArray(v) ? v.join(', ') : String(v));
    }
    const empty = res.statusCode === 204 || res.statusCode === 304 || res.rawPayload.length === 0;
    return new Response(empty ? null : res.body, { status: res.statusCode, headers: out });
  }) as typeof fetch;
}

interface Tokens {
  access_token: string;
  refresh_token: string;
  id_token: string;
  scope: string;
  login: string;
}

describe.each(testDatabases())('OAuth flows on $name', (database) => {
  let t: TestApp;
  let idp: MockIdp;
  let now = Date.now();
  const nowSec = () => Math.floor(now / 1000);
  let project: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };
  let alice: { userId: string; membershipId: string; profile: string };
  let jwks: ReturnType<typeof createLocalJWKSet>;

  const invite = async (projectId: string, token: string, body: Record<string, unknown>) => {
    const res = await t.request({
      method: 'POST',
      url: `/admin/projects/${projectId}/invite`,
      token,
      headers: { 'content-type': 'application/json' },
      payload: body,
    });
    expect(res.statusCode).toBe(200);
    const m = res.json();
    return {
      userId: (m.user.reference as string).split('/')[1] as string,
      membershipId: m.id as string,
      profile: m.profile.reference as string,
    };
  };
  const setPassword = (userId: string, password: string, token = t.adminToken) =>
    t.request({
      method: 'POST',
      url: `/admin/users/${userId}/password`,
      token,
      headers: { 'content-type': 'application/json' },
      payload: { password },
    });
  const login = (body: Record<string, unknown>) =>
    t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
  /** Alice's password login with an S256 challenge (the usual case); `extra` adds or overrides fields. */
  const aliceLogin = (p: { challenge: string }, extra: Record<string, unknown> = {}) =>
    login({
      email: 'alice@flows.example',
      password: PASSWORD,
      codeChallenge: p.challenge,
      codeChallengeMethod: 'S256',
      ...extra,
    });
  const token = (fields: Record<string, string>) => tokenRequest(t.app, fields);
  const me = async (token: string) => (await t.request({ method: 'GET', url: '/auth/me', token })).statusCode;
  const startLogin = async (extra: Record<string, unknown> = {}) => {
    const p = pkce();
    const res = await login({
      email: 'alice@flows.example',
      password: PASSWORD,
      codeChallenge: p.challenge,
      codeChallengeMethod: 'S256',
      ...extra,
    });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { login: string; code: string };
    return { ...body, verifier: p.verifier };
  };
  const exchangeCode = (code: string, verifier: string, extra: Record<string, string> = {}) =>
    token({ grant_type: 'authorization_code', code, code_verifier: verifier, ...extra });
  const codeFlow = async (extra: Record<string, unknown> = {}): Promise<Tokens> => {
    const l = await startLogin(extra);
    const res = await exchangeCode(l.code, l.verifier);
    expect(res.statusCode).toBe(200);
    return { ...(res.json() as Omit<Tokens, 'login'>), login: l.login };
  };
  const refresh = (refreshToken: string) =>
    token({ grant_type: 'refresh_token', refresh_token: refreshToken });

  beforeAll(async () => {
    idp = await startMockIdp();
    // The mock provider listens on loopback: the operator allows it (API.md §2 allowedOutboundHosts).
    t = await startTestApp(
      database,
      { allowedOutboundHosts: [new URL(idp.issuer).host] },
      { clock: () => new Date(now) },
    );
    project = await t.newProject('Flows');
    other = await t.newProject('Elsewhere');
    alice = await invite(project.projectId, project.adminToken, {
      resourceType: 'Practitioner',
      firstName: 'Alice',
      lastName: 'Flow',
      email: 'alice@flows.example',
      externalId: 'idp|alice-flows',
    });
    expect((await setPassword(alice.userId, PASSWORD)).statusCode).toBe(200);
    jwks = createLocalJWKSet((await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })).json());
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });
  beforeEach(() => {
    now = Date.now();
    idp.mode = 'ok';
  });

  describe('password login, authorization code and PKCE', () => {
    it('exchanges a code with the right verifier for the documented token response', async () => {
      const l = await startLogin();
      expect(l.login).toBeTruthy();
      expect(l.code).toBeTruthy();
      const res = await exchangeCode(l.code, l.verifier);
      expect(res.statusCode).toBe(200);
      expect(res.headers['cache-control']).toBe('no-store');
      const body = res.json();
      expect(body).toMatchObject({
        token_type: 'Bearer',
        expires_in: 3600,
        scope: 'openid',
        project: { reference: `Project/${project.projectId}` },
        profile: { reference: alice.profile },
      });
      expect(typeof body.refresh_token).toBe('string');
      expect(typeof body.id_token).toBe('string');
      expect(decodeJwt(body.access_token)).toMatchObject({
        iss: 'http://cinder.test/',
        sub: alice.userId,
        login_id: l.login,
        profile: alice.profile,
        scope: 'openid',
      });
      const meRes = await t.request({ method: 'GET', url: '/auth/me', token: body.access_token });
      expect(meRes.statusCode).toBe(200);
      expect(meRes.json().membership).toMatchObject({ id: alice.membershipId });
      const patients = await t.request({ method: 'GET', url: `${t.fhir}/Patient`, token: body.access_token });
      expect(patients.statusCode).toBe(200);
    });

    it('refuses a wrong verifier, and a code is used up by any attempt', async () => {
      const l = await startLogin();
      const wrong = await exchangeCode(l.code, pkce().verifier);
      expect(wrong.statusCode).toBe(400);
      expect(wrong.json()).toMatchObject({ error: 'invalid_grant' });
      const again = await exchangeCode(l.code, l.verifier);
      expect(again.statusCode).toBe(400);
      expect(again.json().error).toBe('invalid_grant');
      const missing = await token({ grant_type: 'authorization_code', code: l.code });
      expect(missing.statusCode).toBe(400);
      expect(missing.json().error).toBe('invalid_request');
      const unknown = await exchangeCode('no-such-code', l.verifier);
      expect(unknown.json().error).toBe('invalid_grant');
    });

    it('refuses a reused code and ends the login it was issued for', async () => {
      const l = await startLogin();
      const first = await exchangeCode(l.code, l.verifier);
      expect(first.statusCode).toBe(200);
      const tokens = first.json();
      expect(await me(tokens.access_token)).toBe(200);
      const second = await exchangeCode(l.code, l.verifier);
      expect(second.statusCode).toBe(400);
      expect(second.json().error).toBe('invalid_grant');
      expect(await me(tokens.access_token)).toBe(401);
      expect((await refresh(tokens.refresh_token)).json().error).toBe('invalid_grant');
    });

    it('refuses a code older than 60 seconds', async () => {
      const l = await startLogin();
      now += 61_000;
      const res = await exchangeCode(l.code, l.verifier);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_grant' });
      expect(res.json().error_description).toMatch(/expired/);
      const fresh = await startLogin();
      now += 59_000;
      expect((await exchangeCode(fresh.code, fresh.verifier)).statusCode).toBe(200);
    });

    it('requires S256: plain and a missing challenge are refused', async () => {
      const p = pkce();
      const plain = await login({
        email: 'alice@flows.example',
        password: PASSWORD,
        codeChallenge: p.verifier,
        codeChallengeMethod: 'plain',
      });
      expect(plain.statusCode).toBe(400);
      expect(plain.json()).toMatchObject({
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'error', code: 'invalid' }],
      });
      expect(plain.json().issue[0].details.text).toMatch(/S256/);
      const none = await login({ email: 'alice@flows.example', password: PASSWORD });
      expect(none.statusCode).toBe(400);
      const bad = await login({
        email: 'alice@flows.example',
        password: PASSWORD,
        codeChallenge: 'short',
        codeChallengeMethod: 'S256',
      });
      expect(bad.statusCode).toBe(400);
      const noEmail = await login({
        password: PASSWORD,
        codeChallenge: p.challenge,
        codeChallengeMethod: 'S256',
      });
      expect(noEmail.statusCode).toBe(400);
      expect(noEmail.json().resourceType).toBe('OperationOutcome');
    });

    it('answers a wrong password, an unknown email and a user without password identically', async () => {
      const passwordless = await invite(project.projectId, project.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'No',
        lastName: 'Password',
        email: 'nopassword@flows.example',
      });
      expect(passwordless.userId).toBeTruthy();
      const p = pkce();
      const attempt = (email: string, password: string) =>
        login({ email, password, codeChallenge: p.challenge, codeChallengeMethod: 'S256' });
      const wrong = await attempt('alice@flows.example', 'not the password');
      const unknown = await attempt('nobody@flows.example', PASSWORD);
      const noPassword = await attempt('nopassword@flows.example', PASSWORD);
      expect(wrong.statusCode).toBe(400);
      expect(wrong.json().issue[0]).toMatchObject({ severity: 'error', code: 'invalid' });
      for (const r of [unknown, noPassword]) {
        expect(r.statusCode).toBe(wrong.statusCode);
        expect(r.body).toBe(wrong.body);
      }
      // The email is compared case-insensitively.
      expect((await attempt('ALICE@Flows.Example', PASSWORD)).statusCode).toBe(200);
    });

    it('lets only a super administrator set passwords; a new password ends the old password logins', async () => {
      const bob = await invite(project.projectId, project.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'Bob',
        lastName: 'Reset',
        email: 'bob@flows.example',
      });
      expect((await setPassword(bob.userId, 'bob-password-1', project.adminToken)).statusCode).toBe(403);
      expect((await setPassword(bob.userId, 'short')).statusCode).toBe(400);
      expect((await setPassword('no-such-user', 'long-enough-1')).statusCode).toBe(404);
      expect((await setPassword(bob.userId, 'bob-password-1')).statusCode).toBe(200);
      const p = pkce();
      const firstPassword = () =>
        login({
          email: 'bob@flows.example',
          password: 'bob-password-1',
          codeChallenge: p.challenge,
          codeChallengeMethod: 'S256',
        });
      const l = await firstPassword();
      expect(l.statusCode).toBe(200);
      const tokens = (await exchangeCode(l.json().code, p.verifier)).json();
      expect(await me(tokens.access_token)).toBe(200);
      expect((await setPassword(bob.userId, 'bob-password-2')).statusCode).toBe(200);
      expect(await me(tokens.access_token)).toBe(401);
      expect((await firstPassword()).statusCode).toBe(400);
    });

    it('selects the membership by projectId and refuses a project the user is not in', async () => {
      const p = pkce();
      const res = await aliceLogin(p, { projectId: other.projectId });
      expect(res.statusCode).toBe(403);
      const ok = await startLogin({ projectId: project.projectId });
      expect((await exchangeCode(ok.code, ok.verifier)).json().project.reference).toBe(
        `Project/${project.projectId}`,
      );
    });
  });

  describe('ID Token', () => {
    it('carries the OpenID claims and verifies against the published JWKS', async () => {
      const tokens = await codeFlow({ nonce: 'n-0S6_WzA2Mj', scope: 'openid profile offline_access bogus' });
      expect(tokens.scope).toBe('openid profile offline_access');
      const { payload, protectedHeader } = await jwtVerify(tokens.id_token, jwks, {
        issuer: 'http://cinder.test/',
        audience: 'cinder',
      });
      expect(protectedHeader.alg).toBe('RS256');
      expect(payload).toMatchObject({ sub: alice.userId, nonce: 'n-0S6_WzA2Mj', fhirUser: alice.profile });
      expect(payload.exp).toBeGreaterThan(payload.iat as number);
      expect(typeof payload.auth_time).toBe('number');
      const digest = createHash('sha256').update(tokens.access_token).digest();
      expect(payload.at_hash).toBe(digest.subarray(0, 16).toString('base64url'));
      expect(payload.login_id).toBeUndefined();
      // An ID Token is not an access token.
      expect(await me(tokens.id_token)).toBe(401);
    });

    it('names the ClientApplication of the login as audience and client_id', async () => {
      const client = await postResource(t, project.adminToken, {
        resourceType: 'ClientApplication',
        name: 'Web app',
      });
      expect(client.statusCode).toBe(201);
      const clientId = client.json().id as string;
      const tokens = await codeFlow({ clientId });
      expect(decodeJwt(tokens.access_token).client_id).toBe(clientId);
      const { payload } = await jwtVerify(tokens.id_token, jwks, { audience: clientId });
      expect(payload.sub).toBe(alice.userId);
      const l = await startLogin({ clientId });
      const mismatch = await exchangeCode(l.code, l.verifier, { client_id: 'another-client' });
      expect(mismatch.json().error).toBe('invalid_grant');
      const p = pkce();
      const unknown = await aliceLogin(p, { clientId: 'no-such-client' });
      expect(unknown.statusCode).toBe(400);
    });
  });

  describe('refresh tokens', () => {
    it('rotates: the new token works, the old one is refused, and its reuse ends the login', async () => {
      const first = await codeFlow();
      const second = await refresh(first.refresh_token);
      expect(second.statusCode).toBe(200);
      const r2 = second.json();
      expect(r2).toMatchObject({
        token_type: 'Bearer',
        project: { reference: `Project/${project.projectId}` },
        profile: { reference: alice.profile },
      });
      expect(r2.refresh_token).not.toBe(first.refresh_token);
      expect(decodeJwt(r2.access_token).login_id).toBe(first.login);
      expect(await me(r2.access_token)).toBe(200);
      await expect(jwtVerify(r2.id_token, jwks, { audience: 'cinder' })).resolves.toBeDefined();

      const third = await refresh(r2.refresh_token);
      expect(third.statusCode).toBe(200);
      const r3 = third.json();
      expect(await me(r3.access_token)).toBe(200);

      // The first token, already rotated, comes back: the whole login ends.
      const replay = await refresh(first.refresh_token);
      expect(replay.statusCode).toBe(400);
      expect(replay.json().error).toBe('invalid_grant');
      expect((await refresh(r3.refresh_token)).json().error).toBe('invalid_grant');
      for (const token of [first.access_token, r2.access_token, r3.access_token]) {
        expect(await me(token)).toBe(401);
      }
    });

    it('refuses unknown and missing refresh tokens and widened scopes', async () => {
      expect((await refresh('not-a-refresh-token')).json().error).toBe('invalid_grant');
      const missing = await token({ grant_type: 'refresh_token' });
      expect(missing.json().error).toBe('invalid_request');
      const tokens = await codeFlow({ scope: 'openid profile' });
      const wider = await token({
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        scope: 'openid email',
      });
      expect(wider.json().error).toBe('invalid_scope');
      const narrower = await token({
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        scope: 'openid',
      });
      expect(narrower.statusCode).toBe(200);
      expect(narrower.json().scope).toBe('openid');
      // The rotated token keeps the original scope.
      const next = await refresh(narrower.json().refresh_token);
      expect(next.json().scope).toBe('openid profile');
    });

    it('refuses a refresh token after 14 days', async () => {
      const tokens = await codeFlow();
      now += 15 * 24 * 3600 * 1000;
      const res = await refresh(tokens.refresh_token);
      expect(res.json()).toMatchObject({ error: 'invalid_grant' });
    });
  });

  describe('revocation and logout', () => {
    it('POST /oauth2/revoke with an access token ends its login at once', async () => {
      const tokens = await codeFlow();
      expect(await me(tokens.access_token)).toBe(200);
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: form({ token: tokens.access_token, token_type_hint: 'access_token' }),
      });
      expect(res.statusCode).toBe(200);
      expect(await me(tokens.access_token)).toBe(401);
      expect((await refresh(tokens.refresh_token)).json().error).toBe('invalid_grant');
    });

    it('POST /oauth2/revoke with a refresh token ends its login; unknown tokens answer 200', async () => {
      const tokens = await codeFlow();
      const revoke = (token: string) =>
        t.app.inject({
          method: 'POST',
          url: '/oauth2/revoke',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          payload: form({ token }),
        });
      expect((await revoke(tokens.refresh_token)).statusCode).toBe(200);
      expect(await me(tokens.access_token)).toBe(401);
      expect((await revoke('unknown-token')).statusCode).toBe(200);
      expect((await revoke(tokens.access_token)).statusCode).toBe(200);
      const missing = await t.app.inject({
        method: 'POST',
        url: '/oauth2/revoke',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: '',
      });
      expect(missing.statusCode).toBe(400);
      expect(missing.json().error).toBe('invalid_request');
    });

    it('POST /auth/logout ends the login of the bearer token', async () => {
      const tokens = await codeFlow();
      const out = await t.request({ method: 'POST', url: '/auth/logout', token: tokens.access_token });
      expect(out.statusCode).toBe(200);
      expect(await me(tokens.access_token)).toBe(401);
      expect((await refresh(tokens.refresh_token)).json().error).toBe('invalid_grant');
      expect((await t.request({ method: 'POST', url: '/auth/logout' })).statusCode).toBe(401);
      // Other logins of the same user are untouched.
      const again = await codeFlow();
      expect(await me(again.access_token)).toBe(200);
    });
  });

  describe('token exchange', () => {
    let byEmail: string;
    let bySubject: string;
    const createClient = async (token: string, useSubject: boolean) => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/ClientApplication`,
        token,
        payload: {
          resourceType: 'ClientApplication',
          name: `Exchange ${useSubject ? 'subject' : 'email'}`,
          identityProvider: {
            authorizeUrl: `${idp.issuer}authorize`,
            tokenUrl: `${idp.issuer}token`,
            userInfoUrl: idp.userInfoUrl,
            clientId: 'cinder-at-idp',
            clientSecret: 'idp-secret',
            useSubject,
          },
        },
      });
      expect(res.statusCode).toBe(201);
      return res.json().id as string;
    };
    const exchange = (subjectToken: string, clientId: string, extra: Record<string, string> = {}) =>
      token({
        grant_type: TOKEN_EXCHANGE,
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        client_id: clientId,
        ...extra,
      });

    beforeAll(async () => {
      byEmail = await createClient(project.adminToken, false);
      bySubject = await createClient(project.adminToken, true);
      await invite(other.projectId, other.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'Carol',
        lastName: 'Elsewhere',
        email: 'carol@elsewhere.example',
        externalId: 'idp|carol',
      });
    });

    it('finds the user by email (case-insensitive) and answers the documented JSON', async () => {
      const subject = await idp.token(
        { sub: 'idp-user-1', email: 'Alice@FLOWS.example' },
        { now: nowSec(), lifetime: 600 },
      );
      const calls = idp.calls;
      const res = await exchange(subject, byEmail);
      expect(res.statusCode).toBe(200);
      expect(idp.calls).toBe(calls + 1);
      const body = res.json();
      expect(body).toMatchObject({
        token_type: 'Bearer',
        scope: 'openid',
        project: { reference: `Project/${project.projectId}` },
        profile: { reference: alice.profile },
      });
      expect(body.refresh_token).toBeUndefined();
      // Never past the subject token's exp.
      expect(body.expires_in).toBeLessThanOrEqual(600);
      const claims = decodeJwt(body.access_token);
      expect(claims.exp).toBeLessThanOrEqual(nowSec() + 600);
      expect(claims).toMatchObject({ sub: alice.userId, client_id: byEmail, profile: alice.profile });
      expect(await me(body.access_token)).toBe(200);
    });

    it('finds the user by sub against ProjectMembership.externalId with useSubject', async () => {
      const subject = await idp.token({ sub: 'idp|alice-flows' }, { now: nowSec() });
      const res = await exchange(subject, bySubject);
      expect(res.statusCode).toBe(200);
      expect(res.json().profile.reference).toBe(alice.profile);
      expect(res.json().expires_in).toBe(3600);
      // The email client does not look at sub, and the subject client does not look at email.
      expect((await exchange(subject, byEmail)).json().error).toBe('invalid_grant');
      const emailOnly = await idp.token(
        { sub: 'unknown-sub', email: 'alice@flows.example' },
        { now: nowSec() },
      );
      expect((await exchange(emailOnly, bySubject)).json().error).toBe('invalid_grant');
    });

    it('refuses unknown users and users of another project with invalid_grant', async () => {
      const cases = [
        [await idp.token({ sub: 'x', email: 'nobody@flows.example' }, { now: nowSec() }), byEmail],
        [await idp.token({ sub: 'idp|nobody' }, { now: nowSec() }), bySubject],
        [await idp.token({ sub: 'x', email: 'carol@elsewhere.example' }, { now: nowSec() }), byEmail],
        [await idp.token({ sub: 'idp|carol' }, { now: nowSec() }), bySubject],
        [await idp.token({ sub: 'x', email: 'alice@flows.example', email_verified: false }), byEmail],
      ] as const;
      for (const [subject, client] of cases) {
        const res = await exchange(subject, client);
        expect(res.statusCode).toBe(400);
        expect(res.json().error).toBe('invalid_grant');
      }
    });

    it('refuses a subject token the provider rejects, and an expired one without asking the provider', async () => {
      const subject = await idp.token({ sub: 'x', email: 'alice@flows.example' }, { now: nowSec() });
      idp.mode = 'reject';
      const rejected = await exchange(subject, byEmail);
      expect(rejected.statusCode).toBe(400);
      expect(rejected.json().error).toBe('invalid_grant');
      idp.mode = 'ok';
      const expired = await idp.token(
        { sub: 'x', email: 'alice@flows.example' },
        { now: nowSec() - 7200, lifetime: 60 },
      );
      const calls = idp.calls;
      const res = await exchange(expired, byEmail);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_grant' });
      expect(idp.calls).toBe(calls);
    });

    it('answers invalid_request for missing fields, invalid_client for an unknown client', async () => {
      const subject = await idp.token({ sub: 'x', email: 'alice@flows.example' }, { now: nowSec() });
      const base = {
        grant_type: TOKEN_EXCHANGE,
        subject_token: subject,
        subject_token_type: ACCESS_TOKEN_TYPE,
        client_id: byEmail,
      };
      for (const key of ['subject_token', 'subject_token_type', 'client_id'] as const) {
        const { [key]: _drop, ...rest } = base;
        const res = await token(rest);
        expect(res.statusCode).toBe(400);
        expect(res.json().error).toBe('invalid_request');
      }
      const wrongType = await exchange(subject, byEmail, {
        subject_token_type: 'urn:ietf:params:oauth:token-type:id_token',
      });
      expect(wrongType.json().error).toBe('invalid_request');
      const unknown = await exchange(subject, 'no-such-client');
      expect(unknown.statusCode).toBe(401);
      expect(unknown.json().error).toBe('invalid_client');
      // A client without an identity provider.
      const plain = await postResource(t, project.adminToken, {
        resourceType: 'ClientApplication',
        name: 'No IdP',
      });
      const noIdp = await exchange(subject, plain.json().id as string);
      expect(noIdp.statusCode).toBe(400);
      expect(noIdp.json().error).toBe('invalid_request');
    });
  });

  it('publishes the working grants and endpoints in the discovery document', async () => {
    const oidc = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(oidc.grant_types_supported).toEqual(
      expect.arrayContaining(['authorization_code', 'refresh_token', 'client_credentials', TOKEN_EXCHANGE]),
    );
    expect(oidc.code_challenge_methods_supported).toEqual(['S256']);
    expect(oidc.revocation_endpoint).toBe('http://cinder.test/oauth2/revoke');
    expect(oidc.authorization_endpoint).toBe('http://cinder.test/oauth2/authorize');
  });

  it('MedplumClient signs in with email and password, reads FHIR, refreshes and signs out', async () => {
    // MedplumClient reads the PKCE verifier from sessionStorage, as in a browser. Its own S256 needs `window`
    // (else it falls back to `plain`, which the server refuses), so the challenge is made here.
    const g = globalThis as { sessionStorage?: unknown };
    const previous = Object.getOwnPropertyDescriptor(g, 'sessionStorage');
    const p = pkce();
    const items = new Map<string, string>([['codeVerifier', p.verifier]]);
    Object.defineProperty(g, 'sessionStorage', {
      configurable: true,
      value: {
        getItem: (k: string) => items.get(k) ?? null,
        setItem: (k: string, v: string) => void items.set(k, v),
        removeItem: (k: string) => void items.delete(k),
        clear: () => items.clear(),
      },
    });
    try {
      const medplum = new MedplumClient({ baseUrl: 'http://cinder.test/', fetch: injectFetch(t.app) });
      const started = await medplum.startLogin({
        email: 'alice@flows.example',
        password: PASSWORD,
        codeChallenge: p.challenge,
        codeChallengeMethod: 'S256',
      });
      expect(started.code).toBeTruthy();
      const profile = await medplum.processCode(started.code as string);
      expect(`${profile.resourceType}/${profile.id}`).toBe(alice.profile);
      const created = await medplum.createResource({ resourceType: 'Patient', name: [{ family: 'Flow' }] });
      const bundle = await medplum.search('Patient', { family: 'Flow' });
      expect(bundle.entry?.map((e: { resource?: { id?: string } }) => e.resource?.id)).toContain(created.id);
      const before = medplum.getAccessToken() as string;
      // Forces a refresh (the token is "expiring" within any grace period longer than its lifetime).
      await medplum.refreshIfExpired(24 * 3600 * 1000);
      const after = medplum.getAccessToken() as string;
      expect(after).not.toBe(before);
      expect(await me(after)).toBe(200);
      await medplum.signOut();
      expect(await me(after)).toBe(401);
    } finally {
      if (previous) Object.defineProperty(g, 'sessionStorage', previous);
      else delete g.sessionStorage;
    }
  });
});
