// Conditional references in transactions (API.md §11, R4 http.html#trules): `Type?search` references resolve to the one
// match the caller may see; none or several is 412 and nothing is stored; malformed searches are 400; batches per entry.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db, Queryable } from '../../src/storage/db.js';
import { testDatabases } from '../support/db.js';
import {
  createEntry,
  created,
  inviteRequest,
  postBundle,
  scopedClientToken,
  setUserPassword,
  startTestApp,
  type TestApp,
} from '../support/app.js';
import { smartLaunch } from '../support/smart-browser.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The database with a count of the statements sent through it (to see that a repeated search runs once). */
function counting(db: Db): { db: Db; count: () => number } {
  let n = 0;
  const wrap = (q: Queryable): Queryable => ({
    query: (...args: Parameters<Queryable['query']>) => {
      n++;
      return q.query(...args);
    },
  });
  const proxy = new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === 'query') return wrap(target).query;
      if (prop === 'transaction')
        return <T>(fn: (tx: Queryable) => Promise<T>) => target.transaction((tx) => fn(wrap(tx)));
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
  return { db: proxy, count: () => n };
}

describe.each(testDatabases())('conditional references on $name', (database) => {
  let t: TestApp;
  let raw: Db;
  let queries: () => number;
  let token: string;
  let projectId: string;
  let otherToken: string;
  const system = `http://hospital.test/mrn/${randomUUID()}`;
  const mrn = (): string => randomUUID().slice(0, 12);

  beforeAll(async () => {
    raw = await database.open();
    const c = counting(raw);
    queries = c.count;
    t = await startTestApp(database, {}, { db: c.db });
    const p = await t.newProject();
    token = p.adminToken;
    projectId = p.projectId;
    otherToken = (await t.newProject()).adminToken;
  });
  afterAll(async () => {
    await t?.close();
    await raw?.close();
  });

  const patient = (value: string, tok = token, extra: Json = {}): Promise<Json> =>
    created(t, tok, { resourceType: 'Patient', identifier: [{ system, value }], ...extra });
  const search = async (url: string, tok = token): Promise<Json[]> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/${url}`, token: tok });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json().entry ?? []).map((e: Json) => e.resource);
  };
  const read = async (location: string): Promise<Json> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/${location.split('/_history')[0]}`, token });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const observation = (subject: string, extra: Json = {}): Json => ({
    resourceType: 'Observation',
    status: 'final',
    code: { text: `conditional-${randomUUID()}` },
    subject: { reference: subject },
    ...extra,
  });
  const ref = (value: string): string => `Patient?identifier=${encodeURIComponent(`${system}|${value}`)}`;
  const expectOutcome = (res: { statusCode: number; json(): Json }, status: number, text: RegExp): void => {
    expect(res.statusCode).toBe(status);
    const body = res.json();
    expect(body.resourceType).toBe('OperationOutcome');
    expect(body.issue[0].severity).toBe('error');
    expect(body.issue[0].details.text).toMatch(text);
  };

  it('replaces a search reference anywhere in the resource by the one match', async () => {
    const value = mrn();
    const p = await patient(value);
    const absolute = `http://cinder.test/fhir/R4/${ref(value)}`;
    const obs = observation(ref(value), {
      contained: [{ resourceType: 'Specimen', id: 'sp', subject: { reference: ref(value) } }],
      specimen: { reference: '#sp' },
      performer: [{ reference: absolute }],
      extension: [{ url: 'http://example.org/ext', valueReference: { reference: ref(value) } }],
      focus: [{ reference: 'http://elsewhere.example/fhir/Patient?identifier=x' }],
    });
    const res = await postBundle(t, token, 'transaction', [createEntry(obs)]);
    expect(res.statusCode, res.body).toBe(200);
    const stored = await read(res.json().entry[0].response.location);
    const target = `Patient/${p.id as string}`;
    expect(stored.subject.reference).toBe(target);
    expect(stored.performer[0].reference).toBe(target);
    expect(stored.extension[0].valueReference.reference).toBe(target);
    expect(stored.contained[0].subject.reference).toBe(target);
    expect(stored.specimen.reference).toBe('#sp');
    // Another server's search is not ours to resolve.
    expect(stored.focus[0].reference).toBe('http://elsewhere.example/fhir/Patient?identifier=x');
    // The stored reference is indexed: a search by subject finds the Observation.
    expect((await search(`Observation?subject=${target}`)).map((o) => o.id)).toEqual([stored.id]);
  });

  it('answers 412 naming the reference when nothing matches, and stores nothing', async () => {
    const family = `None${randomUUID().slice(0, 8)}`;
    const missing = ref(mrn());
    const res = await postBundle(t, token, 'transaction', [
      createEntry({ resourceType: 'Patient', name: [{ family }] }),
      createEntry(observation(missing)),
    ]);
    expectOutcome(res, 412, /entry\[1\].*Conditional reference Patient\?identifier=.*matched no resource/);
    expect(res.json().issue[0].expression).toEqual(['Observation.subject']);
    expect(await search(`Patient?family=${family}`)).toHaveLength(0);
  });

  it('answers 412 when several match, and stores nothing', async () => {
    const value = mrn();
    await patient(value);
    await patient(value);
    const family = `Several${randomUUID().slice(0, 8)}`;
    const res = await postBundle(t, token, 'transaction', [
      createEntry({ resourceType: 'Patient', name: [{ family }] }),
      createEntry(observation(ref(value))),
    ]);
    expectOutcome(res, 412, /matched more than one resource/);
    expect(res.json().issue[0].code).toBe('multiple-matches');
    expect(await search(`Patient?family=${family}`)).toHaveLength(0);
  });

  it("never matches another project's resources", async () => {
    const value = mrn();
    const theirs = await patient(value, otherToken);
    const lonely = await postBundle(t, token, 'transaction', [createEntry(observation(ref(value)))]);
    expectOutcome(lonely, 412, /matched no resource/);
    // With a patient of its own, the caller's search finds only that one (not two).
    const mine = await patient(value);
    const res = await postBundle(t, token, 'transaction', [createEntry(observation(ref(value)))]);
    expect(res.statusCode, res.body).toBe(200);
    const stored = await read(res.json().entry[0].response.location);
    expect(stored.subject.reference).toBe(`Patient/${mine.id as string}`);
    expect(stored.subject.reference).not.toBe(`Patient/${theirs.id as string}`);
  });

  it('refuses a token that may not search the type, the same whether or not a match exists', async () => {
    const value = mrn();
    await patient(value);
    const narrow = await scopedClientToken(t, token, projectId, 'system/Observation.crs');
    const code = `narrow-${randomUUID()}`;
    const answers = [];
    for (const r of [ref(value), ref(mrn())]) {
      const res = await postBundle(t, narrow, 'transaction', [
        createEntry({ ...observation(r), code: { text: code } }),
      ]);
      expectOutcome(res, 403, /scope does not permit search of Patient/);
      answers.push(res.json().issue[0].details.text.replace(/Patient\?identifier=\S+/, ''));
    }
    expect(answers[0]).toBe(answers[1]);
    expect(await search(`Observation?code:text=${code}`)).toHaveLength(0);
    // A chained search reaches a type the token may not read: refused as well.
    const chained = await postBundle(t, narrow, 'transaction', [
      createEntry(
        observation(`Observation?subject:Patient.identifier=${encodeURIComponent(`${system}|${value}`)}`),
      ),
    ]);
    expect(chained.statusCode, chained.body).toBe(403);
    expect(chained.json().resourceType).toBe('OperationOutcome');
  });

  it("finds, with patient/ scopes, only the patient-in-context's compartment", async () => {
    const redirectUri = 'https://app.example/callback';
    const app = await created(t, token, {
      resourceType: 'ClientApplication',
      name: 'Patient app',
      redirectUri,
    });
    const email = `pat-${randomUUID().slice(0, 8)}@txref.example`;
    const invited = await inviteRequest(t, token, projectId, {
      resourceType: 'Patient',
      firstName: 'Pia',
      lastName: `Scoped${randomUUID().slice(0, 8)}`,
      email,
    });
    expect(invited.statusCode, invited.body).toBe(200);
    const membership = invited.json() as { user: { reference: string }; profile: { reference: string } };
    const me = membership.profile.reference;
    await setUserPassword(
      t,
      membership.user.reference.split('/')[1] as string,
      'a long and correct password',
    );
    const launched = await smartLaunch(t.app, {
      clientId: app.id as string,
      redirectUri,
      aud: 'http://cinder.test/fhir/R4',
      email,
      password: 'a long and correct password',
      scope: 'launch/patient patient/*.cruds',
    });
    const patientToken = launched.access_token as string;
    const value = mrn();
    await patient(value); // in the project, outside this patient's compartment
    const mine = await postBundle(t, patientToken, 'transaction', [
      createEntry(observation(`Patient?_id=${me.split('/')[1] as string}`)),
    ]);
    expect(mine.statusCode, mine.body).toBe(200);
    expect(mine.json().entry[0].resource.subject.reference).toBe(me);
    const texts = [];
    for (const r of [ref(value), ref(mrn())]) {
      const res = await postBundle(t, patientToken, 'transaction', [createEntry(observation(r))]);
      expectOutcome(res, 412, /matched no resource/);
      texts.push(res.json().issue[0].details.text.replace(/Patient\?identifier=\S+/, ''));
    }
    expect(texts[0]).toBe(texts[1]);
  });

  it("refuses a member's search of a type only administrators read", async () => {
    const member = (await t.newProject()).memberToken;
    const res = await postBundle(t, member, 'transaction', [
      createEntry(observation('ClientApplication?name=Scoped')),
    ]);
    expectOutcome(res, 403, /needs a project administrator/);
  });

  it('says so in the CapabilityStatement', async () => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/metadata` });
    expect(res.statusCode).toBe(200);
    const interactions: Json[] = res.json().rest[0].interaction;
    const doc = (code: string): string => interactions.find((i) => i.code === code)?.documentation ?? '';
    expect(doc('transaction')).toMatch(/reference written as a search/);
    expect(doc('batch')).toMatch(/per entry/);
  });

  it('answers 400 with an OperationOutcome for malformed searches, and stores nothing', async () => {
    const family = `Malformed${randomUUID().slice(0, 8)}`;
    const cases: [string, RegExp][] = [
      ['Patient?', /the search is empty/],
      ['?x=1', /must start with a resource type/],
      ['Unicorn?name=x', /must start with a resource type/],
      ['Patient?no-such-parameter=1', /Unknown search parameter/],
      [`Patient?_count=1&identifier=${system}|x`, /_count is not a filtering parameter/],
      ['Patient?_sort=name&name=x', /_sort is not a filtering parameter/],
      ['Patient?birthdate=not-a-date', /Conditional reference/],
      [`Patient?identifier=${'x'.repeat(10_000)}`, /longer than 4096 characters/],
    ];
    for (const [reference, text] of cases) {
      const res = await postBundle(t, token, 'transaction', [
        createEntry({ resourceType: 'Patient', name: [{ family }] }),
        createEntry(observation(reference)),
      ]);
      expect(res.statusCode, reference).toBe(400);
      expectOutcome(res, 400, text);
    }
    expect(await search(`Patient?family=${family}`)).toHaveLength(0);
  });

  it('resolves 200 references to the same search with one search', async () => {
    const value = mrn();
    const p = await patient(value);
    const code = `many-${randomUUID()}`;
    const entries = Array.from({ length: 200 }, () =>
      createEntry({ ...observation(ref(value)), code: { text: code } }),
    );
    const before = queries();
    const res = await postBundle(t, token, 'transaction', entries);
    const used = queries() - before;
    expect(res.statusCode, res.body.slice(0, 500)).toBe(200);
    // One search per reference would take at least 200 statements.
    expect(used).toBeLessThan(100);
    const stored = await search(`Observation?code:text=${code}&_count=300`);
    expect(stored).toHaveLength(200);
    expect(new Set(stored.map((o) => o.subject.reference))).toEqual(new Set([`Patient/${p.id as string}`]));
  });

  it('loads a Synthea-style bundle: a conditional create, and references by the same search', async () => {
    const value = mrn();
    const npi = mrn();
    const load = (): Promise<{ statusCode: number; body: string; json(): Json }> =>
      postBundle(t, token, 'transaction', [
        {
          resource: {
            resourceType: 'Practitioner',
            identifier: [{ system: 'http://hl7.org/fhir/sid/us-npi', value: npi }],
          },
          request: {
            method: 'POST',
            url: 'Practitioner',
            ifNoneExist: `identifier=http://hl7.org/fhir/sid/us-npi|${npi}`,
          },
        },
        {
          resource: {
            resourceType: 'Encounter',
            status: 'finished',
            class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
            subject: { reference: ref(value) },
            participant: [
              { individual: { reference: `Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|${npi}` } },
            ],
          },
          request: { method: 'POST', url: 'Encounter' },
        },
        {
          // The Patient refers to its practitioner by search too: it waits for its own search, and the Encounter's
          // search (the same criteria as its If-None-Exist) names it all the same.
          resource: {
            resourceType: 'Patient',
            identifier: [{ system, value }],
            generalPractitioner: [
              { reference: `Practitioner?identifier=http://hl7.org/fhir/sid/us-npi|${npi}` },
            ],
          },
          request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=${system}|${value}` },
        },
      ]);
    const first = await load();
    expect(first.statusCode, first.body).toBe(200);
    const [practitioner, encounter, pat] = first.json().entry;
    expect(practitioner.response.status).toBe('201 Created');
    expect(pat.response.status).toBe('201 Created');
    const patientId = pat.resource.id as string;
    const practitionerId = practitioner.resource.id as string;
    expect(encounter.resource.subject.reference).toBe(`Patient/${patientId}`);
    expect(encounter.resource.participant[0].individual.reference).toBe(`Practitioner/${practitionerId}`);
    expect(pat.resource.generalPractitioner[0].reference).toBe(`Practitioner/${practitionerId}`);
    // Loaded again: the conditional creates find what is there, the references name the same resources.
    const second = await load();
    expect(second.statusCode, second.body).toBe(200);
    const again = second.json().entry;
    expect(again[0].response.status).toBe('200 OK');
    expect(again[2].response.status).toBe('200 OK');
    expect(again[1].resource.subject.reference).toBe(`Patient/${patientId}`);
    expect(await search(`Patient?identifier=${encodeURIComponent(`${system}|${value}`)}`)).toHaveLength(1);
    expect(await search(`Encounter?subject=Patient/${patientId}`)).toHaveLength(2);
  });

  it('sees what the transaction deletes and creates before it', async () => {
    const value = mrn();
    const plain = await postBundle(t, token, 'transaction', [
      createEntry(observation(ref(value))),
      createEntry({ resourceType: 'Patient', identifier: [{ system, value }] }),
    ]);
    expect(plain.statusCode, plain.body).toBe(200);
    const [obs, pat] = plain.json().entry;
    expect(obs.resource.subject.reference).toBe(`Patient/${pat.resource.id as string}`);
    // Deleted in the same transaction: no longer a match.
    const gone = await postBundle(t, token, 'transaction', [
      createEntry(observation(ref(value))),
      { request: { method: 'DELETE', url: `Patient/${pat.resource.id as string}` } },
    ]);
    expectOutcome(gone, 412, /matched no resource/);
    expect(await search(`Patient?_id=${pat.resource.id as string}`)).toHaveLength(1);
  });

  it('resolves references of updates, and of a conditional update by its own criteria', async () => {
    const value = mrn();
    const p = await patient(value);
    const o = await created(t, token, observation(`Patient/${p.id as string}`));
    const other = mrn();
    const res = await postBundle(t, token, 'transaction', [
      {
        resource: { ...o, focus: [{ reference: ref(other) }] },
        request: { method: 'PUT', url: `Observation/${o.id as string}` },
      },
      {
        resource: { resourceType: 'Patient', identifier: [{ system, value: other }], active: true },
        request: { method: 'PUT', url: ref(other) },
      },
    ]);
    expect(res.statusCode, res.body).toBe(200);
    const newPatient = res.json().entry[1].resource.id as string;
    expect((await read(`Observation/${o.id as string}`)).focus[0].reference).toBe(`Patient/${newPatient}`);
  });

  it('does not resolve the references of a conditional create that finds its resource', async () => {
    const value = mrn();
    const p = await patient(value);
    const entry = {
      resource: {
        resourceType: 'Patient',
        identifier: [{ system, value }],
        link: [{ other: { reference: ref(mrn()) }, type: 'seealso' }],
      },
      request: { method: 'POST', url: 'Patient', ifNoneExist: `identifier=${system}|${value}` },
    };
    for (const type of ['transaction', 'batch'] as const) {
      const res = await postBundle(t, token, type, [entry]);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().entry[0].response.status).toBe('200 OK');
      expect(res.json().entry[0].resource.id).toBe(p.id);
    }
  });

  it('resolves per entry in a batch: a failing search fails its entry only', async () => {
    const value = mrn();
    const p = await patient(value);
    const code = `batch-${randomUUID()}`;
    const res = await postBundle(t, token, 'batch', [
      createEntry({ ...observation(ref(value)), code: { text: code } }),
      createEntry({ ...observation(ref(mrn())), code: { text: code } }),
      createEntry({ ...observation('Patient?'), code: { text: code } }),
      createEntry({ ...observation(`Patient/${p.id as string}`), code: { text: code } }),
    ]);
    expect(res.statusCode, res.body).toBe(200);
    const entries = res.json().entry;
    expect(entries.map((e: Json) => e.response.status.slice(0, 3))).toEqual(['201', '412', '400', '201']);
    expect(entries[1].response.outcome.issue[0].details.text).toMatch(/matched no resource/);
    expect(entries[0].resource.subject.reference).toBe(`Patient/${p.id as string}`);
    expect(await search(`Observation?code:text=${code}`)).toHaveLength(2);
  });
});
