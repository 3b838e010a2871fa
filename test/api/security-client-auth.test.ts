// Issue 25 point 6: a confidential client authenticates at the token endpoint (RFC 6749 §2.3, §4.1.3, §6). A client
// whose administrator wrote a `secret`, or that registered a `jwksUri` (private_key_jwt), redeems its authorization
// codes and refresh tokens only with that proof: HTTP Basic or client_id + client_secret in the body, or a client
// assertion; a missing or wrong proof answers 401 invalid_client (with WWW-Authenticate for Basic, RFC 6749 §5.2). A
// public client (no secret written, no jwksUri) keeps redeeming with PKCE alone, and a refresh token issued to one
// client is never redeemed as another.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  inviteRequest,
  postResource,
  setUserPassword,
  startTestApp,
  tokenRequest,
  type TestApp,
} from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { actionOf, Browser, pkce, redirectParams, transactionOf } from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const EMAIL = 'conf@clients.example';
const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const basic = (id: string, secret: string): Record<string, string> => ({
  authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`,
});

/** Expects RFC 6749 §5.2 `401 invalid_client`. */
function expectInvalidClient(res: LightMyRequestResponse, description?: RegExp): void {
  expect(res.statusCode, res.body).toBe(401);
  expect(res.json()).toMatchObject({ error: 'invalid_client' });
  if (description) expect(res.json().error_description).toMatch(description);
}

describe.each(testDatabases())('confidential clients at the token endpoint on $name', (database) => {
  let t: TestApp;
  let projectId: string;
  let projectToken: string;
  let jwksServer: http.Server;
  let jwksUrl: string;
  let key: { privateKey: CryptoKey; jwk: JWK };
  const CONF = { id: 'conf-app', secret: 'conf-secret-0123456789' };
  const OTHER = { id: 'other-app', secret: 'other-secret-0123456789' };

  const put = async (resource: Json): Promise<void> => {
    const res = await t.request({
      method: 'PUT',
      url: `${t.fhir}/ClientApplication/${resource.id as string}`,
      token: projectToken,
      payload: { resourceType: 'ClientApplication', ...resource },
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
  };

  /** POST /auth/login for `clientId`: a code of a login bound to that client, and its verifier. */
  const codeFor = async (clientId?: string): Promise<{ code: string; verifier: string }> => {
    const p = pkce();
    const res = await t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: {
        email: EMAIL,
        password: PASSWORD,
        codeChallenge: p.challenge,
        codeChallengeMethod: 'S256',
        scope: 'openid offline_access',
        ...(clientId ? { clientId } : {}),
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    return { code: res.json().code as string, verifier: p.verifier };
  };
  const redeem = (
    c: { code: string; verifier: string },
    fields: Record<string, string> = {},
    headers: Record<string, string> = {},
  ) =>
    tokenRequest(
      t.app,
      { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, ...fields },
      headers,
    );
  const refresh = (refreshToken: string, fields: Record<string, string> = {}, headers = {}) =>
    tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: refreshToken, ...fields }, headers);
  /** A refresh token of a login bound to the confidential client (obtained with its secret). */
  const confRefreshToken = async (): Promise<string> => {
    const res = await redeem(await codeFor(CONF.id), {}, basic(CONF.id, CONF.secret));
    expect(res.statusCode, res.body).toBe(200);
    return res.json().refresh_token as string;
  };
  const assertion = (clientId: string, jti = randomUUID()): Promise<string> =>
    new SignJWT({ jti })
      .setProtectedHeader({ alg: 'RS384', kid: 'k1', typ: 'JWT' })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience('http://cinder.test/oauth2/token')
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + 120)
      .sign(key.privateKey);

  beforeAll(async () => {
    const pair = await generateKeyPair('RS384', { extractable: true });
    key = {
      privateKey: pair.privateKey,
      jwk: { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'RS384' },
    };
    jwksServer = http.createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [key.jwk] })),
    );
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', r));
    jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`;
    t = await startTestApp(database, { allowedOutboundHosts: [new URL(jwksUrl).host] });
    const p = await t.newProject('Clients');
    projectId = p.projectId;
    projectToken = p.adminToken;
    await put({ id: CONF.id, name: 'Confidential', secret: CONF.secret, meta: { project: projectId } });
    await put({ id: OTHER.id, name: 'Another', secret: OTHER.secret, meta: { project: projectId } });
    await put({
      id: 'public-app',
      name: 'Public',
      redirectUri: 'https://pub.example/cb',
      meta: { project: projectId },
    });
    await put({ id: 'keyed-app', name: 'Keys', jwksUri: jwksUrl, meta: { project: projectId } });
    const invited = await inviteRequest(t, projectToken, projectId, {
      resourceType: 'Practitioner',
      firstName: 'Con',
      lastName: 'Fidential',
      email: EMAIL,
    });
    expect(invited.statusCode, invited.body).toBe(200);
    await setUserPassword(t, (invited.json().user.reference as string).split('/')[1] as string, PASSWORD);
  });
  afterAll(async () => {
    await t?.close();
    await new Promise((r) => jwksServer?.close(r));
  });

  describe('authorization codes', () => {
    it('refuses a code of a confidential client redeemed without client authentication: 401 invalid_client', async () => {
      expectInvalidClient(await redeem(await codeFor(CONF.id)), /authenticate/);
      expectInvalidClient(await redeem(await codeFor(CONF.id), { client_id: CONF.id }), /authenticate/);
    });

    it('refuses a wrong secret, by HTTP Basic (with WWW-Authenticate) and in the body', async () => {
      const byBasic = await redeem(await codeFor(CONF.id), {}, basic(CONF.id, 'wrong'));
      expectInvalidClient(byBasic);
      expect(byBasic.headers['www-authenticate']).toMatch(/^Basic /);
      expectInvalidClient(
        await redeem(await codeFor(CONF.id), { client_id: CONF.id, client_secret: 'wrong' }),
      );
    });

    it('redeems with the secret by HTTP Basic and in the body', async () => {
      const byBasic = await redeem(await codeFor(CONF.id), {}, basic(CONF.id, CONF.secret));
      expect(byBasic.statusCode, byBasic.body).toBe(200);
      expect(byBasic.json().refresh_token).toBeDefined();
      const byBody = await redeem(await codeFor(CONF.id), { client_id: CONF.id, client_secret: CONF.secret });
      expect(byBody.statusCode, byBody.body).toBe(200);
    });

    it('refuses another confidential client’s credentials for the code', async () => {
      const res = await redeem(await codeFor(CONF.id), {}, basic(OTHER.id, OTHER.secret));
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json()).toMatchObject({ error: 'invalid_grant', error_description: /another client/ });
    });

    it('a client with a jwksUri redeems only with a client assertion (private_key_jwt)', async () => {
      expectInvalidClient(
        await redeem(await codeFor('keyed-app'), { client_id: 'keyed-app' }),
        /authenticate/,
      );
      const bad = await redeem(await codeFor('keyed-app'), {
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: await assertion(OTHER.id),
      });
      expectInvalidClient(bad);
      const ok = await redeem(await codeFor('keyed-app'), {
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: await assertion('keyed-app'),
      });
      expect(ok.statusCode, ok.body).toBe(200);
    });

    it('a public client (no secret written) still redeems with PKCE alone, with or without client_id', async () => {
      const withId = await redeem(await codeFor('public-app'), { client_id: 'public-app' });
      expect(withId.statusCode, withId.body).toBe(200);
      const without = await redeem(await codeFor('public-app'));
      expect(without.statusCode, without.body).toBe(200);
      const noClient = await redeem(await codeFor());
      expect(noClient.statusCode, noClient.body).toBe(200);
    });

    it('a client created without a secret (one generated and shown once) is public for the code flow', async () => {
      const created = await postResource(t, projectToken, { resourceType: 'ClientApplication', name: 'Gen' });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json().id as string;
      expect(created.json().secret).toBeDefined();
      const res = await redeem(await codeFor(id), { client_id: id });
      expect(res.statusCode, res.body).toBe(200);
    });

    it('the authorize endpoint: a confidential client’s code needs its secret too', async () => {
      await put({
        id: 'conf-web',
        name: 'Web',
        secret: 'web-secret-0123456789',
        redirectUri: 'https://web.example/cb',
        meta: { project: projectId },
      });
      const signIn = async () => {
        const browser = new Browser(t.app);
        const p = pkce();
        const q = new URLSearchParams({
          response_type: 'code',
          client_id: 'conf-web',
          redirect_uri: 'https://web.example/cb',
          scope: 'openid user/*.rs',
          state: 's',
          aud: 'http://cinder.test/fhir/R4',
          code_challenge: p.challenge,
          code_challenge_method: 'S256',
        });
        const page = await browser.get(`/oauth2/authorize?${q.toString()}`);
        expect(page.statusCode, page.body).toBe(200);
        const res = await browser.post(actionOf(page), {
          transaction: transactionOf(page),
          email: EMAIL,
          password: PASSWORD,
        });
        return { code: redirectParams(res).get('code') as string, verifier: p.verifier };
      };
      const fields = { client_id: 'conf-web', redirect_uri: 'https://web.example/cb' };
      expectInvalidClient(await redeem(await signIn(), fields), /authenticate/);
      const ok = await redeem(await signIn(), { ...fields, client_secret: 'web-secret-0123456789' });
      expect(ok.statusCode, ok.body).toBe(200);
    });
  });

  describe('refresh tokens', () => {
    it('refuses a confidential client’s refresh token without client authentication, and keeps it usable', async () => {
      const token = await confRefreshToken();
      expectInvalidClient(await refresh(token), /authenticate/);
      expectInvalidClient(await refresh(token, { client_id: CONF.id }), /authenticate/);
      // Refused before use: the client itself still redeems it.
      const ok = await refresh(token, {}, basic(CONF.id, CONF.secret));
      expect(ok.statusCode, ok.body).toBe(200);
    });

    it('refuses a wrong secret, by HTTP Basic (with WWW-Authenticate) and in the body', async () => {
      const token = await confRefreshToken();
      const byBasic = await refresh(token, {}, basic(CONF.id, 'wrong'));
      expectInvalidClient(byBasic);
      expect(byBasic.headers['www-authenticate']).toMatch(/^Basic /);
      expectInvalidClient(await refresh(token, { client_id: CONF.id, client_secret: 'wrong' }));
    });

    it('redeems with the secret by HTTP Basic and in the body, rotating each time', async () => {
      const first = await refresh(await confRefreshToken(), {}, basic(CONF.id, CONF.secret));
      expect(first.statusCode, first.body).toBe(200);
      const second = await refresh(first.json().refresh_token as string, {
        client_id: CONF.id,
        client_secret: CONF.secret,
      });
      expect(second.statusCode, second.body).toBe(200);
    });

    it('refuses a refresh token issued to client A redeemed as client B', async () => {
      const token = await confRefreshToken();
      for (const res of [
        await refresh(token, {}, basic(OTHER.id, OTHER.secret)),
        await refresh(token, { client_id: OTHER.id, client_secret: OTHER.secret }),
      ]) {
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json()).toMatchObject({ error: 'invalid_grant', error_description: /another client/ });
      }
      // A public client's token cannot be redeemed as another client either.
      const pub = await redeem(await codeFor('public-app'), { client_id: 'public-app' });
      const pubToken = pub.json().refresh_token as string;
      const asOther = await refresh(pubToken, { client_id: OTHER.id, client_secret: OTHER.secret });
      expect(asOther.json()).toMatchObject({ error: 'invalid_grant' });
      const asPublic = await refresh(pubToken, { client_id: 'public-app' });
      expect(asPublic.statusCode, asPublic.body).toBe(200);
    });

    it('a client with a jwksUri refreshes only with a client assertion', async () => {
      const first = await redeem(await codeFor('keyed-app'), {
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: await assertion('keyed-app'),
      });
      expect(first.statusCode, first.body).toBe(200);
      const token = first.json().refresh_token as string;
      expectInvalidClient(await refresh(token, { client_id: 'keyed-app' }), /authenticate/);
      const ok = await refresh(token, {
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: await assertion('keyed-app'),
      });
      expect(ok.statusCode, ok.body).toBe(200);
    });
  });
});
