// Search modifiers of API.md §9 (issue 27 point 4) through HTTP, against ValueSets and CodeSystems stored in the
// project: token `:in`/`:not-in`, `:below`/`:above`, identifier `:of-type`, reference `:identifier`, uri
// `:below`/`:above`; project isolation of value sets, scopes, hostile values and Subscription criteria.
// The terminology is the server's own (src/fhir/conformance/terminology); a second app on the same database has its
// expansion limit lowered to show the 422 of a value set too large to expand. https://hl7.org/fhir/R4/search.html#modifiers
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createResolver } from '../../src/fhir/conformance/resolver.js';
import { emptySharedSet } from '../../src/fhir/conformance/shared-set.js';
import { createTerminology } from '../../src/fhir/conformance/terminology/index.js';
import { testDatabases } from '../support/db.js';
import {
  created,
  inviteRequest,
  scopedClientToken,
  setUserPassword,
  startTestApp,
  type TestApp,
} from '../support/app.js';
import { smartLaunch } from '../support/smart-browser.js';
import { jobIdOf, kickOff, waitForJob } from '../support/jobs.js';

type Json = Record<string, unknown>;
type Bundle = { entry?: { resource: Json }[] };
type Outcome = { resourceType: string; issue: { code: string; details?: { text: string } }[] };

const LOINC = 'http://loinc.org';
const V2 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const MRN = 'http://hospital.org/mrn';
const VITALS = 'http://acme.test/fhir/ValueSet/vitals';
const BIG = 'http://acme.test/fhir/ValueSet/big';
const HUGE = 'http://acme.test/fhir/ValueSet/huge';
const BODY = 'http://acme.test/fhir/CodeSystem/body';
/** The expansion limit of the second app. */
const SMALL_LIMIT = 1000;
const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://app.example/callback';

const valueSet = (url: string, system: string, codes: string[]): Json => ({
  resourceType: 'ValueSet',
  url,
  status: 'active',
  compose: { include: [{ system, concept: codes.map((code) => ({ code })) }] },
});
const codes = (n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => `big-${from + i}`);

