// The shared, read-only conformance set through HTTP (API.md §9, issue 27 point 1): searches of conformance types return
// the project's own and the shared ones, reads by id, 403 on writes, packages from a folder and a `.tgz`, isolation
// between projects, scopes, and searches that match thousands.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, startTestApp, scopedClientToken, type TestApp } from '../support/app.js';
import { US_CORE_VERSION, writePackageFolder, writePackageTgz } from '../support/fhir-package.js';

const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';
const US_CORE_PATIENT = 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient';

type Bundle = {
  resourceType: string;
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: { fullUrl?: string; resource: Record<string, unknown>; search?: { mode: string } }[];
};
type Outcome = { resourceType: string; issue: { severity: string; code: string }[] };

describe.each(testDatabases())('shared conformance on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  beforeAll(async () => {
    t = await startTestApp(database);
    a = await t.newProject('Shared A');
    b = await t.newProject('Shared B');
  });
  afterAll(async () => t?.close());

  const get = (path: string, token: string) => t.request({ method: 'GET', url: `${t.fhir}/${path}`, token });
  const search = async (path: string, token: string): Promise<Bundle> => {
    const res = await get(path, token);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Bundle;
  };
  const matches = (bundle: Bundle) => (bundle.entry ?? []).filter((e) => e.search?.mode === 'match');

  it('finds a shared ValueSet by url, and reads a shared CodeSystem by id', async () => {
    const found = await search(`ValueSet?url=${encodeURIComponent(GENDER_VS)}`, a.adminToken);
    expect(matches(found).map((e) => e.resource.url)).toEqual([GENDER_VS]);
    expect(found.total).toBe(1);
    expect(matches(found)[0]?.fullUrl).toBe(`${t.config.baseUrl}fhir/R4/ValueSet/administrative-gender`);
    const cs = await get('CodeSystem/administrative-gender', a.adminToken);
    expect(cs.statusCode, cs.body).toBe(200);
    expect(cs.json()).toMatchObject({
      resourceType: 'CodeSystem',
      url: 'http://hl7.org/fhir/administrative-gender',
    });
    const missing = await get('CodeSystem/no-such-code-system', a.adminToken);
    expect(missing.statusCode).toBe(404);
    expect((missing.json() as Outcome).issue[0]?.code).toBe('not-found');
  });

  it("returns a project's own ValueSet with the same url first; other projects see neither", async () => {
    const own = await created(t, a.adminToken, {
      resourceType: 'ValueSet',
      url: GENDER_VS,
      version: '9.9.9',
      status: 'draft',
      name: 'OwnGender',
    });
    const found = await search(`ValueSet?url=${encodeURIComponent(GENDER_VS)}`, a.adminToken);
    expect(matches(found).map((e) => e.resource.id)).toEqual([own.id, 'administrative-gender']);
    expect(found.total).toBe(2);
    const byName = await search('ValueSet?name=OwnGender', a.adminToken);
    expect(matches(byName).map((e) => e.resource.id)).toEqual([own.id]);
    for (const token of [b.adminToken, b.memberToken]) {
      const other = await get(`ValueSet?url=${encodeURIComponent(GENDER_VS)}`, token);
      if (other.statusCode === 200) {
        expect(matches(other.json() as Bundle).map((e) => e.resource.id)).toEqual(['administrative-gender']);
      } else expect(other.statusCode).toBe(403);
      const byId = await get(`ValueSet/${own.id as string}`, token);
      expect([403, 404]).toContain(byId.statusCode);
      const byOwnName = await get('ValueSet?name=OwnGender', token);
      if (byOwnName.statusCode === 200) expect(matches(byOwnName.json() as Bundle)).toEqual([]);
    }
    // Project B's admin does see the shared one.
    const shared = await search(`ValueSet?url=${encodeURIComponent(GENDER_VS)}`, b.adminToken);
    expect(matches(shared).map((e) => e.resource.id)).toEqual(['administrative-gender']);
  });

  it('answers 403 to PUT, PATCH and DELETE of a shared resource, and to their Bundle entries; it stays unchanged', async () => {
    const before = (await get('ValueSet/administrative-gender', a.adminToken)).body;
    const put = await t.request({
      method: 'PUT',
      url: `${t.fhir}/ValueSet/administrative-gender`,
      token: a.adminToken,
      payload: { resourceType: 'ValueSet', id: 'administrative-gender', status: 'retired' },
    });
    const patch = await t.request({
      method: 'PATCH',
      url: `${t.fhir}/ValueSet/administrative-gender`,
      token: a.adminToken,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'replace', path: '/status', value: 'retired' }]),
    });
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/ValueSet/administrative-gender`,
      token: a.adminToken,
    });
    for (const res of [put, patch, del]) {
      expect(res.statusCode, res.body).toBe(403);
      expect(res.json()).toMatchObject({
        resourceType: 'OperationOutcome',
        issue: [{ severity: 'error', code: 'forbidden' }],
      });
    }
    const superPut = await t.request({
      method: 'PUT',
      url: `${t.fhir}/CodeSystem/administrative-gender`,
      token: t.adminToken,
      payload: {
        resourceType: 'CodeSystem',
        id: 'administrative-gender',
        status: 'retired',
        content: 'complete',
      },
    });
    expect(superPut.statusCode).toBe(403);
    const batch = await t.request({
      method: 'POST',
      url: t.fhir,
      token: a.adminToken,
      payload: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            resource: { resourceType: 'ValueSet', id: 'administrative-gender', status: 'retired' },
            request: { method: 'PUT', url: 'ValueSet/administrative-gender' },
          },
          { request: { method: 'DELETE', url: 'ValueSet/administrative-gender' } },
        ],
      },
    });
    expect(batch.statusCode, batch.body).toBe(200);
    const statuses = (batch.json() as { entry: { response: { status: string } }[] }).entry.map(
      (e) => e.response.status,
    );
    expect(statuses.map((s) => s.slice(0, 3))).toEqual(['403', '403']);
    const transaction = await t.request({
      method: 'POST',
      url: t.fhir,
      token: a.adminToken,
      payload: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [{ request: { method: 'DELETE', url: 'ValueSet/administrative-gender' } }],
      },
    });
    expect(transaction.statusCode).toBe(403);
    expect((await get('ValueSet/administrative-gender', a.adminToken)).body).toBe(before);
    expect(JSON.parse(before)).toMatchObject({ status: 'active' });
  });

  it('checks access to shared ValueSets as to any other type: a Patient-only token is refused, a member reads', async () => {
    const narrow = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Patient.rs');
    const paths = [`ValueSet?url=${encodeURIComponent(GENDER_VS)}`, 'ValueSet/administrative-gender'];
    for (const path of paths) {
      const res = await get(path, narrow);
      expect(res.statusCode, `${path}: ${res.body}`).toBe(403);
      expect((res.json() as Outcome).issue[0]?.code).toBe('forbidden');
    }
    expect((await get('Patient?_count=1', narrow)).statusCode).toBe(200);
    // A member (not an admin) reads what it may read of other types (API.md §3): ValueSets are no admin type.
    for (const path of [...paths, 'Patient?_count=1'])
      expect((await get(path, a.memberToken)).statusCode).toBe(200);
    // Nor may a member write a shared one: its write is refused before anything is looked up.
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/ValueSet/administrative-gender`,
      token: a.memberToken,
    });
    expect(del.statusCode).toBe(403);
  });

  it('answers a 10 KB or malformed url with a 4xx or an empty Bundle, never a 5xx', async () => {
    const huge = `http://example.org/${'x'.repeat(10_000)}`;
    for (const q of [
      `url=${encodeURIComponent(huge)}`,
      `url=${encodeURIComponent(huge)},${encodeURIComponent(huge)}&version=1`,
      `url=${encodeURIComponent('%%%\\,|')}`,
      `url:below=${encodeURIComponent(huge)}`,
      `_cursor=s.${'A'.repeat(100)}`,
      `_cursor=s.`,
    ]) {
      const res = await get(`ValueSet?${q}`, a.adminToken);
      expect(res.statusCode, `${q.slice(0, 60)}: ${res.body.slice(0, 200)}`).toBeLessThan(500);
      if (res.statusCode === 200) expect(matches(res.json() as Bundle)).toEqual([]);
      else expect(res.statusCode).toBeGreaterThanOrEqual(400);
    }
  });

  it('pages through thousands of shared ValueSets, each seen once, while another project reads its Patient', async () => {
    const patient = await created(t, b.adminToken, { resourceType: 'Patient', name: [{ family: 'Busy' }] });
    const first = get('ValueSet?_count=1000&_total=accurate', a.adminToken);
    const read = get(`Patient/${patient.id as string}`, b.adminToken);
    const [page1, readRes] = await Promise.all([first, read]);
    expect(readRes.statusCode).toBe(200);
    expect(readRes.json()).toMatchObject({ id: patient.id });
    const seen: string[] = [];
    let bundle = page1.json() as Bundle;
    expect(page1.statusCode).toBe(200);
    const total = bundle.total as number;
    expect(total).toBeGreaterThan(1300);
    for (let pages = 0; ; pages++) {
      expect(pages).toBeLessThan(10);
      seen.push(...matches(bundle).map((e) => e.resource.id as string));
      const next = bundle.link?.find((l) => l.relation === 'next')?.url;
      if (!next) break;
      const res = await t.request({
        method: 'GET',
        url: next.replace('http://cinder.test', ''),
        token: a.adminToken,
      });
      expect(res.statusCode, res.body).toBe(200);
      bundle = res.json() as Bundle;
    }
    expect(seen.length).toBe(total);
    expect(new Set(seen).size).toBe(seen.length);
    // The previous link of the last page leads back to a page of the same search.
    const prev = bundle.link?.find((l) => l.relation === 'previous')?.url;
    expect(prev).toBeDefined();
    const back = await t.request({
      method: 'GET',
      url: (prev as string).replace('http://cinder.test', ''),
      token: a.adminToken,
    });
    expect(matches(back.json() as Bundle).length).toBe(1000);
    // Offset paging agrees.
    const offset = await search('ValueSet?_count=500&_offset=1000', a.adminToken);
    expect(matches(offset).map((e) => e.resource.id)).toEqual(seen.slice(1000, 1500));
  });

  it('loads the shared set on first use while another request is answered', async () => {
    // A second server on the same database, whose shared set nothing has used yet.
    const cold = await startTestApp(database, {}, { db: t.db });
    try {
      const patient = await created(cold, cold.adminToken, {
        resourceType: 'Patient',
        name: [{ family: 'Cold' }],
      });
      const [heavy, read] = await Promise.all([
        cold.request({ method: 'GET', url: `${cold.fhir}/ValueSet?_count=1000`, token: cold.adminToken }),
        cold.request({
          method: 'GET',
          url: `${cold.fhir}/Patient/${patient.id as string}`,
          token: cold.adminToken,
        }),
      ]);
      expect(read.statusCode).toBe(200);
      expect(read.json()).toMatchObject({ id: patient.id, name: [{ family: 'Cold' }] });
      expect(heavy.statusCode).toBe(200);
      expect(matches(heavy.json() as Bundle).length).toBe(1000);
    } finally {
      await cold.close();
    }
  });

  it('shapes shared matches with _summary and _elements, and counts them with _summary=count', async () => {
    const count = await search('CodeSystem?_summary=count', a.adminToken);
    expect(count.total).toBeGreaterThan(1000);
    expect(count.entry ?? []).toEqual([]);
    const summary = await search(
      'CodeSystem?url=http://hl7.org/fhir/administrative-gender&_summary=true',
      a.adminToken,
    );
    expect(matches(summary)[0]?.resource.concept).toBeUndefined();
    const elements = await search('CodeSystem?_id=administrative-gender&_elements=name', a.adminToken);
    expect(Object.keys(matches(elements)[0]?.resource ?? {}).sort()).toEqual([
      'id',
      'meta',
      'name',
      'resourceType',
    ]);
    const byCode = await search(
      'CodeSystem?code=female&url=http://hl7.org/fhir/administrative-gender',
      a.adminToken,
    );
    expect(matches(byCode).map((e) => e.resource.id)).toEqual(['administrative-gender']);
    const byStatus = await search('SearchParameter?code=gender&base=Patient', a.adminToken);
    expect(matches(byStatus).map((e) => e.resource.id)).toContain('individual-gender');
  });

  it("orders shared matches by _sort after the project's own, each seen once across pages", async () => {
    const names = async (q: string): Promise<string[]> => {
      const out: string[] = [];
      let url: string | undefined = `${t.fhir}/${q}`;
      while (url) {
        const res = await t.request({ method: 'GET', url, token: b.adminToken });
        expect(res.statusCode, res.body).toBe(200);
        const bundle = res.json() as Bundle;
        out.push(...matches(bundle).map((e) => String(e.resource.name)));
        url = bundle.link?.find((l) => l.relation === 'next')?.url.replace('http://cinder.test', '');
      }
      return out;
    };
    const asc = await names('SearchParameter?base=Patient&_sort=name&_count=7');
    expect(asc.length).toBeGreaterThan(20);
    const norm = (x: string) => x.toLowerCase();
    expect(asc.map(norm)).toEqual([...asc].map(norm).sort());
    const desc = await names('SearchParameter?base=Patient&_sort=-name&_count=7');
    expect(desc.map(norm)).toEqual([...asc].map(norm).reverse());
  });

  it('answers a parameter shared resources cannot be searched by with the own matches and a warning', async () => {
    const res = await search('ValueSet?_has:StructureDefinition:valueset:name=x', a.adminToken);
    const outcome = (res.entry ?? []).find((e) => e.search?.mode === 'outcome')?.resource as
      Outcome | undefined;
    expect(outcome?.issue[0]).toMatchObject({ severity: 'warning', code: 'not-supported' });
  });

  it('fails start-up naming a package that does not exist', async () => {
    await expect(
      startTestApp(database, { packages: ['/no/such/package-folder'] }, { db: t.db }),
    ).rejects.toThrow(/packages.*\/no\/such\/package-folder/);
    await expect(
      startTestApp(database, { packages: ['no-such-fhir-package-name'] }, { db: t.db }),
    ).rejects.toThrow(/no-such-fhir-package-name/);
  });

  describe.each([
    ['a package folder', writePackageFolder],
    ['a package .tgz', writePackageTgz],
  ])('with %s in packages', (_name, write) => {
    let p: TestApp;
    let token: string;
    beforeAll(async () => {
      p = await startTestApp(database, { packages: [write()] }, { db: t.db });
      token = (await p.newProject('Packages')).adminToken;
    });
    afterAll(async () => p?.close());
    const find = async (q: string): Promise<Bundle> => {
      const res = await p.request({ method: 'GET', url: `${p.fhir}/StructureDefinition?${q}`, token });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as Bundle;
    };

    it("finds US Core's StructureDefinitions by url and url + version", async () => {
      const byUrl = await find(`url=${encodeURIComponent(US_CORE_PATIENT)}`);
      expect(matches(byUrl).map((e) => [e.resource.id, e.resource.version])).toEqual([
        ['us-core-patient', US_CORE_VERSION],
      ]);
      const withVersion = await find(`url=${encodeURIComponent(US_CORE_PATIENT)}&version=${US_CORE_VERSION}`);
      expect(matches(withVersion).length).toBe(1);
      expect(matches(await find(`url=${encodeURIComponent(US_CORE_PATIENT)}&version=0.0.1`))).toEqual([]);
      const all = await find('url:below=http://hl7.org/fhir/us/core/&_count=100');
      expect(matches(all).length).toBe(8);
      // Examples and other types are not loaded.
      expect(matches(await find('url=http://example.org/x'))).toEqual([]);
      const read = await p.request({
        method: 'GET',
        url: `${p.fhir}/StructureDefinition/us-core-race`,
        token,
      });
      expect(read.statusCode).toBe(200);
      expect(read.json()).toMatchObject({
        url: 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-race',
      });
    });
  });
});
