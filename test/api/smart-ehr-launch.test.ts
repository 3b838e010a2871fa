// SMART EHR launch and the standalone patient picker (API.md §11, https://hl7.org/fhir/smart-app-launch/app-launch.html):
// who may call ClientApplication/<id>/$launch, the launch at the authorize endpoint (single use, five minutes, one
// client), the patient, encounter and fhirContext in the token response, patient/ scopes held to that patient, and the
// picker.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  created,
  inviteRequest,
  scopedClientToken,
  setUserPassword,
  startTestApp,
  tokenRequest,
  type TestApp,
} from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { actionOf, Browser, pkce, redirectParams, transactionOf } from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://ehr-app.example/callback';
const LAUNCH_URI = 'https://ehr-app.example/launch?x=1';
const AUD = 'http://cinder.test/fhir/R4';

describe.each(testDatabases())('SMART EHR launch on $name', (database) => {
  let t: TestApp;
  let projectId: string;
  let admin: string;
  let member: string;
  let otherAdmin: string;
  let otherPatient: string;
  let otherObservation: string;
  const tokens: Record<string, string> = {};
  const ids: Record<string, string> = {};

  const passwordToken = async (email: string): Promise<string> => {
    const p = pkce();
    const res = await t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({
        email,
        password: PASSWORD,
        codeChallenge: p.challenge,
        codeChallengeMethod: 'S256',
      }),
    });
    expect(res.statusCode, res.body).toBe(200);
    const tok = await tokenRequest(t.app, {
      grant_type: 'authorization_code',
      code: res.json().code as string,
      code_verifier: p.verifier,
    });
    expect(tok.statusCode, tok.body).toBe(200);
    return tok.json().access_token as string;
  };
  const invite = async (resourceType: string, firstName: string, lastName: string, email: string) => {
    const res = await inviteRequest(t, admin, projectId, { resourceType, firstName, lastName, email });
    expect(res.statusCode, res.body).toBe(200);
    const m = res.json() as { user: { reference: string }; profile: { reference: string } };
    await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
    return m.profile.reference.split('/')[1] as string;
  };

  beforeAll(async () => {
    t = await startTestApp(database);
    const p = await t.newProject('EHR Clinic');
    ({ projectId, adminToken: admin, memberToken: member } = p);
    const q = await t.newProject('Other Clinic');
    otherAdmin = q.adminToken;
    otherPatient = (await created(t, otherAdmin, { resourceType: 'Patient', name: [{ family: 'Zed' }] }))
      .id as string;
    otherObservation = (
      await created(t, otherAdmin, { resourceType: 'Observation', status: 'final', code: { text: 'theirs' } })
    ).id as string;
    const client = (id: string, extra: Record<string, unknown>) =>
      t.request({
        method: 'PUT',
        url: `${t.fhir}/ClientApplication/${id}`,
        token: admin,
        payload: { resourceType: 'ClientApplication', id, name: id, redirectUri: REDIRECT, ...extra },
      });
    for (const [id, extra] of [
      ['ehr-app', { launchUri: LAUNCH_URI }],
      ['ehr-other', { launchUri: LAUNCH_URI }],
      ['ehr-nolaunch', {}],
    ] as const) {
      const res = await client(id, extra);
      expect(res.statusCode, res.body).toBeLessThan(300);
    }
    ids.doc = await invite('Practitioner', 'Dora', 'Doc', 'doc@ehr.example');
    ids.doc2 = await invite('Practitioner', 'Otto', 'Doc', 'doc2@ehr.example');
    ids.pat = await invite('Patient', 'Paula', 'Own', 'pat@ehr.example');
    tokens.doc = await passwordToken('doc@ehr.example');
    tokens.pat = await passwordToken('pat@ehr.example');
    ids.alice = (
      await created(t, admin, { resourceType: 'Patient', name: [{ family: 'Alpha', given: ['Alice'] }] })
    ).id as string;
    ids.zed = (
      await created(t, admin, { resourceType: 'Patient', name: [{ family: 'Zed', given: ['Zoe'] }] })
    ).id as string;
    ids.enc = (
      await created(t, admin, {
        resourceType: 'Encounter',
        status: 'finished',
        class: { code: 'AMB' },
        subject: { reference: `Patient/${ids.alice}` },
      })
    ).id as string;
    for (const who of ['alice', 'zed']) {
      ids[`obs-${who}`] = (
        await created(t, admin, {
          resourceType: 'Observation',
          status: 'final',
          code: { text: `obs of ${who}` },
          subject: { reference: `Patient/${ids[who] as string}` },
        })
      ).id as string;
    }
    ids.report = (
      await created(t, admin, {
        resourceType: 'DiagnosticReport',
        status: 'final',
        code: { text: 'panel' },
        subject: { reference: `Patient/${ids.alice as string}` },
      })
    ).id as string;
  });
  afterAll(async () => t?.close());

  const startLaunch = (token: string, params: unknown[], client = 'ehr-app') =>
    t.request({
      method: 'POST',
      url: `${t.fhir}/ClientApplication/${client}/$launch`,
      token,
      payload: { resourceType: 'Parameters', parameter: params },
    });
  const patientParam = (id: string) => ({ name: 'patient', valueReference: { reference: `Patient/${id}` } });
  const launchOf = async (token: string, params: unknown[], client = 'ehr-app') => {
    const res = await startLaunch(token, params, client);
    expect(res.statusCode, res.body).toBe(200);
    const out = res.json() as { parameter: { name: string; valueString?: string; valueUrl?: string }[] };
    const launch = out.parameter.find((x) => x.name === 'launch')?.valueString as string;
    const url = out.parameter.find((x) => x.name === 'launch-url')?.valueUrl as string;
    return { launch, url };
  };
  const issue = (res: { statusCode: number; json(): { issue: { code: string }[] } }) =>
    res.json().issue[0]?.code;

  const authorize = (challenge: string, extra: Record<string, string>, client = 'ehr-app') =>
    `/oauth2/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: client,
      redirect_uri: REDIRECT,
      scope: 'launch openid fhirUser patient/*.rs',
      state: 'st-ehr',
      aud: AUD,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      ...extra,
    }).toString()}`;
  /** Opens the authorize URL (answers the page and the browser), ready to sign in. */
  const open = async (extra: Record<string, string>, client = 'ehr-app') => {
    const p = pkce();
    const browser = new Browser(t.app);
    const page = await browser.get(authorize(p.challenge, extra, client));
    return { page, browser, verifier: p.verifier };
  };
  const signIn = (o: Awaited<ReturnType<typeof open>>, email = 'doc@ehr.example') =>
    o.browser.post(actionOf(o.page), { transaction: transactionOf(o.page), email, password: PASSWORD });
  const exchange = async (code: string, verifier: string, client = 'ehr-app') => {
    const res = await tokenRequest(t.app, {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      client_id: client,
      redirect_uri: REDIRECT,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Record<string, string>;
  };
  const get = (token: string, path: string) => t.request({ method: 'GET', url: `${t.fhir}/${path}`, token });
  const observedPatients = async (token: string) => {
    const res = await get(token, 'Observation');
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().entry ?? []).map(
      (e: { resource: { subject: { reference: string } } }) => e.resource.subject.reference,
    );
  };

  it('lets a project admin and a Practitioner start a launch, with iss and launch on the launchUri', async () => {
    for (const token of [admin, tokens.doc as string]) {
      const { launch, url } = await launchOf(token, [patientParam(ids.alice as string)]);
      expect(launch).toMatch(/^[A-Za-z0-9_-]{32,}$/);
      const u = new URL(url);
      expect(`${u.origin}${u.pathname}`).toBe('https://ehr-app.example/launch');
      expect(u.searchParams.get('x')).toBe('1');
      expect(u.searchParams.get('iss')).toBe(AUD);
      expect(u.searchParams.get('launch')).toBe(launch);
    }
    const again = await launchOf(admin, [patientParam(ids.alice as string)]);
    const first = await launchOf(admin, [patientParam(ids.alice as string)]);
    expect(again.launch).not.toBe(first.launch);
  });

  it('refuses a Patient user, a member client and a narrowly scoped token (403), another project (404)', async () => {
    const params = [patientParam(ids.alice as string)];
    for (const token of [tokens.pat as string, member]) {
      const res = await startLaunch(token, params);
      expect(res.statusCode, res.body).toBe(403);
      expect(issue(res)).toBe('forbidden');
    }
    const narrow = await scopedClientToken(t, admin, projectId, 'system/Observation.rs', { admin: true });
    const scoped = await startLaunch(narrow, params);
    expect(scoped.statusCode, scoped.body).toBe(403);
    expect(scoped.json().issue[0].details.text).toMatch(/scope/);
    const other = await startLaunch(otherAdmin, params);
    expect(other.statusCode, other.body).toBe(404);
    expect(issue(other)).toBe('not-found');
    // Nor can this project launch with the other project's patient.
    const foreign = await startLaunch(admin, [patientParam(otherPatient)]);
    expect(foreign.statusCode, foreign.body).toBe(404);
    const nobody = await startLaunch(admin, [patientParam('no-such-patient')]);
    expect(nobody.statusCode, nobody.body).toBe(404);
  });

  it('answers 400 with an OperationOutcome for missing, malformed, huge and deep input', async () => {
    const bad = async (res: Awaited<ReturnType<typeof startLaunch>>) => {
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    };
    await bad(await startLaunch(admin, []));
    await bad(await startLaunch(admin, [{ name: 'patient', valueString: `Patient/${ids.alice as string}` }]));
    await bad(
      await startLaunch(admin, [{ name: 'patient', valueReference: { reference: `Observation/x` } }]),
    );
    await bad(await startLaunch(admin, [patientParam(ids.alice as string), patientParam(ids.zed as string)]));
    await bad(
      await startLaunch(admin, [
        { name: 'patient', valueReference: { reference: `Patient/${'x'.repeat(100_000)}` } },
      ]),
    );
    await bad(
      await startLaunch(admin, [
        patientParam(ids.zed as string),
        { name: 'encounter', valueReference: { reference: `Encounter/${ids.enc as string}` } },
      ]),
    );
    await bad(await startLaunch(admin, [patientParam(ids.alice as string)], 'ehr-nolaunch'));
    const notParameters = await t.request({
      method: 'POST',
      url: `${t.fhir}/ClientApplication/ehr-app/$launch`,
      token: admin,
      payload: { resourceType: 'Patient' },
    });
    await bad(notParameters);
    const deep = await t.request({
      method: 'POST',
      url: `${t.fhir}/ClientApplication/ehr-app/$launch`,
      token: admin,
      headers: { 'content-type': 'application/fhir+json' },
      payload: `{"resourceType":"Parameters","parameter":[{"name":"patient","part":${'['.repeat(5000)}${']'.repeat(5000)}}]}`,
    });
    expect(deep.statusCode, deep.body).toBeGreaterThanOrEqual(400);
    expect(deep.statusCode).toBeLessThan(500);
    expect(deep.json().resourceType).toBe('OperationOutcome');
  });

  it('gives the app the launched patient and encounter; patient/ scopes reach only that patient', async () => {
    const { launch } = await launchOf(tokens.doc as string, [
      patientParam(ids.alice as string),
      { name: 'encounter', valueReference: { reference: `${AUD}/Encounter/${ids.enc as string}` } },
    ]);
    const o = await open({ launch, scope: 'launch openid fhirUser patient/*.rs offline_access' });
    expect(o.page.statusCode, o.page.body).toBe(200);
    const signed = await signIn(o);
    expect(signed.statusCode, signed.body).toBe(303);
    const body = await exchange(redirectParams(signed).get('code') as string, o.verifier);
    expect(body).toMatchObject({
      patient: ids.alice,
      encounter: ids.enc,
      scope: 'launch openid fhirUser patient/*.rs offline_access',
    });
    expect((await get(body.access_token as string, `Patient/${ids.alice as string}`)).statusCode).toBe(200);
    expect((await get(body.access_token as string, `Patient/${ids.zed as string}`)).statusCode).toBe(404);
    expect(await observedPatients(body.access_token as string)).toEqual([`Patient/${ids.alice as string}`]);
    // Practitioner is not a type of the Patient compartment: patient/ scopes do not reach it.
    expect((await get(body.access_token as string, `Practitioner/${ids.doc as string}`)).statusCode).toBe(
      403,
    );
    // A refreshed token keeps the context.
    const refreshed = await tokenRequest(t.app, {
      grant_type: 'refresh_token',
      refresh_token: body.refresh_token as string,
      client_id: 'ehr-app',
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(refreshed.json()).toMatchObject({ patient: ids.alice, encounter: ids.enc });
    expect(await observedPatients(refreshed.json().access_token as string)).toEqual([
      `Patient/${ids.alice as string}`,
    ]);
  });

  const contextParam = (reference: string) => ({ name: 'fhirContext', valueReference: { reference } });

  it("gives the app the launch's fhirContext, also on refresh, and only with the launch scope", async () => {
    const { launch } = await launchOf(tokens.doc as string, [
      patientParam(ids.alice as string),
      contextParam(`DiagnosticReport/${ids.report as string}`),
      contextParam(`${AUD}/Observation/${ids['obs-alice'] as string}`),
    ]);
    const o = await open({ launch, scope: 'launch openid fhirUser patient/*.rs offline_access' });
    const signed = await signIn(o);
    expect(signed.statusCode, signed.body).toBe(303);
    const body = (await exchange(redirectParams(signed).get('code') as string, o.verifier)) as Record<
      string,
      unknown
    >;
    const expected = [
      { reference: `DiagnosticReport/${ids.report as string}` },
      { reference: `Observation/${ids['obs-alice'] as string}` },
    ];
    expect(body).toMatchObject({ patient: ids.alice, fhirContext: expected });
    expect(body).not.toHaveProperty('encounter');
    // The app can read what it was given.
    const report = await get(body.access_token as string, `DiagnosticReport/${ids.report as string}`);
    expect(report.statusCode, report.body).toBe(200);
    const refreshed = await tokenRequest(t.app, {
      grant_type: 'refresh_token',
      refresh_token: body.refresh_token as string,
      client_id: 'ehr-app',
    });
    expect(refreshed.statusCode, refreshed.body).toBe(200);
    expect(refreshed.json()).toMatchObject({ patient: ids.alice, fhirContext: expected });
    // A refresh narrowed to leave `launch` out leaves the launch context out too.
    const narrowed = await tokenRequest(t.app, {
      grant_type: 'refresh_token',
      refresh_token: refreshed.json().refresh_token as string,
      client_id: 'ehr-app',
      scope: 'openid patient/*.rs',
    });
    expect(narrowed.statusCode, narrowed.body).toBe(200);
    expect(narrowed.json()).not.toHaveProperty('fhirContext');
    // A launch without fhirContext gives none.
    const plain = await launchOf(admin, [patientParam(ids.zed as string)]);
    const o2 = await open({ launch: plain.launch });
    const signed2 = await signIn(o2);
    const body2 = await exchange(redirectParams(signed2).get('code') as string, o2.verifier);
    expect(body2.patient).toBe(ids.zed);
    expect(body2).not.toHaveProperty('fhirContext');
  });

  it("refuses a fhirContext of another project, unknown or deleted (404/410), or outside the token's scopes (403)", async () => {
    const withContext = (token: string, reference: string) =>
      startLaunch(token, [patientParam(ids.alice as string), contextParam(reference)]);
    for (const token of [admin, tokens.doc as string]) {
      const foreign = await withContext(token, `Observation/${otherObservation}`);
      expect(foreign.statusCode, foreign.body).toBe(404);
      expect(issue(foreign)).toBe('not-found');
      expect(foreign.body).not.toContain('theirs');
    }
    // The super administrator reads every project, yet a launch holds only resources of its client's project.
    const superForeign = await withContext(t.adminToken, `Observation/${otherObservation}`);
    expect(superForeign.statusCode, superForeign.body).toBe(404);
    expect((await withContext(t.adminToken, `DiagnosticReport/${ids.report as string}`)).statusCode).toBe(
      200,
    );
    const missing = await withContext(admin, 'Observation/no-such-observation');
    expect(missing.statusCode, missing.body).toBe(404);
    const gone = (await created(t, admin, { resourceType: 'Basic', code: { text: 'gone' } })).id as string;
    expect(
      (await t.request({ method: 'DELETE', url: `${t.fhir}/Basic/${gone}`, token: admin })).statusCode,
    ).toBe(200);
    const deleted = await withContext(admin, `Basic/${gone}`);
    expect(deleted.statusCode, deleted.body).toBe(410);
    // The other project's admin cannot put this project's resource into a launch of its own client either.
    const otherClient = await t.request({
      method: 'PUT',
      url: `${t.fhir}/ClientApplication/other-ehr-app`,
      token: otherAdmin,
      payload: {
        resourceType: 'ClientApplication',
        id: 'other-ehr-app',
        redirectUri: REDIRECT,
        launchUri: LAUNCH_URI,
      },
    });
    expect(otherClient.statusCode, otherClient.body).toBeLessThan(300);
    const stolen = await startLaunch(
      otherAdmin,
      [patientParam(otherPatient), contextParam(`DiagnosticReport/${ids.report as string}`)],
      'other-ehr-app',
    );
    expect(stolen.statusCode, stolen.body).toBe(404);
    // A token that may start a launch but not read DiagnosticReports cannot hand one out.
    const narrow = await scopedClientToken(t, admin, projectId, 'system/Patient.rs system/Observation.rs', {
      admin: true,
    });
    expect((await startLaunch(narrow, [patientParam(ids.alice as string)])).statusCode).toBe(200);
    const allowed = await withContext(narrow, `Observation/${ids['obs-alice'] as string}`);
    expect(allowed.statusCode, allowed.body).toBe(200);
    const scoped = await withContext(narrow, `DiagnosticReport/${ids.report as string}`);
    expect(scoped.statusCode, scoped.body).toBe(403);
    expect(issue(scoped)).toBe('forbidden');
  });

  it('answers 400 for a malformed, repeated, Patient/Encounter, huge or too many fhirContext', async () => {
    const bad = async (params: unknown[]) => {
      const res = await startLaunch(admin, [patientParam(ids.alice as string), ...params]);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
      expect(issue(res)).toBe('invalid');
      return res;
    };
    const obs = `Observation/${ids['obs-alice'] as string}`;
    await bad([{ name: 'fhirContext', valueString: obs }]);
    await bad([{ name: 'fhirContext', valueReference: { identifier: { value: 'x' } } }]);
    await bad([{ name: 'fhirContext', valueReference: 'Observation/1' }]);
    await bad([{ name: 'fhirContext', valueReference: { reference: 42 } }]);
    for (const ref of [
      'Observation',
      'Observation/',
      'NoSuchType/1',
      'ClientApplication/ehr-app',
      'User/x',
      'https://elsewhere.example/fhir/Observation/1',
      'Observation?code=x',
      '#contained',
      `Observation/${'x'.repeat(65)}`,
      `Observation/${'x'.repeat(100_000)}`,
    ])
      await bad([contextParam(ref)]);
    const patient = await bad([contextParam(`Patient/${ids.zed as string}`)]);
    expect(patient.json().issue[0].details.text).toMatch(/patient parameter/);
    await bad([contextParam(`Encounter/${ids.enc as string}`)]);
    await bad([contextParam(obs), contextParam(`${AUD}/${obs}`)]);
    const many = Array.from({ length: 11 }, (_, i) => contextParam(`Observation/o${i}`));
    const tooMany = await bad(many);
    expect(tooMany.json().issue[0].details.text).toMatch(/10/);
    // Ten is the limit, not a refusal: ten that exist are accepted.
    const ten: unknown[] = [contextParam(obs), contextParam(`DiagnosticReport/${ids.report as string}`)];
    for (let i = 0; i < 8; i++)
      ten.push(
        contextParam(
          `Observation/${(await created(t, admin, { resourceType: 'Observation', status: 'final', code: { text: `n${i}` } })).id as string}`,
        ),
      );
    const accepted = await startLaunch(admin, [patientParam(ids.alice as string), ...ten]);
    expect(accepted.statusCode, accepted.body).toBe(200);
    const huge = await t.request({
      method: 'POST',
      url: `${t.fhir}/ClientApplication/ehr-app/$launch`,
      token: admin,
      headers: { 'content-type': 'application/fhir+json' },
      payload: JSON.stringify({
        resourceType: 'Parameters',
        parameter: [
          patientParam(ids.alice as string),
          ...Array.from({ length: 50_000 }, () => contextParam(obs)),
        ],
      }),
    });
    expect(huge.statusCode, huge.body.slice(0, 300)).toBeGreaterThanOrEqual(400);
    expect(huge.statusCode).toBeLessThan(500);
    expect(huge.json().resourceType).toBe('OperationOutcome');
    const deep = await t.request({
      method: 'POST',
      url: `${t.fhir}/ClientApplication/ehr-app/$launch`,
      token: admin,
      headers: { 'content-type': 'application/fhir+json' },
      payload: `{"resourceType":"Parameters","parameter":[{"name":"patient","valueReference":{"reference":"Patient/${ids.alice as string}"}},{"name":"fhirContext","valueReference":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}]}`,
    });
    expect(deep.statusCode, deep.body.slice(0, 300)).toBeGreaterThanOrEqual(400);
    expect(deep.statusCode).toBeLessThan(500);
    expect(deep.json().resourceType).toBe('OperationOutcome');
    // Nothing refused was kept as a launch.
    const stored = await t.db.query<{ n: string | number }>(
      `SELECT count(*) AS n FROM smart_launches WHERE fhir_context::text LIKE '%Encounter/%' OR fhir_context::text LIKE '%Patient/%'`,
    );
    expect(Number(stored.rows[0]?.n)).toBe(0);
  });

  const refusedAtAuthorize = async (extra: Record<string, string>, client = 'ehr-app') => {
    const o = await open(extra, client);
    expect(o.page.statusCode, o.page.body).toBe(302);
    const back = redirectParams(o.page);
    expect([back.get('error'), back.get('state')]).toEqual(['invalid_request', 'st-ehr']);
    return back;
  };

  it("refuses an unknown launch, another client's launch, a launch without the launch scope", async () => {
    await refusedAtAuthorize({ launch: 'not-a-launch' });
    const { launch } = await launchOf(admin, [patientParam(ids.alice as string)]);
    await refusedAtAuthorize({ launch }, 'ehr-other');
    expect(
      (await refusedAtAuthorize({ launch, scope: 'openid patient/*.rs' })).get('error_description'),
    ).toMatch(/launch/);
    // None of these used it up.
    const o = await open({ launch });
    expect(o.page.statusCode).toBe(200);
  });

  it('refuses an expired launch', async () => {
    const { launch } = await launchOf(admin, [patientParam(ids.alice as string)]);
    const o = await open({ launch });
    expect(o.page.statusCode).toBe(200);
    // Five minutes pass (set on the row: the launch's expiry is the server's to keep).
    await t.db.query(`UPDATE smart_launches SET expires_at = now() - interval '1 second'`);
    const signed = await signIn(o);
    expect(redirectParams(signed).get('error')).toBe('invalid_request');
    await refusedAtAuthorize({ launch });
  });

  it('uses a launch once, also when two sign-ins race for it', async () => {
    const { launch } = await launchOf(tokens.doc as string, [patientParam(ids.alice as string)]);
    const a = await open({ launch });
    const b = await open({ launch });
    expect([a.page.statusCode, b.page.statusCode]).toEqual([200, 200]);
    const results = await Promise.all([signIn(a), signIn(b)]);
    const outcomes = results.map((r) =>
      redirectParams(r).get('code') ? 'code' : redirectParams(r).get('error'),
    );
    expect(outcomes.sort()).toEqual(['code', 'invalid_request']);
    await refusedAtAuthorize({ launch });
  });

  it('gives a launch only to the user who started it', async () => {
    const { launch } = await launchOf(tokens.doc as string, [patientParam(ids.alice as string)]);
    const o = await open({ launch });
    const signed = await signIn(o, 'doc2@ehr.example');
    expect(redirectParams(signed).get('error')).toBe('invalid_request');
    // An admin client's launch may be used by any practitioner of the project, not by a Patient for another patient.
    const byAdmin = await launchOf(admin, [patientParam(ids.alice as string)]);
    const asPatient = await signIn(await open({ launch: byAdmin.launch }), 'pat@ehr.example');
    expect(redirectParams(asPatient).get('error')).toBe('invalid_request');
    const fresh = await launchOf(admin, [patientParam(ids.zed as string)]);
    const o2 = await open({ launch: fresh.launch });
    const ok = await signIn(o2, 'doc2@ehr.example');
    const body = await exchange(redirectParams(ok).get('code') as string, o2.verifier);
    expect(body.patient).toBe(ids.zed);
    expect(body.encounter).toBeUndefined();
    expect(body).not.toHaveProperty('fhirContext');
  });

  it('shows a practitioner a patient picker for launch/patient and puts the chosen patient in the token', async () => {
    const o = await open({ scope: 'openid launch/patient patient/*.rs' });
    const picker = await signIn(o);
    expect(picker.statusCode, picker.body).toBe(200);
    expect(picker.body).toContain('Choose a patient');
    expect(picker.body).toContain(`value="${ids.alice as string}"`);
    expect(picker.body).not.toContain(otherPatient);
    const transaction = transactionOf(picker);
    const found = await o.browser.post('/oauth2/authorize', { transaction, search: 'zed' });
    expect(found.statusCode).toBe(200);
    expect(found.body).toContain(`value="${ids.zed as string}"`);
    expect(found.body).not.toContain(`value="${ids.alice as string}"`);
    // Hostile searches: long, markup, wildcards; answered with the page, escaped, never a 5xx.
    for (const search of ['x'.repeat(50_000), '<script>alert(1)</script>', "%_'\\"]) {
      const res = await o.browser.post('/oauth2/authorize', { transaction, search });
      expect(res.statusCode, res.body.slice(0, 300)).toBe(200);
      expect(res.body).not.toContain('<script>alert');
      expect(res.body).toContain('No patient found');
    }
    const junk = await o.browser.post('/oauth2/authorize', { transaction, patient: '../../x' });
    expect(junk.statusCode).toBe(200);
    expect(junk.body).toContain('Choose one of the patients listed');
    // A patient of another project cannot be posted in; another browser (no cookie) cannot post at all.
    const foreign = await o.browser.post('/oauth2/authorize', { transaction, patient: otherPatient });
    expect(foreign.statusCode).toBe(200);
    expect(foreign.body).toContain('Choose one of the patients listed');
    const csrf = await new Browser(t.app).post('/oauth2/authorize', {
      transaction,
      patient: ids.zed as string,
    });
    expect(csrf.statusCode).toBe(400);
    const chosen = await o.browser.post('/oauth2/authorize', { transaction, patient: ids.zed as string });
    expect(chosen.statusCode, chosen.body).toBe(303);
    const body = await exchange(redirectParams(chosen).get('code') as string, o.verifier);
    expect(body).toMatchObject({ patient: ids.zed, scope: 'openid launch/patient patient/*.rs' });
    expect(await observedPatients(body.access_token as string)).toEqual([`Patient/${ids.zed as string}`]);
    expect((await get(body.access_token as string, `Patient/${ids.alice as string}`)).statusCode).toBe(404);
  });

  it('gives a Patient user their own record without a picker', async () => {
    const o = await open({ scope: 'openid launch/patient patient/*.rs' });
    const signed = await signIn(o, 'pat@ehr.example');
    expect(signed.statusCode, signed.body).toBe(303);
    const body = await exchange(redirectParams(signed).get('code') as string, o.verifier);
    expect(body.patient).toBe(ids.pat);
  });

  it('announces EHR launch in the SMART configuration and $launch in the CapabilityStatement', async () => {
    const smart = (await t.app.inject({ method: 'GET', url: '/.well-known/smart-configuration' })).json();
    expect(smart.capabilities).toEqual(
      expect.arrayContaining(['launch-ehr', 'context-ehr-patient', 'context-ehr-encounter']),
    );
    expect(smart.scopes_supported).toEqual(
      expect.arrayContaining(['launch', 'launch/patient', 'launch/encounter']),
    );
    const meta = (await t.request({ method: 'GET', url: `${t.fhir}/metadata` })).json();
    const oauth = meta.rest[0].security.extension.find((e: { url: string }) => e.url.endsWith('/oauth-uris'));
    expect(oauth.extension).toContainEqual({
      url: 'authorize',
      valueUri: 'http://cinder.test/oauth2/authorize',
    });
    const client = meta.rest[0].resource.find((r: { type: string }) => r.type === 'ClientApplication');
    expect(client.operation.map((o: { name: string }) => o.name)).toContain('launch');
  });
});
