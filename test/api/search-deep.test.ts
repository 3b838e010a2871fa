// Deeper search through HTTP (issue 14 point 7): chains of several levels with type modifiers, reverse chains
// (`_has`, nested), composite parameters (matched within one element), `_include:iterate`, `_revinclude=*` and
// `_summary`. https://hl7.org/fhir/R4/search.html
import { beforeAll, describe, expect, it } from 'vitest';
import { SEARCH_LIMITS } from '../../src/fhir/search/parse.js';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, useProjectApp } from '../support/app.js';

type Resource = { resourceType: string; id: string; [k: string]: unknown };
type Bundle = { entry?: { resource: Resource; search?: { mode: string } }[] };

const LOINC = 'http://loinc.org';
const bp = (code: string, value: number) => ({
  code: { coding: [{ system: LOINC, code }] },
  valueQuantity: { value, unit: 'mmHg', system: 'http://unitsofmeasure.org', code: 'mm[Hg]' },
});

describe.each(testDatabases())('deeper search on $name', (database) => {
  const ctx = useProjectApp(database);
  const tag = `deep${Date.now()}`;
  const id: Record<string, string> = {};

  const search = async (query: string, token = ctx.token): Promise<Bundle> => {
    const res = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/${query}`, token });
    expect(res.statusCode, `${query}: ${res.body}`).toBe(200);
    return res.json() as Bundle;
  };
  /** `Type/key` of every entry (keys as named in `id`), matches first, sorted within each mode. */
  const found = async (query: string, mode = 'match'): Promise<string[]> => {
    const names = new Map(Object.entries(id).map(([k, v]) => [v, k]));
    return ((await search(query)).entry ?? [])
      .filter((e) => (e.search?.mode ?? 'match') === mode)
      .map((e) => `${e.resource.resourceType}/${names.get(e.resource.id) ?? e.resource.id}`)
      .sort();
  };

  beforeAll(async () => {
    const entries = [
      createEntry({ resourceType: 'Organization', name: `Acme ${tag}` }, 'urn:uuid:orgA'),
      createEntry({ resourceType: 'Organization', name: `Beta ${tag}` }, 'urn:uuid:orgB'),
      createEntry({ resourceType: 'Practitioner', name: [{ family: `Jones${tag}` }] }, 'urn:uuid:dr1'),
      createEntry(
        {
          resourceType: 'PractitionerRole',
          practitioner: { reference: 'urn:uuid:dr1' },
          organization: { reference: 'urn:uuid:orgA' },
        },
        'urn:uuid:role1',
      ),
      createEntry(
        {
          resourceType: 'Patient',
          text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Deep One</div>' },
          name: [{ family: `Deep${tag}`, given: ['One'] }],
          maritalStatus: { text: 'married' },
          contact: [{ name: { family: 'Kin' }, gender: 'female' }],
          generalPractitioner: [{ reference: 'urn:uuid:role1' }],
          managingOrganization: { reference: 'urn:uuid:orgB' },
        },
        'urn:uuid:p1',
      ),
      createEntry(
        {
          resourceType: 'Patient',
          name: [{ family: `Deep${tag}`, given: ['Two'] }],
          generalPractitioner: [{ reference: 'urn:uuid:dr1' }],
        },
        'urn:uuid:p2',
      ),
      createEntry(
        { resourceType: 'Patient', name: [{ family: `Deep${tag}`, given: ['Three'] }] },
        'urn:uuid:p3',
      ),
      createEntry(
        {
          resourceType: 'Observation',
          status: 'final',
          subject: { reference: 'urn:uuid:p1' },
          ...bp('8480-6', 120),
        },
        'urn:uuid:o1',
      ),
      createEntry(
        {
          resourceType: 'Observation',
          status: 'final',
          subject: { reference: 'urn:uuid:p2' },
          ...bp('8480-6', 90),
        },
        'urn:uuid:o2',
      ),
      createEntry(
        {
          resourceType: 'Observation',
          status: 'final',
          subject: { reference: 'urn:uuid:p3' },
          code: { coding: [{ system: LOINC, code: '85354-9' }] },
          component: [bp('8480-6', 150), bp('8462-4', 95)],
        },
        'urn:uuid:o3',
      ),
    ];
    const res = await postBundle(ctx.t, ctx.token, 'transaction', entries);
    expect(res.statusCode, res.body).toBe(200);
    const out = res.json() as { entry: { response: { location: string } }[] };
    entries.forEach((e, i) => {
      const key = String(e.fullUrl).slice('urn:uuid:'.length);
      id[key] = (out.entry[i]?.response.location ?? '').split('/')[1] as string;
    });
  });

  it('follows chains of several levels with type modifiers', async () => {
    expect(
      await found(`Patient?general-practitioner:PractitionerRole.organization.name=Acme ${tag}`),
    ).toEqual(['Patient/p1']);
    expect(
      await found(
        `Observation?subject:Patient.general-practitioner:PractitionerRole.organization.name=Acme ${tag}`,
      ),
    ).toEqual(['Observation/o1']);
    expect(await found(`Observation?subject:Patient.organization.name=Beta ${tag}`)).toEqual([
      'Observation/o1',
    ]);
    expect(await found(`Patient?general-practitioner:Practitioner.name=Jones${tag}`)).toEqual(['Patient/p2']);
    // One level more than the limit is refused, with the limit named.
    const tooDeep = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Observation?subject:Patient.general-practitioner:PractitionerRole.organization.partof.name=x`,
      token: ctx.token,
    });
    expect(tooDeep.statusCode).toBe(400);
    expect(tooDeep.json().issue[0].details.text).toContain(`at most ${SEARCH_LIMITS.chainDepth} levels`);
  });

  it('answers reverse chains (_has), nested, and only within the project', async () => {
    expect(await found(`Patient?family=Deep${tag}&_has:Observation:patient:code=${LOINC}|8480-6`)).toEqual([
      'Patient/p1',
      'Patient/p2',
    ]);
    expect(await found(`Patient?_has:Observation:subject:value-quantity=gt100&family=Deep${tag}`)).toEqual([
      'Patient/p1',
    ]);
    // Organizations that a PractitionerRole names, whose role a Patient called Deep/One names as GP.
    expect(
      await found(
        `Organization?_has:PractitionerRole:organization:_has:Patient:general-practitioner:given=One`,
      ),
    ).toEqual(['Organization/orgA']);
    // _has with a chain at its end.
    expect(
      await found(`Practitioner?_has:PractitionerRole:practitioner:organization.name=Acme ${tag}`),
    ).toEqual(['Practitioner/dr1']);
    // Another project's Observation naming this project's Patient id does not count.
    const other = (await ctx.t.newProject()).adminToken;
    const res = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Observation`,
      token: other,
      payload: {
        resourceType: 'Observation',
        status: 'final',
        subject: { reference: `Patient/${id.p3}` },
        ...bp('999-9', 1),
      },
    });
    expect(res.statusCode).toBe(201);
    expect(await found(`Patient?_has:Observation:patient:code=999-9`)).toEqual([]);
    // The referring type must be readable: a member may search Users but not read Logins.
    const member = (await ctx.t.newProject()).memberToken;
    for (const q of ['User?_has:Login:user:_id=x', 'ProjectMembership?user:User._has:Login:user:_id=x']) {
      const res = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/${q}`, token: member });
      expect(res.statusCode, q).toBe(403);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    // Malformed forms are 400 with an OperationOutcome.
    for (const q of ['_has:Observation:code:code=x', '_has:Nope:patient:code=x', '_has:Observation=x']) {
      const bad = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/Patient?${q}`, token: ctx.token });
      expect(bad.statusCode, q).toBe(400);
      expect(bad.json().resourceType).toBe('OperationOutcome');
    }
  });

  it('matches composite parameters within one element', async () => {
    expect(await found(`Observation?code-value-quantity=${LOINC}|8480-6$gt100`)).toEqual(['Observation/o1']);
    expect(await found(`Observation?code-value-quantity=8480-6$lt100,8480-6$gt110`)).toEqual([
      'Observation/o1',
      'Observation/o2',
    ]);
    expect(await found(`Observation?component-code-value-quantity=${LOINC}|8480-6$gt140`)).toEqual([
      'Observation/o3',
    ]);
    // 150 belongs to the systolic component, not to 8462-4: no match.
    expect(await found(`Observation?component-code-value-quantity=${LOINC}|8462-4$gt140`)).toEqual([]);
    expect(await found(`Observation?component-code-value-quantity=${LOINC}|8462-4$95`)).toEqual([
      'Observation/o3',
    ]);
    // combo-: the Observation's own code and value, or a component's.
    expect(await found(`Observation?combo-code-value-quantity=8480-6$gt100`)).toEqual([
      'Observation/o1',
      'Observation/o3',
    ]);
    const bad = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Observation?code-value-quantity=8480-6`,
      token: ctx.token,
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().issue[0].details.text).toContain("separated by '$'");
  });

  it('iterates _include and revincludes every referring resource with *', async () => {
    const q = `Observation?_id=${id.o1}&_include=Observation:subject&_include:iterate=Patient:general-practitioner&_include:iterate=PractitionerRole:organization`;
    expect(await found(q, 'include')).toEqual(['Organization/orgA', 'Patient/p1', 'PractitionerRole/role1']);
    // Without :iterate the second level is not followed.
    expect(
      await found(
        `Observation?_id=${id.o1}&_include=Observation:subject&_include=Patient:general-practitioner`,
        'include',
      ),
    ).toEqual(['Patient/p1']);
    expect(await found(`Patient?_id=${id.p1}&_revinclude=*`, 'include')).toEqual(['Observation/o1']);
    expect(await found(`Organization?_id=${id.orgA}&_revinclude=*`, 'include')).toEqual([
      'PractitionerRole/role1',
    ]);
    expect(
      await found(
        `Organization?_id=${id.orgA}&_revinclude=*&_revinclude:iterate=Patient:general-practitioner`,
        'include',
      ),
    ).toEqual(['Patient/p1', 'PractitionerRole/role1']);
  });

  it('ignores unknown parameters under Prefer: handling=lenient, and names them', async () => {
    const url = `${ctx.t.fhir}/Patient?family=Deep${tag}&given=One&bogus=1`;
    const strict = await ctx.t.request({ method: 'GET', url, token: ctx.token });
    expect(strict.statusCode).toBe(400);
    expect(strict.json().issue[0].details.text).toContain("Unknown search parameter 'bogus'");
    const res = await ctx.t.request({
      method: 'GET',
      url,
      token: ctx.token,
      headers: { prefer: 'handling=lenient' },
    });
    expect(res.statusCode).toBe(200);
    const bundle = res.json() as Bundle & { link: { relation: string; url: string }[] };
    const entries = bundle.entry ?? [];
    expect(entries.filter((e) => e.search?.mode === 'match').map((e) => e.resource.id)).toEqual([id.p1]);
    const outcome = entries.find((e) => e.search?.mode === 'outcome')?.resource as unknown as {
      issue: { severity: string; expression: string[] }[];
    };
    expect(outcome.issue).toEqual([expect.objectContaining({ severity: 'warning', expression: ['bogus'] })]);
    const self = new URL(bundle.link.find((l) => l.relation === 'self')?.url as string);
    expect(self.searchParams.has('bogus')).toBe(false);
    expect(self.searchParams.get('given')).toBe('One');
  });

  it('applies _summary', async () => {
    const one = async (summary: string): Promise<Resource> =>
      (await search(`Patient?_id=${id.p1}&_summary=${summary}`)).entry?.[0]?.resource as Resource;
    const subsetted = (r: Resource): boolean =>
      ((r.meta as { tag?: { code: string }[] }).tag ?? []).some((t) => t.code === 'SUBSETTED');
    const summary = await one('true');
    expect(summary.name).toBeDefined();
    expect(summary.managingOrganization).toBeDefined();
    expect(summary.generalPractitioner).toBeUndefined();
    expect(summary.maritalStatus).toBeUndefined();
    expect(summary.text).toBeUndefined();
    // Patient.contact is not a summary element.
    expect(summary.contact).toBeUndefined();
    expect(subsetted(summary)).toBe(true);
    const text = await one('text');
    expect(Object.keys(text).sort()).toEqual(['id', 'meta', 'resourceType', 'text']);
    const data = await one('data');
    expect(data.text).toBeUndefined();
    expect(data.maritalStatus).toEqual({ text: 'married' });
    expect(subsetted(data)).toBe(true);
    const full = await one('false');
    expect(full.text).toBeDefined();
    expect(subsetted(full)).toBe(false);
    // A read takes _summary and _elements too.
    const read = async (q: string): Promise<Resource> => {
      const res = await ctx.t.request({
        method: 'GET',
        url: `${ctx.t.fhir}/Patient/${id.p1}?${q}`,
        token: ctx.token,
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as Resource;
    };
    const readSummary = await read('_summary=true');
    expect(readSummary.maritalStatus).toBeUndefined();
    expect(subsetted(readSummary)).toBe(true);
    expect(Object.keys(await read('_elements=gender')).sort()).toEqual(['id', 'meta', 'resourceType']);
    expect((await read('_summary=false')).maritalStatus).toBeDefined();
    const vread = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient/${id.p1}/_history/1?_summary=data`,
      token: ctx.token,
    });
    expect(vread.json().text).toBeUndefined();
    const bad = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient/${id.p1}?_summary=nope`,
      token: ctx.token,
    });
    expect(bad.statusCode).toBe(400);
    // Observation: status and code are summary, component is too; a backbone element keeps its summary parts.
    const obs = (await search(`Observation?_id=${id.o3}&_summary=true`)).entry?.[0]?.resource as Resource;
    expect(obs.status).toBe('final');
    expect((obs.component as unknown[]).length).toBe(2);
  });
});