describe.each(testDatabases())('search modifiers through HTTP on $name', (database) => {
  let t: TestApp;
  let limited: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  const id: Record<string, string> = {};

  const get = (token: string, query: string) =>
    t.request({ method: 'GET', url: `${t.fhir}/${query}`, token });
  /** The keys (of `id`) of what a search finds, sorted. */
  const found = async (query: string, token = a.adminToken): Promise<string[]> => {
    const res = await get(token, `${query}${query.includes('?') ? '&' : '?'}_count=1000`);
    expect(res.statusCode, `${query}: ${res.body}`).toBe(200);
    const names = new Map(Object.entries(id).map(([k, v]) => [v, k]));
    return ((res.json() as Bundle).entry ?? []).map((e) => names.get(e.resource.id as string) ?? '?').sort();
  };
  /** A search's refusal: its status, and the OperationOutcome's first issue. */
  const refused = async (query: string, token = a.adminToken) => {
    const res = await get(token, query);
    const body = res.json() as Outcome;
    expect(body.resourceType, res.body).toBe('OperationOutcome');
    return { status: res.statusCode, code: body.issue[0]?.code, text: body.issue[0]?.details?.text ?? '' };
  };
  const obs = (system: string, code: string, extra: Json = {}): Json => ({
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system, code }] },
    ...extra,
  });

  beforeAll(async () => {
    t = await startTestApp(database, {}, { jobs: {} });
    const resolver = createResolver({ query: (...q) => t.db.query(...q) }, emptySharedSet());
    limited = await startTestApp(
      database,
      {},
      { db: t.db, terminology: createTerminology({ resolver, limits: { maxCodes: SMALL_LIMIT } }) },
    );
    a = await t.newProject('Modifiers A');
    b = await t.newProject('Modifiers B');
    const make = async (key: string, resource: Json, token = a.adminToken): Promise<void> => {
      id[key] = (await created(t, token, resource)).id as string;
    };
    await make('vitals', { ...valueSet(VITALS, LOINC, ['8867-4', '8310-5']), version: '1.0.0' });
    await make('big', valueSet(BIG, LOINC, [...codes(4999), '8310-5']));
    await make('huge', valueSet(HUGE, LOINC, codes(SMALL_LIMIT + 1)));
    await make('body', {
      resourceType: 'CodeSystem',
      url: BODY,
      status: 'active',
      content: 'complete',
      hierarchyMeaning: 'is-a',
      concept: [
        { code: 'root', concept: [{ code: 'mid', concept: [{ code: 'child' }] }, { code: 'other' }] },
      ],
    });
    await make('pat', {
      resourceType: 'Patient',
      identifier: [{ system: MRN, value: '12345', type: { coding: [{ system: V2, code: 'MR' }] } }],
    });
    await make('pat2', { resourceType: 'Patient', identifier: [{ system: MRN, value: '12345' }] });
    await make('heart', obs(LOINC, '8867-4', { subject: { reference: `Patient/${id.pat}` } }));
    await make('temp', obs(LOINC, '8310-5', { subject: { identifier: { system: MRN, value: '123' } } }));
    // The same code in another system: never a member of the LOINC value set (a peer matched codes without systems).
    await make('otherHeart', obs('http://other.org/codes', '8867-4'));
    await make('child', obs(BODY, 'child'));
    await make('root', obs(BODY, 'root'));
    for (const [key, url] of [
      ['u1', 'http://acme.org/fhir/ValueSet/x'],
      ['u2', 'http://acme.org/fhirx/ValueSet/y'],
      ['u3', 'http://acme.org/fhir'],
    ] as const) {
      await make(key, { resourceType: 'ValueSet', status: 'draft', url });
    }
    // Project B: a heart rate of its own, and later its own value set under A's url.
    await make('bHeart', obs(LOINC, '8867-4'), b.adminToken);
  }, 120_000);
  afterAll(async () => {
    await limited?.close();
    await t?.close();
  });

  it(':in and :not-in match system and code of the project’s value set', async () => {
    expect(await found(`Observation?code:in=${VITALS}`)).toEqual(['heart', 'temp']);
    expect(await found(`Observation?code:in=${VITALS}|1.0.0`)).toEqual(['heart', 'temp']);
    expect((await refused(`Observation?code:in=${VITALS}|2.0.0`)).status).toBe(400);
    expect(await found(`Observation?code:not-in=${VITALS}`)).toEqual(['child', 'otherHeart', 'root']);
    expect(await found(`Observation?code:in=${VITALS}&subject=Patient/${id.pat}`)).toEqual(['heart']);
  });

  it('an unknown value set is a 400 naming it; one too large to expand is the 422 of the expansion', async () => {
    const unknown = await refused('Observation?code:in=http://acme.test/fhir/ValueSet/nope');
    expect([unknown.status, unknown.code]).toEqual([400, 'invalid']);
    expect(unknown.text).toContain('http://acme.test/fhir/ValueSet/nope');
    expect(await found(`Observation?code:in=${HUGE}`)).toEqual([]);
    const res = await limited.request({
      method: 'GET',
      url: `${t.fhir}/Observation?code:in=${HUGE}`,
      token: a.adminToken,
    });
    expect(res.statusCode, res.body).toBe(422);
    expect((res.json() as Outcome).issue[0]?.code).toBe('too-costly');
  });

  it('another project never uses this project’s value set', async () => {
    const r = await refused(`Observation?code:in=${VITALS}`, b.adminToken);
    expect(r.status).toBe(400);
    expect(r.text).toContain(VITALS);
    await created(t, b.adminToken, valueSet(VITALS, LOINC, ['8867-4']));
    expect(await found(`Observation?code:in=${VITALS}`, b.adminToken)).toEqual(['bHeart']);
    // A's answer is still A's own value set (two codes).
    expect(await found(`Observation?code:in=${VITALS}`)).toEqual(['heart', 'temp']);
  });

  it(':below and :above follow the code system hierarchy', async () => {
    expect(await found(`Observation?code:below=${BODY}|mid`)).toEqual(['child']);
    expect(await found(`Observation?code:below=${BODY}|root`)).toEqual(['child', 'root']);
    expect(await found(`Observation?code:above=${BODY}|child`)).toEqual(['child', 'root']);
    const r = await refused(`Observation?code:below=${BODY}|nope`);
    expect([r.status, r.code]).toEqual([400, 'invalid']);
    expect(r.text).toContain(`${BODY}|nope`);
  });

  it(':of-type matches an identifier by its type and value; :identifier a reference by its identifier', async () => {
    expect(await found(`Patient?identifier:of-type=${V2}|MR|12345`)).toEqual(['pat']);
    expect(await found(`Patient?identifier:of-type=${V2}|SS|12345`)).toEqual([]);
    expect(await found(`Observation?subject:identifier=${MRN}|123`)).toEqual(['temp']);
    expect(await found(`Observation?subject:identifier=http://other.org|123`)).toEqual([]);
  });

  it('resources indexed before :of-type existed are found after $reindex', async () => {
    id.old = (
      await created(t, a.adminToken, {
        resourceType: 'Patient',
        identifier: [{ system: MRN, value: 'old-1', type: { coding: [{ system: V2, code: 'MR' }] } }],
      })
    ).id as string;
    // As written before migration 017: no identifier rows.
    await t.db.query(
      `DELETE FROM sp_identifier WHERE rid IN (SELECT rid FROM resources WHERE resource_type = 'Patient' AND id = $1)`,
      [id.old],
    );
    expect(await found(`Patient?identifier:of-type=${V2}|MR|old-1`)).toEqual([]);
    const job = jobIdOf(
      await kickOff(t, t.adminToken, '$reindex', { parameter: [{ name: '_type', valueString: 'Patient' }] }),
    );
    expect((await waitForJob(t, job, t.adminToken)).status).toBe('completed');
    expect(await found(`Patient?identifier:of-type=${V2}|MR|old-1`)).toEqual(['old']);
  });

  it('uri :below and :above go by path segments', async () => {
    expect(await found('ValueSet?url:below=http://acme.org/fhir')).toEqual(['u1', 'u3']);
    expect(await found('ValueSet?url:above=http://acme.org/fhir/ValueSet/x/v2')).toEqual(['u1', 'u3']);
  });

  it('hostile values are a 400 OperationOutcome, never a 5xx', async () => {
    const cases = [
      `Observation?code:in=http://acme.test/${'x'.repeat(10_000)}`,
      `Observation?code:in=${encodeURIComponent('not a canonical')}`,
      `Observation?code:not-in=${encodeURIComponent('%%|%%|%%')}`,
      `Patient?identifier:of-type=${V2}|MR`,
      `Patient?identifier:of-type=${encodeURIComponent('||')}`,
      'Observation?code:below=root',
      `Observation?code:below=${BODY}|nope`,
      `Observation?code:above=${encodeURIComponent("x'); DROP TABLE resources;--|y")}`,
      'Observation?code:of-type=a|b|c',
      'Observation?subject:identifier=|',
    ];
    for (const q of cases) {
      const r = await refused(q);
      expect(r.status, q).toBe(400);
    }
  });

  it('a narrowly scoped token only sees what its scopes allow', async () => {
    // A client with system/Patient.rs may not search Observations, through :in or through _has.
    const patientOnly = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Patient.rs');
    expect((await get(patientOnly, `Observation?code:in=${VITALS}`)).statusCode).toBe(403);
    expect((await get(patientOnly, `Patient?_has:Observation:subject:code:in=${VITALS}`)).statusCode).toBe(
      403,
    );
    // A patient's launch with patient/Observation.rs finds only the patient's own Observations in the value set.
    await t.request({
      method: 'PUT',
      url: `${t.fhir}/ClientApplication/modifiers-app`,
      token: a.adminToken,
      payload: { resourceType: 'ClientApplication', id: 'modifiers-app', name: 'App', redirectUri: REDIRECT },
    });
    const invite = await inviteRequest(t, a.adminToken, a.projectId, {
      resourceType: 'Patient',
      firstName: 'Sam',
      lastName: 'Patient',
      email: 'sam@modifiers.example',
    });
    expect(invite.statusCode, invite.body).toBe(200);
    const m = invite.json() as { user: { reference: string }; profile: { reference: string } };
    await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
    const me = m.profile.reference.split('/')[1] as string;
    id.mine = (
      await created(t, a.adminToken, obs(LOINC, '8867-4', { subject: { reference: `Patient/${me}` } }))
    ).id as string;
    const launched = await smartLaunch(t.app, {
      clientId: 'modifiers-app',
      redirectUri: REDIRECT,
      aud: 'http://cinder.test/fhir/R4',
      email: 'sam@modifiers.example',
      password: PASSWORD,
      scope: 'launch/patient patient/Observation.rs',
    });
    const patientToken = launched.access_token as string;
    expect(await found(`Observation?code:in=${VITALS}`, patientToken)).toEqual(['mine']);
    expect(await found(`Observation?code:in=${VITALS}`)).toEqual(['heart', 'mine', 'temp']);
  });

  it('a search over a large value set does not stop another project’s reads', async () => {
    const reads = Array.from({ length: 5 }, () => get(b.adminToken, `Observation/${id.bHeart}`));
    const searches = Array.from({ length: 3 }, () => found(`Observation?code:in=${BIG}&_count=5`));
    const [readResults, searchResults] = await Promise.all([Promise.all(reads), Promise.all(searches)]);
    for (const r of readResults) expect(r.statusCode, r.body).toBe(200);
    for (const s of searchResults) expect(s).toEqual(['temp']);
  });

  it('Subscription criteria with these modifiers are refused when saved', async () => {
    for (const criteria of [
      `Observation?code:in=${VITALS}`,
      `Observation?code:not-in=${VITALS}`,
      `Observation?code:below=${BODY}|root`,
      `Patient?identifier:of-type=${V2}|MR|12345`,
      `Observation?subject:identifier=${MRN}|123`,
    ]) {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/Subscription`,
        token: a.adminToken,
        payload: {
          resourceType: 'Subscription',
          status: 'requested',
          reason: 'x',
          criteria,
          channel: { type: 'websocket' },
        },
      });
      expect(res.statusCode, `${criteria}: ${res.body}`).toBe(400);
      expect(res.body, criteria).toMatch(/Subscription criteria: .*'(code|identifier|subject)/);
    }
  });
});
