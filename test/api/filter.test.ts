// `_filter` through HTTP (API.md §11, https://hl7.org/fhir/R4/search_filter.html): and/or/not and parentheses over
// string, token, date, quantity, reference parameters and chains, combined with ordinary parameters and paging; another
// project's members, narrowly scoped tokens, malformed, huge and hostile filters.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';

type Json = Record<string, unknown>;
type Bundle = { link?: { relation: string; url: string }[]; entry?: { resource: Json }[] };
type Outcome = { resourceType: string; issue: { code: string; details?: { text: string } }[] };

const LOINC = 'http://loinc.org';
const UCUM = 'http://unitsofmeasure.org';

describe.each(testDatabases())('_filter on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  /** Names of what project A stored, by id. */
  const names = new Map<string, string>();
  const id: Record<string, string> = {};

  beforeAll(async () => {
    t = await startTestApp(database);
    a = await t.newProject();
    b = await t.newProject();
    const make = async (name: string, resource: Json, token = a.adminToken): Promise<void> => {
      const r = await created(t, token, resource);
      id[name] = r.id as string;
      names.set(r.id as string, name);
    };
    await make('peter', {
      resourceType: 'Patient',
      name: [{ given: ['Peter'], family: 'Smith' }],
      gender: 'male',
      birthDate: '2015-03-01',
      identifier: [{ system: 'http://hospital.test/mrn', value: 'm-1' }],
    });
    await make('petra', {
      resourceType: 'Patient',
      name: [{ given: ['Petra'], family: 'Jones' }],
      gender: 'female',
      birthDate: '2010-06-15',
    });
    await make('anna', {
      resourceType: 'Patient',
      name: [{ given: ['Anna'], family: 'Müller' }],
      gender: 'female',
    });
    const obs = (code: string, value: number, unit: string, subject: string): Json => ({
      resourceType: 'Observation',
      status: 'final',
      code: { coding: [{ system: LOINC, code }] },
      subject: { reference: `Patient/${subject}` },
      valueQuantity: { value, unit, system: UCUM, code: unit },
    });
    await make('obs1', obs('1234-5', 5.4, 'mg', id.peter as string));
    await make('obs2', obs('1234-5', 7, 'mg', id.petra as string));
    await make('obs3', obs('9999-9', 2, 'kg', id.anna as string));
    // Project B: a Peter too, never found by A.
    await make(
      'otherPeter',
      { resourceType: 'Patient', name: [{ given: ['Peter'], family: 'Smith' }] },
      b.adminToken,
    );
    await make('otherObs', obs('1234-5', 5.4, 'mg', id.otherPeter as string), b.adminToken);
  });
  afterAll(async () => t?.close());

  const get = (type: string, filter: string, extra = '', token = a.adminToken) =>
    t.request({
      method: 'GET',
      url: `${t.fhir}/${type}?_filter=${encodeURIComponent(filter)}${extra}`,
      token,
    });
  const found = async (type: string, filter: string, extra = '', token = a.adminToken): Promise<string[]> => {
    const res = await get(type, filter, extra, token);
    expect(res.statusCode, `${filter}: ${res.body}`).toBe(200);
    return ((res.json() as Bundle).entry ?? []).map((e) => names.get(e.resource.id as string) ?? '?').sort();
  };
  const refused = async (
    type: string,
    filter: string,
    status = 400,
    token = a.adminToken,
  ): Promise<string> => {
    const res = await get(type, filter, '', token);
    expect(res.statusCode, `${filter}: ${res.body}`).toBe(status);
    const outcome = res.json() as Outcome;
    expect(outcome.resourceType).toBe('OperationOutcome');
    return outcome.issue[0]?.details?.text ?? '';
  };

  it('matches strings: co, sw, ew, eq (case- and accent-insensitive), ne', async () => {
    expect(await found('Patient', 'name co "et"')).toEqual(['peter', 'petra']);
    expect(await found('Patient', 'given sw pet')).toEqual(['peter', 'petra']);
    expect(await found('Patient', 'family ew "LLER"')).toEqual(['anna']);
    expect(await found('Patient', 'family eq "muller"')).toEqual(['anna']);
    expect(await found('Patient', 'family eq "mull"')).toEqual([]);
    expect(await found('Patient', 'family ne "smith"')).toEqual(['anna', 'petra']);
  });

  it('combines with and, or, not and parentheses', async () => {
    expect(await found('Patient', 'given eq "peter" and birthdate ge 2014-10-10')).toEqual(['peter']);
    expect(await found('Patient', 'given eq "peter" or family eq "jones"')).toEqual(['peter', 'petra']);
    expect(await found('Patient', 'not (gender eq male)')).toEqual(['anna', 'petra']);
    expect(await found('Patient', '(name co "pet" or family eq "müller") and birthdate lt 2015')).toEqual([
      'petra',
    ]);
    expect(await found('Patient', 'name co "pet" or family eq "müller" and birthdate lt 2015')).toEqual([
      'peter',
      'petra',
    ]);
    expect(await found('Patient', 'not (not (gender eq male) and not (family eq jones))')).toEqual([
      'peter',
      'petra',
    ]);
  });

  it('matches tokens, dates, quantities, references, presence, _id and chains', async () => {
    expect(await found('Observation', `code eq ${LOINC}|1234-5`)).toEqual(['obs1', 'obs2']);
    expect(await found('Observation', `code ne ${LOINC}|1234-5`)).toEqual(['obs3']);
    expect(await found('Patient', 'identifier eq http://hospital.test/mrn|m-1')).toEqual(['peter']);
    expect(await found('Patient', 'birthdate gt 2012 and birthdate le 2015-03-01')).toEqual(['peter']);
    expect(await found('Patient', 'birthdate pr false')).toEqual(['anna']);
    expect(await found('Patient', 'birthdate pr true')).toEqual(['peter', 'petra']);
    expect(await found('Observation', 'value-quantity gt 5')).toEqual(['obs1', 'obs2']);
    expect(await found('Observation', `value-quantity lt 6|${UCUM}|mg`)).toEqual(['obs1']);
    expect(await found('Observation', `subject eq Patient/${id.petra}`)).toEqual(['obs2']);
    expect(await found('Observation', `patient.name co "pet" and value-quantity ge 6`)).toEqual(['obs2']);
    expect(await found('Observation', `subject:Patient.gender eq female`)).toEqual(['obs2', 'obs3']);
    expect(await found('Patient', `_id eq ${id.anna} or _id eq ${id.peter}`)).toEqual(['anna', 'peter']);
    expect(await found('Patient', `_id ne ${id.anna} and _lastUpdated gt 2000-01-01`)).toEqual([
      'peter',
      'petra',
    ]);
  });

  it('is AND-ed with ordinary parameters, pages, and works in POST _search and system search', async () => {
    expect(await found('Patient', 'name co "pet"', '&gender=female')).toEqual(['petra']);
    const first = await get('Patient', 'name co "pet" or family eq "müller"', '&_count=1&_sort=_id');
    expect(first.statusCode).toBe(200);
    const seen: string[] = [];
    let bundle = first.json() as Bundle;
    for (let i = 0; i < 5; i++) {
      seen.push(...(bundle.entry ?? []).map((e) => names.get(e.resource.id as string) ?? '?'));
      const next = bundle.link?.find((l) => l.relation === 'next')?.url;
      if (!next) break;
      expect(new URL(next).searchParams.get('_filter')).toBe('name co "pet" or family eq "müller"');
      const res = await t.request({
        method: 'GET',
        url: `${t.fhir}/Patient${new URL(next).search}`,
        token: a.adminToken,
      });
      expect(res.statusCode).toBe(200);
      bundle = res.json() as Bundle;
    }
    expect(seen.sort()).toEqual(['anna', 'peter', 'petra']);
    const post = await t.request({
      method: 'POST',
      url: `${t.fhir}/Patient/_search`,
      token: a.adminToken,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _filter: 'family eq "jones"' }).toString(),
    });
    expect(post.statusCode, post.body).toBe(200);
    expect(((post.json() as Bundle).entry ?? []).map((e) => e.resource.id)).toEqual([id.petra]);
    const system = await t.request({
      method: 'GET',
      url: `${t.fhir}?_type=Patient,Observation&_filter=${encodeURIComponent(`_id eq ${id.anna} or _id eq ${id.obs3}`)}`,
      token: a.adminToken,
    });
    expect(system.statusCode, system.body).toBe(200);
    expect(
      ((system.json() as Bundle).entry ?? []).map((e) => names.get(e.resource.id as string)).sort(),
    ).toEqual(['anna', 'obs3']);
  });

  it('refuses unknown parameters and unsupported or misapplied operators, naming them', async () => {
    expect(await refused('Patient', 'nope eq 1')).toContain("'nope'");
    expect(await refused('Patient', 'name in http://acme.test/vs')).toContain("'in'");
    expect(await refused('Patient', 'name ss x')).toContain("'ss'");
    expect(await refused('Patient', 'name gt "x"')).toContain("'gt'");
    expect(await refused('Patient', 'related[type eq x].target pr true')).toContain('filtered paths');
    expect(await refused('Patient', 'name eq "unterminated')).toContain('unterminated');
    expect(await refused('Patient', 'name eq x and')).toContain('expected');
    expect(await refused('Patient', 'birthdate eq "not a date"')).toContain('date');
    const many = Array.from({ length: 13 }, (_, i) => `family eq "f${i}"`).join(' or ');
    expect(await refused('Patient', many)).toContain('too costly');
    // A conditional create does not take _filter: it is an unknown parameter there.
    const cond = await t.request({
      method: 'POST',
      url: `${t.fhir}/Patient`,
      token: a.adminToken,
      headers: { 'if-none-exist': `_filter=${encodeURIComponent('family eq "jones"')}` },
      payload: { resourceType: 'Patient' },
    });
    expect(cond.statusCode, cond.body).toBe(400);
  });

  it('answers deep, huge and injected filters with a 4xx, the database untouched', async () => {
    expect(await refused('Patient', '('.repeat(10_000))).toContain('characters');
    expect(await refused('Patient', `${'('.repeat(1000)}name eq x${')'.repeat(1000)}`)).toContain('nested');
    const huge = await t.request({
      method: 'POST',
      url: `${t.fhir}/Patient/_search`,
      token: a.adminToken,
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ _filter: `name eq "${'x'.repeat(100_000)}"` }).toString(),
    });
    expect(huge.statusCode).toBe(400);
    expect((huge.json() as Outcome).resourceType).toBe('OperationOutcome');
    expect(await found('Patient', `name eq "'; drop table resources; --"`)).toEqual([]);
    expect(await refused('Patient', `name eq '; drop table resources; --`)).toContain('expected');
    expect(await found('Patient', `family eq "x\\" or 1=1 --"`)).toEqual([]);
    expect(await found('Patient', 'given eq "peter"')).toEqual(['peter']);
  });

  it("never finds another project's resources, through chains neither", async () => {
    expect(await found('Patient', 'given eq "peter"', '', b.adminToken)).toEqual(['otherPeter']);
    expect(await found('Patient', 'given eq "peter"', '', b.memberToken)).toEqual(['otherPeter']);
    expect(await found('Observation', 'patient.given eq "petra"', '', b.adminToken)).toEqual([]);
    expect(await found('Patient', `_id eq ${id.peter}`, '', b.adminToken)).toEqual([]);
    expect(await found('Observation', `subject eq Patient/${id.peter}`, '', b.adminToken)).toEqual([]);
  });

  it('a scoped token cannot reach a type it may not read through a filter', async () => {
    const token = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Observation.rs');
    expect(await found('Observation', `code eq ${LOINC}|1234-5`, '', token)).toEqual(['obs1', 'obs2']);
    expect(await refused('Observation', 'patient.name co "pet"', 403, token)).toContain('Patient');
    expect(
      await refused('Observation', 'code eq x or not (subject:Patient.gender eq male)', 403, token),
    ).toContain('Patient');
    expect(await refused('Patient', 'name co "pet"', 403, token)).toContain('Patient');
  });
});
