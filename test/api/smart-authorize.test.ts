// SMART App Launch standalone launch through HTTP (https://hl7.org/fhir/smart-app-launch/app-launch.html): the
// authorize URL, the sign-in and chooser pages, the redirect with a code, the code exchange, scopes on FHIR calls,
// and the errors RFC 6749 §4.1.2.1 shows to the user or sends back to the client.
import type { LightMyRequestResponse } from 'fastify';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteRequest, setUserPassword, startTestApp, tokenRequest, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import {
  actionOf,
  Browser,
  optionsOf,
  pkce,
  redirectParams,
  transactionOf,
} from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://app.example/callback?tab=1';
const AUD = 'http://cinder.test/fhir/R4';

describe.each(testDatabases())('SMART authorize endpoint on $name', (database) => {
  let t: TestApp;
  let projectToken: string;
  const people: Record<string, { userId: string; membership: Record<string, unknown>; profile: string }> = {};

  const put = async (resource: Record<string, unknown>) => {
    const type = resource.resourceType as string;
    const res = await t.request({
      method: 'PUT',
      url: `${t.fhir}/${type}/${resource.id as string}`,
      token: t.adminToken,
      payload: resource,
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
  };
  const invite = async (key: string, body: Record<string, unknown>) => {
    const res = await inviteRequest(t, projectToken, projectId, body);
    expect(res.statusCode, res.body).toBe(200);
    const membership = res.json() as { user: { reference: string }; profile: { reference: string } };
    const userId = membership.user.reference.split('/')[1] as string;
    people[key] = { userId, membership, profile: membership.profile.reference };
    return userId;
  };
  let projectId: string;

  beforeAll(async () => {
    t = await startTestApp(database);
    const p = await t.newProject('Smart Clinic');
    projectId = p.projectId;
    projectToken = p.adminToken;
    const client = (id: string, extra: Record<string, unknown>) =>
      put({ resourceType: 'ClientApplication', id, meta: { project: projectId }, ...extra });
    await client('smart-app', { name: 'Growth <Chart> & "Co"', redirectUri: REDIRECT });
    await client('smart-conf', {
      name: 'Confidential',
      secret: 'conf-secret-0123456789',
      redirectUris: ['https://a.example/cb', 'https://b.example/cb'],
    });
    await client('smart-off', { name: 'Off', status: 'off', redirectUri: REDIRECT });
    const setPassword = (userId: string) => setUserPassword(t, userId, PASSWORD);
    const person = (resourceType: string, firstName: string, email: string) => ({
      resourceType,
      firstName,
      lastName: 'Test',
      email,
    });
    await setPassword(await invite('doc', person('Practitioner', 'Dora', 'doc@smart.example')));
    await setPassword(await invite('pat', person('Patient', 'Pat', 'pat@smart.example')));
    await setPassword(await invite('dual', person('Practitioner', 'Dual', 'dual@smart.example')));
    await invite('dualPatient', person('Patient', 'Dual', 'dual@smart.example'));
    await setPassword(await invite('locked', person('Practitioner', 'Lock', 'locked@smart.example')));
    await setPassword(await invite('gone', person('Practitioner', 'Gone', 'gone@smart.example')));
    const gone = people.gone?.membership as Record<string, unknown>;
    const off = await t.request({
      method: 'PUT',
      url: `${t.fhir}/ProjectMembership/${gone.id as string}`,
      token: projectToken,
      payload: { ...gone, active: false },
    });
    expect(off.statusCode, off.body).toBe(200);
  });
  afterAll(async () => t?.close());

  const authorizeUrl = (params: Record<string, string | undefined>) => {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined) q.append(k, v);
    return `/oauth2/authorize?${q.toString()}`;
  };
  const request = (challenge: string, extra: Record<string, string | undefined> = {}) => ({
    response_type: 'code',
    client_id: 'smart-app',
    redirect_uri: REDIRECT,
    scope: 'openid fhirUser user/*.rs',
    state: 'st-123',
    aud: AUD,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...extra,
  });

  /** Opens the authorize URL and signs in; answers the final response (a redirect, or a page) and the verifier. */
  const signIn = async (
    email: string,
    extra: Record<string, string | undefined> = {},
    browser = new Browser(t.app),
  ) => {
    const p = pkce();
    const page = await browser.get(authorizeUrl(request(p.challenge, extra)));
    expect(page.statusCode, page.body).toBe(200);
    const res = await browser.post(actionOf(page), {
      transaction: transactionOf(page),
      email,
      password: PASSWORD,
    });
    return { res, verifier: p.verifier, browser };
  };
  const exchange = (
    code: string,
    verifier: string,
    extra: Record<string, string> = {},
    headers: Record<string, string> = {},
  ) =>
    tokenRequest(
      t.app,
      {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        client_id: 'smart-app',
        redirect_uri: REDIRECT,
        ...extra,
      },
      headers,
    );
  const launch = async (email: string, extra: Record<string, string | undefined> = {}) => {
    const { res, verifier } = await signIn(email, extra);
    expect(res.statusCode, res.body).toBe(303);
    const params = redirectParams(res);
    expect(params.get('state')).toBe(extra.state ?? 'st-123');
    const token = await exchange(params.get('code') as string, verifier);
    expect(token.statusCode, token.body).toBe(200);
    return token.json() as Record<string, string>;
  };
  const fhirGet = (token: string, path: string) =>
    t.request({ method: 'GET', url: `${t.fhir}/${path}`, token });

  it('signs a practitioner in with PKCE and grants the user scopes asked for', async () => {
    const body = await launch('doc@smart.example');
    expect(body.scope).toBe('openid fhirUser user/*.rs');
    expect(body.refresh_token).toBeUndefined();
    expect(body.patient).toBeUndefined();
    expect(decodeJwt(body.id_token as string)).toMatchObject({
      fhirUser: people.doc?.profile,
      aud: 'smart-app',
    });
    expect((await fhirGet(body.access_token as string, people.pat?.profile as string)).statusCode).toBe(200);
    // user/*.rs cannot write.
    const write = await t.request({
      method: 'POST',
      url: `${t.fhir}/Patient`,
      token: body.access_token,
      payload: { resourceType: 'Patient' },
    });
    expect(write.statusCode).toBe(403);
    expect(write.json().issue[0]).toMatchObject({
      code: 'forbidden',
      details: { text: expect.stringMatching(/scope/) },
    });
  });

  it('gives a Patient user the patient in context, an ID Token and a refresh token', async () => {
    const body = await launch('pat@smart.example', {
      scope: 'openid fhirUser launch/patient patient/*.rs offline_access',
    });
    const patientId = people.pat?.profile.split('/')[1];
    expect(body).toMatchObject({
      scope: 'openid fhirUser launch/patient patient/*.rs offline_access',
      patient: patientId,
    });
    expect(decodeJwt(body.id_token as string).fhirUser).toBe(people.pat?.profile);
    expect((await fhirGet(body.access_token as string, `Patient/${patientId}`)).statusCode).toBe(200);
    const refreshed = await tokenRequest(t.app, {
      grant_type: 'refresh_token',
      refresh_token: body.refresh_token as string,
      client_id: 'smart-app',
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(refreshed.json()).toMatchObject({ patient: patientId, scope: body.scope });
    expect(refreshed.json().refresh_token).not.toBe(body.refresh_token);
  });

  it('enforces patient/Observation.rs on FHIR calls', async () => {
    const body = await launch('pat@smart.example', { scope: 'launch/patient patient/Observation.rs' });
    expect(body.id_token).toBeUndefined();
    expect((await fhirGet(body.access_token as string, people.doc?.profile as string)).statusCode).toBe(403);
    expect((await fhirGet(body.access_token as string, 'Observation')).statusCode).toBe(200);
  });

  it('lists several memberships on a chooser page and signs in as the one chosen', async () => {
    const { res, verifier, browser } = await signIn('dual@smart.example');
    expect(res.statusCode).toBe(200);
    const options = optionsOf(res);
    expect(options.map((o) => o.label).sort()).toEqual([
      'Smart Clinic — Patient Dual Test',
      'Smart Clinic — Practitioner Dual Test',
    ]);
    const chosen = options.find((o) => o.label.includes('Patient')) as { id: string };
    const done = await browser.post(actionOf(res), {
      transaction: transactionOf(res),
      membership: chosen.id,
    });
    expect(done.statusCode).toBe(303);
    const token = await exchange(redirectParams(done).get('code') as string, verifier);
    expect(token.json().profile.reference).toBe(people.dualPatient?.profile);
  });

  it('shows errors about the client or redirect URI on a page and never redirects', async () => {
    const { challenge } = pkce();
    const cases: Record<string, string | undefined>[] = [
      { client_id: undefined },
      { client_id: 'no-such-app' },
      { client_id: 'smart-off' },
      { redirect_uri: 'https://evil.example/callback' },
      { redirect_uri: 'https://app.example/callback' }, // prefix of the registered one: not equal
      { client_id: 'smart-conf', redirect_uri: undefined }, // two registered: redirect_uri is required
    ];
    for (const extra of cases) {
      const res = await new Browser(t.app).get(authorizeUrl(request(challenge, extra)));
      expect(res.statusCode, JSON.stringify(extra)).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.headers['content-type']).toMatch(/^text\/html/);
    }
    const twice = await new Browser(t.app).get(`${authorizeUrl(request(challenge))}&client_id=smart-app`);
    expect(twice.statusCode).toBe(400);
  });

  it('sends request errors back to the redirect URI with the state', async () => {
    const { challenge } = pkce();
    const cases: [Record<string, string | undefined>, string][] = [
      [{ response_type: undefined }, 'invalid_request'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
      [{ code_challenge: undefined }, 'invalid_request'],
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge: 'short' }, 'invalid_request'],
      [{ aud: 'https://other.example/fhir' }, 'invalid_request'],
      [{ aud: undefined }, 'invalid_request'],
      [{ scope: undefined }, 'invalid_scope'],
    ];
    for (const [extra, error] of cases) {
      const res = await new Browser(t.app).get(authorizeUrl(request(challenge, extra)));
      expect(res.statusCode, JSON.stringify(extra)).toBe(302);
      const params = redirectParams(res);
      expect(res.headers.location?.startsWith('https://app.example/callback?tab=1&')).toBe(true);
      expect([params.get('error'), params.get('state')]).toEqual([error, 'st-123']);
      expect(params.get('error_description')).toBeTruthy();
    }
    const noState = await new Browser(t.app).get(authorizeUrl(request(challenge, { state: undefined })));
    expect(redirectParams(noState).get('error')).toBe('invalid_request');
    expect(redirectParams(noState).has('state')).toBe(false);
  });

  it('accepts aud with a trailing slash and an omitted redirect_uri when one is registered', async () => {
    const { res, verifier } = await signIn('doc@smart.example', { aud: `${AUD}/`, redirect_uri: undefined });
    expect(res.headers.location?.startsWith(REDIRECT)).toBe(true);
    const token = await exchange(redirectParams(res).get('code') as string, verifier, { redirect_uri: '' });
    expect(token.statusCode, token.body).toBe(200);
  });

  it('shows the sign-in page again after a wrong password, escaping what it echoes', async () => {
    const browser = new Browser(t.app);
    const page = await browser.get(authorizeUrl(request(pkce().challenge)));
    expect(page.body).toContain('Growth &#60;Chart&#62; &#38; &#34;Co&#34;');
    expect(page.body).toMatch(/<label for="email">/);
    for (const email of ['doc@smart.example', '"><script>x</script>@smart.example']) {
      const res = await browser.post(actionOf(page), {
        transaction: transactionOf(page),
        email,
        password: 'wrong password',
      });
      expect(res.statusCode).toBe(400);
      expect(res.body).toContain('Email or password is invalid.');
      expect(res.body).not.toContain('<script>x');
      expect(res.headers.location).toBeUndefined();
    }
    const ok = await browser.post(actionOf(page), {
      transaction: transactionOf(page),
      email: 'doc@smart.example',
      password: PASSWORD,
    });
    expect(ok.statusCode).toBe(303);
  });

  it('applies the login lockout of POST /auth/login to the sign-in form', async () => {
    const browser = new Browser(t.app);
    const page = await browser.get(authorizeUrl(request(pkce().challenge)));
    const form = (password: string) => ({
      transaction: transactionOf(page),
      email: 'locked@smart.example',
      password,
    });
    for (let i = 0; i < 10; i++)
      expect((await browser.post('/oauth2/authorize', form('wrong'))).statusCode).toBe(400);
    const locked = await browser.post('/oauth2/authorize', form(PASSWORD));
    expect(locked.statusCode).toBe(429);
    expect(locked.body).toContain('Too many failed attempts');
    expect(locked.headers.location).toBeUndefined();
  });

  it('guards the form: the cookie of the browser that opened it is needed, and it is used once', async () => {
    const browser = new Browser(t.app);
    const page = await browser.get(authorizeUrl(request(pkce().challenge)));
    const form = { transaction: transactionOf(page), email: 'doc@smart.example', password: PASSWORD };
    const stranger = new Browser(t.app);
    await stranger.get(authorizeUrl(request(pkce().challenge)));
    for (const b of [new Browser(t.app), stranger]) {
      const res = await b.post('/oauth2/authorize', form);
      expect(res.statusCode).toBe(400);
      expect(res.headers.location).toBeUndefined();
    }
    // The stranger's own cookie, renamed to this transaction's cookie, binds nothing either.
    const [name] = [...browser.cookies.keys()] as [string];
    const planted = new Browser(t.app);
    planted.cookies.set(name, [...stranger.cookies.values()][0] as string);
    expect((await planted.post('/oauth2/authorize', form)).statusCode).toBe(400);
    // A second tab in the same browser does not undo the first.
    await browser.get(authorizeUrl(request(pkce().challenge)));
    expect((await browser.post('/oauth2/authorize', form)).statusCode).toBe(303);
    expect((await browser.post('/oauth2/authorize', form)).statusCode).toBe(400);
  });

  it('redirects access_denied for a deactivated membership and for Cancel, invalid_scope for patient scopes without a patient', async () => {
    const gone = await signIn('gone@smart.example');
    expect(redirectParams(gone.res).get('error')).toBe('access_denied');
    const browser = new Browser(t.app);
    const page = await browser.get(authorizeUrl(request(pkce().challenge)));
    const cancel = await browser.post('/oauth2/authorize', { transaction: transactionOf(page), cancel: '1' });
    expect([redirectParams(cancel).get('error'), redirectParams(cancel).get('state')]).toEqual([
      'access_denied',
      'st-123',
    ]);
    // Without launch/patient (which shows the patient picker, smart-ehr-launch.test.ts) there is no patient.
    const doc = await signIn('doc@smart.example', { scope: 'patient/*.rs' });
    expect(redirectParams(doc.res).get('error')).toBe('invalid_scope');
  });

  it('refuses a wrong verifier, another redirect_uri, a missing client_id and a code used twice', async () => {
    const codeOf = async () => {
      const { res, verifier } = await signIn('doc@smart.example');
      return { code: redirectParams(res).get('code') as string, verifier };
    };
    const refused = async (res: LightMyRequestResponse, error: string) => {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toBe(error);
    };
    const a = await codeOf();
    await refused(await exchange(a.code, pkce().verifier), 'invalid_grant');
    const b = await codeOf();
    await refused(
      await exchange(b.code, b.verifier, { redirect_uri: 'https://app.example/other' }),
      'invalid_grant',
    );
    const c = await codeOf();
    await refused(await exchange(c.code, c.verifier, { client_id: '' }), 'invalid_request');
    const d = await codeOf();
    const first = await exchange(d.code, d.verifier);
    expect(first.statusCode).toBe(200);
    await refused(await exchange(d.code, d.verifier), 'invalid_grant');
    // The replay ended the login of the first exchange (RFC 6749 §4.1.2).
    expect((await fhirGet(first.json().access_token, 'Patient')).statusCode).toBe(401);
  });

  it('lets a confidential client authenticate with its secret, and refuses a wrong one', async () => {
    const extra = { client_id: 'smart-conf', redirect_uri: 'https://b.example/cb' };
    const basic = (secret: string) => ({
      authorization: `Basic ${Buffer.from(`smart-conf:${secret}`).toString('base64')}`,
    });
    const ok = await signIn('doc@smart.example', extra);
    const good = await exchange(
      redirectParams(ok.res).get('code') as string,
      ok.verifier,
      { redirect_uri: extra.redirect_uri, client_id: '' },
      basic('conf-secret-0123456789'),
    );
    expect(good.statusCode, good.body).toBe(200);
    const bad = await signIn('doc@smart.example', extra);
    const wrong = await exchange(redirectParams(bad.res).get('code') as string, bad.verifier, {
      ...extra,
      client_secret: 'nope',
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().error).toBe('invalid_client');
  });

  it('names the endpoint in both discovery documents', async () => {
    for (const url of [
      '/.well-known/openid-configuration',
      '/.well-known/smart-configuration',
      '/fhir/R4/.well-known/smart-configuration',
    ]) {
      const doc = (await t.app.inject({ method: 'GET', url })).json();
      expect(doc.authorization_endpoint).toBe('http://cinder.test/oauth2/authorize');
      expect(doc.code_challenge_methods_supported).toEqual(['S256']);
      expect(doc.scopes_supported).toEqual(
        expect.arrayContaining(['launch/patient', 'user/*.rs', 'patient/*.rs']),
      );
    }
    const smart = (await t.app.inject({ method: 'GET', url: '/.well-known/smart-configuration' })).json();
    expect(smart.capabilities).toEqual(
      expect.arrayContaining([
        'launch-standalone',
        'client-public',
        'context-standalone-patient',
        'sso-openid-connect',
        'permission-offline',
        'permission-patient',
      ]),
    );
  });
});
