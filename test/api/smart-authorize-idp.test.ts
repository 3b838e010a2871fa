// "Sign in with <provider>" at the authorize endpoint (issue 17 point 1): the ClientApplication's identity provider
// signs the user in through its own code flow with PKCE, Cinder redeems the code at its token endpoint (with the stored
// client secret), finds the user through its userinfo (email, or sub as externalId), and the app gets its code. A
// callback in another browser, a replayed or unknown state, a provider error, an unknown user and a refused exchange
// never reach the app as a code.
import type { LightMyRequestResponse } from 'fastify';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteRequest, startTestApp, tokenRequest, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { actionOf, Browser, pkce, redirectParams, transactionOf } from '../support/smart-browser.js';

const REDIRECT = 'https://app.example/callback';
const AUD = 'http://cinder.test/fhir/R4';
const CALLBACK = 'http://cinder.test/oauth2/authorize/callback';

describe.each(testDatabases())('sign-in through the identity provider on $name', (database) => {
  let t: TestApp;
  let idp: MockIdp;
  let profile: string;
  let externalProfile: string;

  beforeAll(async () => {
    idp = await startMockIdp();
    idp.clientSecret = 'upstream-secret-0123456789';
    t = await startTestApp(database, { allowedOutboundHosts: ['127.0.0.1'] });
    const p = await t.newProject('Provider Clinic');
    const put = async (id: string, extra: Record<string, unknown>) => {
      const res = await t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/${id}`,
        token: p.adminToken,
        payload: {
          resourceType: 'ClientApplication',
          id,
          name: `App ${id}`,
          redirectUri: REDIRECT,
          ...extra,
        },
      });
      expect(res.statusCode, res.body).toBeLessThan(300);
    };
    const provider = {
      authorizeUrl: idp.authorizeUrl,
      tokenUrl: idp.tokenUrl,
      userInfoUrl: idp.userInfoUrl,
      clientId: idp.clientId,
    };
    await put('idp-app', { identityProvider: { ...provider, clientSecret: idp.clientSecret } });
    await put('idp-sub-app', {
      identityProvider: { ...provider, useSubject: true, clientSecret: idp.clientSecret },
    });
    await put('idp-wrong-secret', { identityProvider: { ...provider, clientSecret: 'not-the-secret-0000' } });
    await put('plain-app', {});
    const invite = async (body: Record<string, unknown>) => {
      const res = await inviteRequest(t, p.adminToken, p.projectId, body);
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { profile: { reference: string } }).profile.reference;
    };
    profile = await invite({
      resourceType: 'Practitioner',
      firstName: 'Ida',
      lastName: 'P',
      email: 'ida@idp.example',
    });
    externalProfile = await invite({
      resourceType: 'Practitioner',
      firstName: 'Ext',
      lastName: 'Ernal',
      email: 'ext@idp.example',
      externalId: 'idp-subject-42',
    });
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  /** Opens the authorize URL of `clientId`, presses the provider button; answers the redirect to the provider. */
  const toProvider = async (clientId: string, browser = new Browser(t.app)) => {
    const p = pkce();
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: REDIRECT,
      scope: 'openid fhirUser user/*.rs',
      state: 'app-state',
      aud: AUD,
      code_challenge: p.challenge,
      code_challenge_method: 'S256',
    });
    const page = await browser.get(`/oauth2/authorize?${q.toString()}`);
    expect(page.statusCode, page.body).toBe(200);
    const pressed = await browser.post(actionOf(page), { transaction: transactionOf(page), provider: '1' });
    return { page, pressed, browser, verifier: p.verifier };
  };
  /** What the provider does in the browser: its /authorize answers a redirect back to Cinder's callback. */
  const providerRedirect = async (location: string): Promise<URL> => {
    const res = await fetch(location, { redirect: 'manual' });
    expect(res.status).toBe(302);
    return new URL(res.headers.get('location') as string);
  };
  const callback = (browser: Browser, back: URL): Promise<LightMyRequestResponse> =>
    browser.get(`${back.pathname}${back.search}`);

  it('shows the button only for an application with an identity provider', async () => {
    const { page } = await toProvider('idp-app');
    expect(page.body).toContain(`Sign in with ${new URL(idp.authorizeUrl).host}`);
    const plain = await toProvider('plain-app');
    expect(plain.page.body).not.toContain('Sign in with');
    // Pressing it anyway shows a page; nothing is redirected.
    expect(plain.pressed.statusCode).toBe(400);
  });

  it('signs a user in by email and gives the app a code for them', async () => {
    idp.signInAs = { sub: 'someone', email: 'ida@idp.example', email_verified: true };
    const { pressed, browser, verifier } = await toProvider('idp-app');
    expect(pressed.statusCode).toBe(303);
    const upstream = new URL(pressed.headers.location as string);
    expect(`${upstream.origin}${upstream.pathname}`).toBe(idp.authorizeUrl);
    expect(upstream.searchParams.get('redirect_uri')).toBe(CALLBACK);
    expect(upstream.searchParams.get('code_challenge_method')).toBe('S256');
    expect(upstream.searchParams.get('client_id')).toBe(idp.clientId);
    const back = await providerRedirect(upstream.toString());
    expect(back.pathname).toBe('/oauth2/authorize/callback');
    const done = await callback(browser, back);
    expect(done.statusCode, done.body).toBe(303);
    const params = redirectParams(done);
    expect(params.get('state')).toBe('app-state');
    // Cinder redeemed the provider's code with its stored secret and the PKCE verifier.
    const sent = idp.tokenRequests.at(-1) as Record<string, string>;
    expect(sent).toMatchObject({ grant_type: 'authorization_code', client_secret: idp.clientSecret });
    expect(sent.code_verifier).toBeTruthy();
    const token = await tokenRequest(t.app, {
      grant_type: 'authorization_code',
      code: params.get('code') as string,
      code_verifier: verifier,
      client_id: 'idp-app',
      redirect_uri: REDIRECT,
    });
    expect(token.statusCode, token.body).toBe(200);
    expect(decodeJwt(token.json().id_token as string).fhirUser).toBe(profile);
    // The callback is used up: replaying it reaches nothing.
    const replay = await callback(browser, back);
    expect(replay.statusCode).toBe(400);
    expect(replay.headers.location).toBeUndefined();
  });

  it('finds the user by sub as externalId with useSubject', async () => {
    idp.signInAs = { sub: 'idp-subject-42' };
    const { pressed, browser, verifier } = await toProvider('idp-sub-app');
    const done = await callback(browser, await providerRedirect(pressed.headers.location as string));
    const code = redirectParams(done).get('code') as string;
    const token = await tokenRequest(t.app, {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: 'idp-sub-app',
      redirect_uri: REDIRECT,
    });
    expect(decodeJwt(token.json().id_token as string).fhirUser).toBe(externalProfile);
  });

  it('answers a callback from another browser or with an unknown state with a page, never a redirect', async () => {
    idp.signInAs = { email: 'ida@idp.example' };
    const { pressed } = await toProvider('idp-app');
    const back = await providerRedirect(pressed.headers.location as string);
    const elsewhere = await callback(new Browser(t.app), back);
    expect(elsewhere.statusCode).toBe(400);
    expect(elsewhere.headers.location).toBeUndefined();
    const forged = new URL(back);
    forged.searchParams.set('state', 'not-a-state');
    expect((await callback(new Browser(t.app), forged)).statusCode).toBe(400);
  });

  it.each([
    ['the provider refuses the sign-in', 'idp-app', undefined],
    ['no member has the email', 'idp-app', { email: 'stranger@idp.example' }],
    ['the provider refuses the client secret', 'idp-wrong-secret', { email: 'ida@idp.example' }],
  ])('sends access_denied back to the app when %s', async (_why, clientId, who) => {
    idp.signInAs = who;
    const { pressed, browser } = await toProvider(clientId);
    const done = await callback(browser, await providerRedirect(pressed.headers.location as string));
    expect(done.statusCode).toBe(303);
    const params = redirectParams(done);
    expect(params.get('error')).toBe('access_denied');
    expect(params.get('state')).toBe('app-state');
    expect(params.get('code')).toBeNull();
  });
});
