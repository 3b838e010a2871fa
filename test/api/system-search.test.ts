// System-level search through HTTP (API.md §11, https://hl7.org/fhir/R4/http.html#search): `GET {fhir}?_type=…` and
// `POST {fhir}/_search`: several types in one searchset, paging, sort, totals, includes, `_filter`; parameters that
// not every listed type has; another project's members, narrowly scoped tokens, hostile input; the audit trail.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { resourceTypes } from '../../src/fhir/search/model.js';
import { auditEvents, created, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';

type Json = Record<string, unknown>;
type Bundle = {
  resourceType: string;
  total?: number;
  link?: { relation: string; url: string }[];
  entry?: { fullUrl: string; resource: Json; search?: { mode: string } }[];
};
type Outcome = { resourceType: string; issue: { code: string; details?: { text: string } }[] };

describe.each(testDatabases())('system-level search on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  const tag = `sys-${Date.now()}`;
  /** `Type/id` of what project A stored, by name. */
  const ref: Record<string, string> = {};
  let otherPatient = '';

  beforeAll(async () => {
    t = await startTestApp(database);
    a = await t.newProject();
    b = await t.newProject();
    const meta = { tag: [{ system: 'http://acme.test/tags', code: tag }] };
    const make = async (name: string, token: string, resource: Json): Promise<string> => {
      const r = await created(t, token, resource);
      const key = `${r.resourceType as string}/${r.id as string}`;
      ref[name] = key;
      return key;
    };
    await make('pat1', a.adminToken, { resourceType: 'Patient', meta, name: [{ family: 'Alpha' }] });
    await make('pat2', a.adminToken, { resourceType: 'Patient', meta, name: [{ family: 'Beta' }] });
    await make('prac', a.adminToken, { resourceType: 'Practitioner', meta, name: [{ family: 'Alpha' }] });
    await make('obs', a.adminToken, {
      resourceType: 'Observation',
      meta,
      status: 'final',
      code: { text: 'x' },
      subject: { reference: ref.pat1 },
    });
    await make('org', a.adminToken, { resourceType: 'Organization', name: 'Untagged' });
    // Project B has a resource with the same tag and family name: never seen by A.
    otherPatient = await make('other', b.adminToken, {
      resourceType: 'Patient',
      meta,
      name: [{ family: 'Alpha' }],
    });
    delete ref.other;
  });
  afterAll(async () => t?.close());

  const get = (query: string, token = a.adminToken) =>
    t.request({ method: 'GET', url: `${t.fhir}${query}`, token });
  const refs = (bundle: Bundle, mode = 'match'): string[] =>
    (bundle.entry ?? [])
      .filter((e) => e.search?.mode === mode)
      .map((e) => `${e.resource.resourceType as string}/${e.resource.id as string}`);
  const search = async (query: string, token = a.adminToken): Promise<Bundle> => {
    const res = await get(query, token);
    expect(res.statusCode, `${query}: ${res.body}`).toBe(200);
    const bundle = res.json() as Bundle;
    expect(bundle.resourceType).toBe('Bundle');
    return bundle;
  };
  const refused = async (query: string, status: number, token = a.adminToken): Promise<string> => {
    const res = await get(query, token);
    expect(res.statusCode, `${query}: ${res.body}`).toBe(status);
    const outcome = res.json() as Outcome;
    expect(outcome.resourceType).toBe('OperationOutcome');
    return outcome.issue[0]?.details?.text ?? '';
  };

  it('searches the listed types at once, in _lastUpdated order, with fullUrls of each type', async () => {
    const bundle = await search(`?_type=Patient,Practitioner&_tag=${tag}`);
    expect(refs(bundle)).toEqual([ref.pat1, ref.pat2, ref.prac]);
    for (const e of bundle.entry ?? [])
      expect(new URL(e.fullUrl).pathname).toBe(
        `${t.fhir}/${e.resource.resourceType as string}/${e.resource.id as string}`,
      );
    expect(bundle.total).toBe(3);
    // Trailing slash alike; a type-specific parameter both types define.
    expect(refs(await search(`/?_type=Patient,Practitioner&family=Alpha`))).toEqual([ref.pat1, ref.prac]);
    expect(refs(await search(`?_type=Practitioner&_tag=${tag}`))).toEqual([ref.prac]);
  });

  it('sorts by _lastUpdated descending and by _id', async () => {
    const desc = refs(
      await search(`?_type=Patient,Practitioner,Observation&_tag=${tag}&_sort=-_lastUpdated`),
    );
    expect(desc).toEqual([ref.obs, ref.prac, ref.pat2, ref.pat1]);
    const byId = refs(await search(`?_type=Patient,Practitioner,Observation&_tag=${tag}&_sort=_id`));
    const ids = byId.map((r) => r.split('/')[1] as string);
    expect(ids).toEqual([...ids].sort());
    expect(new Set(byId)).toEqual(new Set(desc));
  });

  it('pages with next links (cursor and offset) that visit every match once', async () => {
    const seen: string[] = [];
    let url: string | undefined = `?_type=Patient,Practitioner,Observation&_tag=${tag}&_count=1`;
    for (let i = 0; url && i < 10; i++) {
      const bundle = await search(url);
      seen.push(...refs(bundle));
      const next = bundle.link?.find((l) => l.relation === 'next')?.url;
      url = next ? new URL(next).search : undefined;
    }
    expect(seen).toEqual([ref.pat1, ref.pat2, ref.prac, ref.obs]);
    const offset = await search(`?_type=Patient,Practitioner,Observation&_tag=${tag}&_count=2&_offset=2`);
    expect(refs(offset)).toEqual([ref.prac, ref.obs]);
  });

  it('answers _summary=count and _total=accurate', async () => {
    const count = await search(`?_type=Patient,Observation&_tag=${tag}&_summary=count`);
    expect(count.total).toBe(3);
    expect(count.entry ?? []).toEqual([]);
    const total = await search(`?_type=Patient,Observation&_tag=${tag}&_total=accurate&_count=1`);
    expect(total.total).toBe(3);
    expect(refs(total)).toHaveLength(1);
  });

  it('includes referenced resources of the matches', async () => {
    const bundle = await search(`?_type=Observation,Practitioner&_tag=${tag}&_include=Observation:subject`);
    expect(refs(bundle)).toEqual([ref.prac, ref.obs]);
    expect(refs(bundle, 'include')).toEqual([ref.pat1]);
  });

  it('reverse chains over several types match the referenced type, not just the id', async () => {
    const same = `same-${Date.now()}`;
    for (const type of ['Patient', 'Practitioner']) {
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/${type}/${same}`,
        token: a.adminToken,
        payload: { resourceType: type, id: same },
      });
      expect(put.statusCode, put.body).toBe(201);
    }
    await created(t, a.adminToken, {
      resourceType: 'Observation',
      status: 'amended',
      code: { text: 'y' },
      performer: [{ reference: `Practitioner/${same}` }],
    });
    const bundle = await search('?_type=Patient,Practitioner&_has:Observation:performer:status=amended');
    expect(refs(bundle)).toEqual([`Practitioner/${same}`]);
  });

  it('takes POST {fhir}/_search with a form body', async () => {
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/_search`,
      token: a.adminToken,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _type: 'Patient,Practitioner', family: 'Alpha' }).toString(),
    });
    expect(res.statusCode, res.body).toBe(200);
    const bundle = res.json() as Bundle;
    expect(refs(bundle)).toEqual([ref.pat1, ref.prac]);
    expect(bundle.link?.find((l) => l.relation === 'self')?.url).toContain('family=Alpha');
  });

  it('without _type searches every type the caller may read, with the common parameters only', async () => {
    expect(refs(await search(`?_tag=${tag}`))).toEqual([ref.pat1, ref.pat2, ref.prac, ref.obs]);
    expect(refs(await search(`?_id=${ref.org?.split('/')[1]}`))).toEqual([ref.org]);
    // Full text over every type (`_text` leaves out the types without a narrative).
    expect(refs(await search('?_content=alpha'))).toEqual([ref.pat1, ref.prac]);
    expect(refs(await search('?_type=Patient,Observation&_content=alpha'))).toEqual([ref.pat1]);
    expect(refs(await search('?_text=alpha'))).toEqual([]);
    const f = encodeURIComponent('_content eq alpha and not (_id eq x)');
    expect(refs(await search(`?_filter=${f}`))).toEqual([ref.pat1, ref.prac]);
    const text = await refused('?family=Alpha', 400);
    expect(text).toContain('family');
    expect(text).toContain('_type');
  });

  it('takes _filter across the listed types', async () => {
    const f = encodeURIComponent('family eq "alpha" or family sw "bet"');
    expect(refs(await search(`?_type=Patient,Practitioner&_filter=${f}`))).toEqual([
      ref.pat1,
      ref.pat2,
      ref.prac,
    ]);
    const g = encodeURIComponent(`_tag eq http://acme.test/tags|${tag} and not (_type eq x)`);
    expect((await get(`?_type=Patient&_filter=${g}`)).statusCode).toBe(400);
  });

  it('refuses a parameter that one of the listed types does not define, naming it and the type', async () => {
    const text = await refused('?_type=Patient,Observation&family=Alpha', 400);
    expect(text).toContain("'family'");
    expect(text).toContain('Observation');
    expect(await refused('?_type=Patient,Nope', 400)).toContain('Nope');
    expect(await refused('?_type=Patient,AuditEvent', 400)).toContain('AuditEvent');
    expect(await refused('?_type=,', 400)).toContain('_type');
    expect(await refused('?_type=Patient,Observation&_sort=family', 400)).toContain('family');
    // Repeated names collapse; more than 50 distinct types are refused.
    expect((await get(`?_type=${'Patient,'.repeat(200)}Practitioner&_count=1`)).statusCode).toBe(200);
    const types = [...resourceTypes()].filter((x) => x !== 'AuditEvent').slice(0, 60);
    expect(await refused(`?_type=${types.join(',')}`, 400)).toContain('at most');
  });

  it("never shows another project's resources", async () => {
    expect(refs(await search(`?_tag=${tag}`, b.adminToken))).toEqual([otherPatient]);
    expect(refs(await search(`?_type=Patient&_id=${otherPatient.split('/')[1]}`))).toEqual([]);
    expect(refs(await search(`?_id=${otherPatient.split('/')[1]}`))).toEqual([]);
    expect(refs(await search(`?_type=Patient,Practitioner&family=Alpha`, b.memberToken))).toEqual([
      otherPatient,
    ]);
    // Its chains and includes stay in the caller's project too.
    const chained = await search(`?_type=Observation&subject:Patient.family=Alpha`, b.adminToken);
    expect(refs(chained)).toEqual([]);
  });

  it('a scoped token: named types it cannot search are refused, unnamed ones left out', async () => {
    const token = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Patient.rs');
    expect(await refused('?_type=Patient,Observation', 403, token)).toContain('Observation');
    expect(refs(await search(`?_type=Patient&_tag=${tag}`, token))).toEqual([ref.pat1, ref.pat2]);
    expect(refs(await search(`?_tag=${tag}`, token))).toEqual([ref.pat1, ref.pat2]);
    // A chain into a type it cannot read is refused.
    expect((await get(`?_type=Patient&_has:Observation:subject:status=final`, token)).statusCode).toBe(403);
    // A member (not admin) does not find other memberships or ClientApplications without _type.
    const member = refs(await search('?_count=1000', a.memberToken));
    expect(member.filter((r) => r.startsWith('ClientApplication/'))).toEqual([]);
    expect(member.filter((r) => r.startsWith('ProjectMembership/')).length).toBeLessThanOrEqual(1);
    expect(await refused('?_type=ClientApplication', 403, a.memberToken)).toContain('ClientApplication');
    // A token that may search no type in the resources table (the audit trail is searched elsewhere) gets a 403.
    const auditOnly = await scopedClientToken(t, a.adminToken, a.projectId, 'system/AuditEvent.rs');
    expect(await refused(`?_tag=${tag}`, 403, auditOnly)).toContain('no resource type');
  });

  it('answers hostile input with a 4xx OperationOutcome', async () => {
    const huge = await get(`?_type=${'Patient,Nope'.repeat(10_000)}`);
    expect(huge.statusCode).toBeGreaterThanOrEqual(400);
    expect(huge.statusCode).toBeLessThan(500);
    await refused(`?_type=Patient&_filter=${encodeURIComponent('('.repeat(10_000))}`, 400);
    await refused(`?_filter=${encodeURIComponent('x'.repeat(100_000))}`, 400);
    const injection = await get(
      `?_type=Patient&_filter=${encodeURIComponent(`_id eq "'; drop table resources; --" or family eq "x'); --"`)}`,
    );
    expect(injection.statusCode, injection.body).toBe(200);
    expect(refs(injection.json() as Bundle)).toEqual([]);
    // The table is still there.
    expect(refs(await search(`?_type=Patient&_tag=${tag}`))).toEqual([ref.pat1, ref.pat2]);
    // A JSON body instead of a form: values that are not text are refused, at system and type level.
    for (const url of [`${t.fhir}/_search`, `${t.fhir}/Patient/_search`]) {
      for (const payload of [{ _type: { a: 1 } }, { _filter: ['name eq x', { y: 1 }] }, { _id: null }]) {
        const res = await t.request({
          method: 'POST',
          url,
          token: a.adminToken,
          headers: { 'content-type': 'application/fhir+json' },
          payload: JSON.stringify(payload),
        });
        expect(res.statusCode, `${url} ${JSON.stringify(payload)}: ${res.body}`).toBe(400);
        expect((res.json() as Outcome).resourceType).toBe('OperationOutcome');
      }
    }
    await refused('?_type=Patient&_cursor=garbage', 400);
    await refused('?_type=Patient&_count=abc', 400);
  });

  it('is recorded in the audit trail as a search, GET and POST alike', async () => {
    const recorded = async (query: string): Promise<void> => {
      const b64 = Buffer.from(query).toString('base64');
      const has = (events: Json[]): boolean =>
        events.some((x) => ((x.entity ?? []) as { query?: string }[]).some((en) => en.query === b64));
      expect(has(await auditEvents(t, a.adminToken, 'subtype=search&_count=200', has)), query).toBe(true);
    };
    const q = `_type=Patient,Practitioner&_tag=${tag}&_count=7`;
    expect((await get(`?${q}`)).statusCode).toBe(200);
    await recorded(q);
    const form = `_type=Patient&_tag=${tag}&_count=9`;
    const post = await t.request({
      method: 'POST',
      url: `${t.fhir}/_search`,
      token: a.adminToken,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: form,
    });
    expect(post.statusCode).toBe(200);
    await recorded(form);
  });

  it('is listed in the CapabilityStatement', async () => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/metadata` });
    const rest = (
      res.json() as { rest: { interaction: { code: string }[]; searchParam: { name: string }[] }[] }
    ).rest[0];
    expect(rest?.interaction.map((i) => i.code)).toContain('search-system');
    expect(rest?.searchParam.map((p) => p.name)).toEqual(
      expect.arrayContaining([
        '_id',
        '_lastUpdated',
        '_tag',
        '_profile',
        '_security',
        '_source',
        '_text',
        '_content',
        '_filter',
      ]),
    );
  });
});
