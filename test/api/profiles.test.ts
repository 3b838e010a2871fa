// Validation against profiles through HTTP (API.md §9): US Core 5.0.1 examples validate with no error, targeted
// breakages give the expected issue and expression, $validate's unknown profiles, writes declaring meta.profile
// (422 and nothing stored, or 201 when the profile is unknown), project isolation, and hostile profiles.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationOutcomeIssue } from '../../src/fhir/outcome.js';
import { testDatabases } from '../support/db.js';
import { randomUUID } from 'node:crypto';
import {
  createEntry,
  postBundle,
  postResource,
  startTestApp,
  tokenRequest,
  type TestApp,
} from '../support/app.js';
import { usCoreDefinitions, usCoreSharedSet } from '../support/shared-set.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const US = 'http://hl7.org/fhir/us/core/StructureDefinition/';
const fixture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`../fixtures/us-core/${name}`, import.meta.url), 'utf8')) as Json;
const clone = <T>(v: T): T => structuredClone(v);

const errorsOf = (issues: OperationOutcomeIssue[]): OperationOutcomeIssue[] =>
  issues.filter((i) => i.severity === 'error');

describe.each(testDatabases())('profiles on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };

  const validate = async (
    token: string,
    resource: Json,
    profile?: string,
  ): Promise<OperationOutcomeIssue[]> => {
    const q = profile ? `?profile=${encodeURIComponent(profile)}` : '';
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/${String(resource.resourceType)}/$validate${q}`,
      token,
      payload: resource,
    });
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { issue: OperationOutcomeIssue[] }).issue;
  };
  const expectIssue = (
    issues: OperationOutcomeIssue[],
    expression: string,
    text: RegExp,
    code?: string,
  ): void => {
    const hit = issues.find(
      (i) => i.severity === 'error' && i.expression?.[0] === expression && text.test(i.details?.text ?? ''),
    );
    expect(hit, JSON.stringify(issues, null, 1)).toBeDefined();
    if (code) expect(hit?.code).toBe(code);
  };

  beforeAll(async () => {
    t = await startTestApp(database, {}, { sharedConformance: usCoreSharedSet() });
    a = await t.newProject();
    b = await t.newProject();
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each([
    ['patient-example.json', `${US}us-core-patient`],
    ['blood-pressure.json', `${US}us-core-blood-pressure`],
    ['Device-knee.json', `${US}us-core-implantable-device`],
    ['some-day-smoker-7.0.0.json', `${US}us-core-smokingstatus|7.0.0`],
  ])('validates the US Core example %s with no error', async (file, profile) => {
    const issues = await validate(a.adminToken, fixture(file), profile);
    expect(errorsOf(issues), JSON.stringify(issues, null, 1)).toEqual([]);
  });

  it('reports a missing required element', async () => {
    const p = fixture('patient-example.json');
    delete p.identifier;
    expectIssue(await validate(a.adminToken, p), 'Patient.identifier', /at least 1/, 'required');
  });

  it('reports a wrong pattern', async () => {
    const o = fixture('blood-pressure.json');
    o.code.coding[0].code = '1234-5';
    expectIssue(await validate(a.adminToken, o), 'Observation.code', /must contain/, 'value');
  });

  it('reports missing required slices (systolic component, vital-signs category)', async () => {
    const o = fixture('blood-pressure.json');
    o.component = o.component.filter((c: Json) => c.code.coding[0].code !== '8480-6');
    o.category[0].coding[0].code = 'laboratory';
    const issues = await validate(a.adminToken, o);
    expectIssue(issues, 'Observation.component', /slice 'systolic' requires at least 1/, 'required');
    expectIssue(issues, 'Observation.category', /slice 'VSCat' requires at least 1/, 'required');
  });

  it('reports an extension with a wrong value type', async () => {
    const p = fixture('patient-example.json');
    const at = p.extension.findIndex((e: Json) => e.url === `${US}us-core-birthsex`);
    p.extension[at] = { url: `${US}us-core-birthsex`, valueString: 'F' };
    expectIssue(
      await validate(a.adminToken, p),
      `Patient.extension[${at}].valueString`,
      /type string is not allowed/,
      'structure',
    );
  });

  it('reports a us-core-race sub-extension with a valueString instead of a Coding', async () => {
    const p = fixture('patient-example.json');
    const at = p.extension.findIndex((e: Json) => e.url === `${US}us-core-race`);
    const omb = p.extension[at].extension.findIndex((e: Json) => e.url === 'ombCategory');
    p.extension[at].extension[omb] = { url: 'ombCategory', valueString: 'White' };
    expectIssue(
      await validate(a.adminToken, p),
      `Patient.extension[${at}].extension[${omb}].valueString`,
      /type string is not allowed/,
      'structure',
    );
  });

  it('reports a reference to a type the targetProfile does not allow', async () => {
    const o = fixture('blood-pressure.json');
    o.subject = { reference: 'Group/g1' };
    expectIssue(
      await validate(a.adminToken, o),
      'Observation.subject.reference',
      /Group is not allowed/,
      'structure',
    );
  });

  it('reports failed invariants (us-core-6, ele-1)', async () => {
    const p = fixture('patient-example.json');
    p.name = [{ text: 'Only a text' }];
    expectIssue(await validate(a.adminToken, p), 'Patient', /us-core-6/, 'invariant');
    const q = fixture('patient-example.json');
    q.address[0].period = {};
    const issues = await validate(a.adminToken, q, `${US}us-core-patient`);
    expect(
      issues.some((i) => i.severity === 'error' && /Patient\.address\[0\]/.test(i.expression?.[0] ?? '')),
    ).toBe(true);
  });

  it('answers unknown profiles: explicit → error not-found, meta.profile → warning', async () => {
    const p = fixture('patient-example.json');
    const explicit = await validate(a.adminToken, p, 'http://example.org/nope');
    expect(explicit).toContainEqual(expect.objectContaining({ severity: 'error', code: 'not-found' }));
    p.meta.profile = ['http://example.org/unknown'];
    const meta = await validate(a.adminToken, p);
    expect(meta).toContainEqual(expect.objectContaining({ severity: 'warning', code: 'not-found' }));
    expect(errorsOf(meta)).toEqual([]);
  });

  it('refuses a create failing its known meta.profile with 422 and stores nothing; an unknown one is 201', async () => {
    const p = fixture('patient-example.json');
    delete p.id;
    p.name = [{ family: 'Refused-422', given: ['Z'] }];
    delete p.identifier;
    const res = await postResource(t, a.adminToken, p);
    expect(res.statusCode, res.body).toBe(422);
    const body = res.json() as { issue: OperationOutcomeIssue[] };
    expect(body.issue).toContainEqual(
      expect.objectContaining({ code: 'required', expression: ['Patient.identifier'] }),
    );
    const search = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient?family=Refused-422`,
      token: a.adminToken,
    });
    expect((search.json() as { total?: number; entry?: unknown[] }).entry ?? []).toEqual([]);
    p.meta.profile = ['http://example.org/unknown'];
    expect((await postResource(t, a.adminToken, p)).statusCode).toBe(201);
    const ok = fixture('patient-example.json');
    delete ok.id;
    expect((await postResource(t, a.adminToken, ok)).statusCode).toBe(201);
  });

  it('refuses an update failing its known meta.profile with 422 and keeps the stored version', async () => {
    const p = fixture('patient-example.json');
    delete p.id;
    const created = (await postResource(t, a.adminToken, p)).json() as Json;
    const changed = { ...clone(created), identifier: undefined, gender: undefined };
    const put = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Patient/${created.id}`,
      token: a.adminToken,
      payload: changed,
    });
    expect(put.statusCode, put.body).toBe(422);
    const issues = (put.json() as { issue: OperationOutcomeIssue[] }).issue;
    expect(issues.map((i) => i.expression?.[0])).toEqual(
      expect.arrayContaining(['Patient.identifier', 'Patient.gender']),
    );
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient/${created.id}`,
      token: a.adminToken,
    });
    expect((read.json() as Json).meta.versionId).toBe(created.meta.versionId);
  });

  it('validates transaction entries: a failing one refuses the whole transaction', async () => {
    const good = fixture('patient-example.json');
    const bad = clone(good);
    delete good.id;
    delete bad.id;
    bad.name = [{ family: 'InTransaction' }];
    delete bad.gender;
    const res = await postBundle(t, a.adminToken, 'transaction', [createEntry(good), createEntry(bad)]);
    expect(res.statusCode, res.body).toBe(422);
    const search = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient?family=InTransaction`,
      token: a.adminToken,
    });
    expect((search.json() as { entry?: unknown[] }).entry ?? []).toEqual([]);
  });

  it('validates batch entries one by one: the failing one answers 422, the other is stored', async () => {
    const good = fixture('patient-example.json');
    const bad = clone(good);
    delete good.id;
    delete bad.id;
    delete bad.identifier;
    const res = await postBundle(t, a.adminToken, 'batch', [createEntry(good), createEntry(bad)]);
    expect(res.statusCode, res.body).toBe(200);
    const statuses = (res.json() as { entry: { response: { status: string } }[] }).entry.map(
      (e) => e.response.status,
    );
    expect(statuses[0]).toMatch(/^201/);
    expect(statuses[1]).toMatch(/^422/);
  });

  describe('isolation', () => {
    const X = 'http://example.org/StructureDefinition/needs-birthdate';
    beforeAll(async () => {
      const base = clone(usCoreDefinitions().find((r) => r.id === 'us-core-patient')!) as Json;
      delete base.id;
      delete base.meta;
      base.url = X;
      base.name = 'NeedsBirthDate';
      base.snapshot.element.find((e: Json) => e.id === 'Patient.birthDate').min = 1;
      const res = await postResource(t, a.adminToken, base);
      expect(res.statusCode, res.body).toBe(201);
    });
    const patient = (): Json => {
      const p = fixture('patient-example.json');
      delete p.id;
      delete p.birthDate;
      p.meta = { profile: [X] };
      return p;
    };

    it("uses a project's own profile in that project only", async () => {
      expect((await postResource(t, a.adminToken, patient())).statusCode).toBe(422);
      expect((await postResource(t, b.adminToken, patient())).statusCode).toBe(201);
      const inB = await validate(b.memberToken, patient());
      expect(inB).toContainEqual(expect.objectContaining({ severity: 'warning', code: 'not-found' }));
      expect(errorsOf(inB)).toEqual([]);
      const inA = await validate(a.memberToken, patient());
      expectIssue(inA, 'Patient.birthDate', /at least 1/, 'required');
    });

    it("gives a narrowly scoped token's $validate its own project's profiles only", async () => {
      const scoped = async (projectId: string): Promise<string> => {
        const secret = `secret-${randomUUID()}`;
        const client = await postResource(t, t.adminToken, {
          resourceType: 'ClientApplication',
          name: 'narrow',
          secret,
          meta: { project: projectId },
        });
        const id = (client.json() as Json).id as string;
        const m = await postResource(t, t.adminToken, {
          resourceType: 'ProjectMembership',
          meta: { project: projectId },
          project: { reference: `Project/${projectId}` },
          user: { reference: `ClientApplication/${id}` },
          profile: { reference: `ClientApplication/${id}` },
        });
        expect(m.statusCode, m.body).toBe(201);
        const tok = await tokenRequest(t.app, {
          grant_type: 'client_credentials',
          client_id: id,
          client_secret: secret,
          scope: 'system/Patient.r',
        });
        expect(tok.statusCode, tok.body).toBe(200);
        return (tok.json() as { access_token: string }).access_token;
      };
      const inB = await validate(await scoped(b.projectId), patient());
      expect(inB).toContainEqual(expect.objectContaining({ severity: 'warning', code: 'not-found' }));
      expect(errorsOf(inB)).toEqual([]);
      expectIssue(
        await validate(await scoped(a.projectId), patient()),
        'Patient.birthDate',
        /at least 1/,
        'required',
      );
    });

    it('sees an updated profile at once', async () => {
      const search = await t.request({
        method: 'GET',
        url: `${t.fhir}/StructureDefinition?url=${encodeURIComponent(X)}`,
        token: a.adminToken,
      });
      const sd = (search.json() as { entry: { resource: Json }[] }).entry[0]!.resource;
      sd.snapshot.element.find((e: Json) => e.id === 'Patient.birthDate').min = 0;
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/StructureDefinition/${sd.id}`,
        token: a.adminToken,
        payload: sd,
      });
      expect(put.statusCode, put.body).toBe(200);
      expect(errorsOf(await validate(a.adminToken, patient()))).toEqual([]);
    });
  });

  describe('hostile profiles and resources', () => {
    const store = async (sd: Json): Promise<void> => {
      const res = await postResource(t, a.adminToken, sd);
      expect(res.statusCode, res.body).toBe(201);
    };
    const sd = (url: string, type: string, elements: Json[]): Json => ({
      resourceType: 'StructureDefinition',
      url,
      name: 'Hostile',
      status: 'active',
      kind: type === 'Extension' ? 'complex-type' : 'resource',
      abstract: false,
      type,
      derivation: 'constraint',
      baseDefinition: `http://hl7.org/fhir/StructureDefinition/${type}`,
      snapshot: { element: elements },
    });
    const readWorks = async (): Promise<void> => {
      const p = await postResource(t, b.adminToken, { resourceType: 'Patient', name: [{ family: 'After' }] });
      const id = (p.json() as { id: string }).id;
      const r = await t.request({ method: 'GET', url: `${t.fhir}/Patient/${id}`, token: b.adminToken });
      expect(r.statusCode).toBe(200);
    };

    it('a 2,000-element snapshot, looping and throwing constraints: 200/422, never 5xx', async () => {
      const elements: Json[] = [
        {
          id: 'Patient',
          path: 'Patient',
          min: 0,
          max: '*',
          constraint: [
            {
              key: 'h-1',
              severity: 'error',
              human: 'loops',
              expression: 'descendants().descendants().descendants().count() >= 0',
            },
            { key: 'h-2', severity: 'error', human: 'throws', expression: '(name | name).single().exists()' },
          ],
        },
      ];
      for (let i = 0; i < 1999; i++)
        elements.push({
          id: `Patient.extension:s${i}`,
          path: 'Patient.extension',
          sliceName: `s${i}`,
          min: 0,
          max: '1',
        });
      await store(sd('http://example.org/big', 'Patient', elements));
      const p = {
        resourceType: 'Patient',
        meta: { profile: ['http://example.org/big'] },
        name: [{ family: 'A' }, { family: 'B' }],
      };
      const issues = await validate(a.adminToken, p);
      expect(issues.some((i) => i.code === 'processing' && /h-1/.test(i.details?.text ?? ''))).toBe(true);
      const res = await postResource(t, a.adminToken, p);
      expect([201, 422]).toContain(res.statusCode);
      await readWorks();
    });

    it('a resource 100 levels deep declaring a profile, and extension definitions in a cycle', async () => {
      const extSd = (url: string, next: string): Json =>
        sd(url, 'Extension', [
          { id: 'Extension', path: 'Extension', min: 0, max: '*' },
          {
            id: 'Extension.extension',
            path: 'Extension.extension',
            min: 0,
            max: '*',
            slicing: { discriminator: [{ type: 'value', path: 'url' }], rules: 'open' },
          },
          {
            id: 'Extension.extension:next',
            path: 'Extension.extension',
            sliceName: 'next',
            min: 0,
            max: '1',
            type: [{ code: 'Extension', profile: [next] }],
          },
          { id: 'Extension.url', path: 'Extension.url', min: 1, max: '1', fixedUri: url },
          { id: 'Extension.value[x]', path: 'Extension.value[x]', min: 0, max: '0' },
        ]);
      await store(extSd('http://example.org/ext-a', 'http://example.org/ext-b'));
      await store(extSd('http://example.org/ext-b', 'http://example.org/ext-a'));
      let ext: Json = { url: 'http://example.org/ext-a', valueString: 'leaf' };
      for (let i = 0; i < 30; i++)
        ext = { url: i % 2 ? 'http://example.org/ext-a' : 'http://example.org/ext-b', extension: [ext] };
      const p = { resourceType: 'Patient', meta: { profile: [`${US}us-core-patient`] }, extension: [ext] };
      const res = await postResource(t, a.adminToken, p);
      expect(res.statusCode).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      let deep: Json = { url: 'http://example.org/x', valueString: 'v' };
      for (let i = 0; i < 100; i++) deep = { url: 'http://example.org/x', extension: [deep] };
      const d = await postResource(t, a.adminToken, { ...p, extension: [deep] });
      expect(d.statusCode).toBeGreaterThanOrEqual(400);
      expect(d.statusCode).toBeLessThan(500);
      await readWorks();
    });

    it("a heavy validation in one project does not stop another project's read", async () => {
      const id = (
        (
          await postResource(t, b.adminToken, { resourceType: 'Patient', name: [{ family: 'Concurrent' }] })
        ).json() as { id: string }
      ).id;
      const heavy = Array.from({ length: 20 }, () => validate(a.adminToken, fixture('patient-example.json')));
      const read = t.request({ method: 'GET', url: `${t.fhir}/Patient/${id}`, token: b.adminToken });
      const [r, ...done] = await Promise.all([read, ...heavy]);
      expect(r.statusCode).toBe(200);
      for (const issues of done) expect(errorsOf(issues)).toEqual([]);
    });
  });
});
