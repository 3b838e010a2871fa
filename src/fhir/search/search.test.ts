// End-to-end search on each test database: index rows written by writeIndex, SQL from parse + sql, executeSearch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db } from '../../storage/db.js';
import { FhirError } from '../outcome.js';
import type { AccessScope, Resource } from '../types.js';
import { applyElements } from './elements.js';
import { executeSearch, type SearchResult } from './execute.js';
import { deleteIndex, reindexResources, writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';

const ALL: AccessScope = { projectId: null };
const P1: AccessScope = { projectId: 'p1' };

let clock = Date.parse('2024-01-01T00:00:00Z');

/** Inserts current versions with plain SQL and indexes them; last_updated increases by 1 s per resource. */
async function insert(db: Db, resources: Resource[], projectId = 'p1'): Promise<number[]> {
  const rows = resources.map((r) => ({
    resource_type: r.resourceType,
    id: r.id,
    project_id: projectId,
    last_updated: new Date((clock += 1000)).toISOString(),
    content: r,
  }));
  return db.transaction(async (tx) => {
    const res = await tx.query<{ rid: number; resource_type: string; id: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, x.project_id, 1, x.last_updated, false, x.content
       FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, project_id text, last_updated timestamptz, content jsonb)
       RETURNING rid, resource_type, id`,
      [JSON.stringify(rows)],
    );
    const byKey = new Map(res.rows.map((r) => [`${r.resource_type}/${r.id}`, Number(r.rid)]));
    const rids = resources.map((r) => byKey.get(`${r.resourceType}/${r.id}`) as number);
    await writeIndex(
      tx,
      resources.map((resource, i) => ({ rid: rids[i] as number, resource })),
    );
    return rids;
  });
}

async function search(
  db: Db,
  type: string,
  query: Record<string, string | string[]>,
  scope: AccessScope = ALL,
): Promise<SearchResult> {
  return executeSearch(db, parseSearchRequest(type, query), scope);
}

async function ids(
  db: Db,
  type: string,
  query: Record<string, string | string[]>,
  scope = ALL,
): Promise<string[]> {
  const r = await search(db, type, { _count: '1000', ...query }, scope);
  return r.matches.map((m) => m.id).sort();
}

function expectFhirError(fn: () => unknown, code: string): void {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    expect((err as FhirError).status).toBe(400);
    expect((err as FhirError).code).toBe(code);
    return;
  }
  throw new Error(`expected FhirError ${code}`);
}

const patients: Resource[] = [
  {
    resourceType: 'Patient',
    id: 'p-smith',
    active: true,
    gender: 'male',
    birthDate: '1970-05-17',
    name: [{ family: 'Smith', given: ['John', 'Quincy'] }],
    identifier: [{ system: 'http://hospital/mrn', value: 'MRN-1', type: { text: 'Medical record number' } }],
    telecom: [
      { system: 'phone', value: '555-1234' },
      { system: 'email', value: 'john@example.com' },
    ],
    address: [{ line: ['1 Main St'], city: 'Springfield', state: 'IL', postalCode: '62701', country: 'USA' }],
    managingOrganization: { reference: 'Organization/org1' },
    generalPractitioner: [{ reference: 'http://other.example/fhir/Practitioner/dr1' }],
    meta: {
      tag: [{ system: 'http://tags', code: 'vip' }],
      profile: ['http://example.org/StructureDefinition/p'],
    },
  },
  {
    resourceType: 'Patient',
    id: 'p-zoe',
    active: false,
    gender: 'female',
    birthDate: '1985',
    name: [{ family: 'Müller', given: ['Zoë'], text: 'Zoë Müller' }],
    identifier: [{ system: 'http://hospital/mrn', value: 'MRN-2' }, { value: 'NOSYS' }],
    managingOrganization: { reference: 'urn:uuid:6f1c2a30-0000-4000-8000-000000000001' },
  },
  {
    resourceType: 'Patient',
    id: 'p-smithers',
    gender: 'other',
    birthDate: '1990-01-01',
    name: [{ family: 'Smithers', given: ['Waylon'] }],
    deceasedDateTime: '2020-03-04T10:00:00Z',
    managingOrganization: { reference: 'Organization/org2' },
  },
  {
    resourceType: 'Patient',
    id: 'p-meta',
    name: [{ family: "O'Brien_100%\\x;--" }],
    identifier: [{ system: "sys'%_\\;--", value: "v'%_\\;--" }],
  },
];

const others: Resource[] = [
  { resourceType: 'Organization', id: 'org1', name: 'Acme Health', active: true },
  { resourceType: 'Organization', id: 'org2', name: 'Beta Clinic' },
  { resourceType: 'Practitioner', id: 'dr1', name: [{ family: 'House' }] },
  {
    resourceType: 'Observation',
    id: 'obs1',
    status: 'final',
    code: {
      coding: [{ system: 'http://loinc.org', code: '29463-7', display: 'Body Weight' }],
      text: 'Weight',
    },
    subject: { reference: 'Patient/p-smith' },
    effectiveDateTime: '2021-06-15T08:30:00Z',
    valueQuantity: { value: 72.5, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
  },
  {
    resourceType: 'Observation',
    id: 'obs2',
    status: 'preliminary',
    code: { coding: [{ system: 'http://loinc.org', code: '8302-2', display: 'Body height' }] },
    subject: { reference: 'Patient/p-zoe' },
    effectivePeriod: { start: '2021-01-01', end: '2021-01-31' },
    valueQuantity: { value: 165, unit: 'cm', system: 'http://unitsofmeasure.org', code: 'cm' },
  },
  {
    resourceType: 'Observation',
    id: 'obs3',
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code: '29463-7' }] },
    subject: { reference: 'Patient/p-smithers' },
    effectiveDateTime: '2022',
    valueQuantity: { value: 100, unit: 'kg', system: 'http://unitsofmeasure.org', code: 'kg' },
  },
  {
    resourceType: 'Encounter',
    id: 'enc-open',
    status: 'in-progress',
    class: { code: 'AMB' },
    period: { start: '2020-05-01' },
  },
  {
    resourceType: 'RiskAssessment',
    id: 'risk1',
    subject: { reference: 'Patient/p-smith' },
    prediction: [{ probabilityDecimal: 0.25 }, { probabilityDecimal: 0.8 }],
  },
  {
    resourceType: 'ValueSet',
    id: 'vs1',
    url: 'http://example.org/fhir/ValueSet/colors',
    status: 'active',
  },
];

describe.each(testDatabases())('search on $name', ({ open }) => {
  let db: Db;

  beforeAll(async () => {
    db = await open();
    await insert(db, patients);
    await insert(db, others);
  });
  afterAll(async () => {
    await db.close();
  });

  describe('string', () => {
    it('matches prefixes case- and accent-insensitively', async () => {
      expect(await ids(db, 'Patient', { family: 'smith' })).toEqual(['p-smith', 'p-smithers']);
      expect(await ids(db, 'Patient', { family: 'SMITHERS' })).toEqual(['p-smithers']);
      expect(await ids(db, 'Patient', { family: 'muller' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { name: 'zoe' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { given: 'quin' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { name: 'john quincy s' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { address: 'springf' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { 'address-postalcode': '627' })).toEqual(['p-smith']);
      expect(await ids(db, 'Organization', { name: 'acme' })).toEqual(['org1']);
    });
    it(':exact and :contains', async () => {
      expect(await ids(db, 'Patient', { 'family:exact': 'Smith' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { 'family:exact': 'smith' })).toEqual([]);
      expect(await ids(db, 'Patient', { 'family:exact': 'Müller' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { 'family:contains': 'ithe' })).toEqual(['p-smithers']);
      expect(await ids(db, 'Patient', { 'family:contains': 'LL' })).toEqual(['p-zoe']);
    });
    it('OR within a value, AND across repeats', async () => {
      expect(await ids(db, 'Patient', { family: 'house,muller' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { family: ['smith', 'smithers'] })).toEqual(['p-smithers']);
    });
  });

  describe('token', () => {
    it('code, system|code, |code, system|', async () => {
      expect(await ids(db, 'Patient', { gender: 'female' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { identifier: 'http://hospital/mrn|MRN-1' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { identifier: 'MRN-2' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { identifier: 'http://hospital/mrn|' })).toEqual(['p-smith', 'p-zoe']);
      expect(await ids(db, 'Patient', { identifier: '|NOSYS' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { identifier: '|MRN-1' })).toEqual([]);
      expect(await ids(db, 'Patient', { identifier: 'http://other|MRN-1' })).toEqual([]);
      expect(await ids(db, 'Observation', { code: 'http://loinc.org|29463-7' })).toEqual(['obs1', 'obs3']);
    });
    it('booleans, ContactPoint and meta tags', async () => {
      expect(await ids(db, 'Patient', { active: 'true' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { active: 'false' })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { phone: '555-1234' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { email: '555-1234' })).toEqual([]);
      expect(await ids(db, 'Patient', { telecom: 'email|john@example.com' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { _tag: 'http://tags|vip' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { _profile: 'http://example.org/StructureDefinition/p' })).toEqual([
        'p-smith',
      ]);
    });
    it(':not and :text', async () => {
      expect(await ids(db, 'Patient', { 'gender:not': 'male' })).toEqual(['p-meta', 'p-smithers', 'p-zoe']);
      expect(await ids(db, 'Observation', { 'code:text': 'weig' })).toEqual(['obs1']);
      expect(await ids(db, 'Observation', { 'code:text': 'body' })).toEqual(['obs1', 'obs2']);
      expect(await ids(db, 'Patient', { 'identifier:text': 'medical' })).toEqual(['p-smith']);
    });
    it('_id', async () => {
      expect(await ids(db, 'Patient', { _id: 'p-zoe,p-smith' })).toEqual(['p-smith', 'p-zoe']);
      expect(await ids(db, 'Patient', { '_id:not': 'p-zoe' })).toEqual(['p-meta', 'p-smith', 'p-smithers']);
    });
  });

  describe('reference', () => {
    it('Type/id, id, absolute URL, urn:uuid and :Type', async () => {
      expect(await ids(db, 'Patient', { organization: 'Organization/org1' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { organization: 'org2' })).toEqual(['p-smithers']);
      expect(await ids(db, 'Patient', { organization: 'http://any.host/fhir/Organization/org1' })).toEqual([
        'p-smith',
      ]);
      expect(
        await ids(db, 'Patient', { organization: 'urn:uuid:6f1c2a30-0000-4000-8000-000000000001' }),
      ).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { 'general-practitioner': 'Practitioner/dr1' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { 'general-practitioner:Practitioner': 'dr1' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { 'general-practitioner:Organization': 'dr1' })).toEqual([]);
      expect(await ids(db, 'Observation', { subject: 'Patient/p-smith' })).toEqual(['obs1']);
      expect(await ids(db, 'Observation', { patient: 'p-zoe' })).toEqual(['obs2']);
    });
    it('chained search', async () => {
      expect(await ids(db, 'Observation', { 'subject:Patient.name': 'smith' })).toEqual(['obs1', 'obs3']);
      expect(await ids(db, 'Observation', { 'patient.name': 'smithers' })).toEqual(['obs3']);
      expect(await ids(db, 'Observation', { 'patient.gender': 'female' })).toEqual(['obs2']);
      expect(await ids(db, 'Patient', { 'organization.name': 'beta' })).toEqual(['p-smithers']);
      expectFhirError(
        () => parseSearchRequest('Observation', { 'subject.name': 'x' }),
        'search.ambiguous-chain',
      );
      // Two levels: the Observation's patient's organization.
      expect(await ids(db, 'Observation', { 'patient.organization.name': 'beta' })).toEqual(['obs3']);
      expect(await ids(db, 'Observation', { 'patient.organization.name': 'nobody' })).toEqual([]);
      expectFhirError(
        () =>
          parseSearchRequest('Observation', {
            'patient.organization.partof.partof.name': 'x',
          }),
        'search.chain-depth',
      );
    });
  });

  describe('date', () => {
    it('prefixes follow range semantics', async () => {
      expect(await ids(db, 'Patient', { birthdate: '1970' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { birthdate: '1970-05-17' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { birthdate: '1985-03' })).toEqual([]); // 1985 is wider than March
      expect(await ids(db, 'Patient', { birthdate: 'gt1985' })).toEqual(['p-smithers']);
      expect(await ids(db, 'Patient', { birthdate: 'ge1985' })).toEqual(['p-smithers', 'p-zoe']);
      expect(await ids(db, 'Patient', { birthdate: 'lt1985' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { birthdate: 'le1985' })).toEqual(['p-smith', 'p-zoe']);
      expect(await ids(db, 'Patient', { birthdate: 'ne1985' })).toEqual(['p-smith', 'p-smithers']);
      expect(await ids(db, 'Patient', { birthdate: 'sa1980' })).toEqual(['p-smithers', 'p-zoe']);
      expect(await ids(db, 'Patient', { birthdate: 'eb1985-01-01' })).toEqual(['p-smith']);
      expect(await ids(db, 'Patient', { birthdate: ['ge1971', 'lt1989'] })).toEqual(['p-zoe']);
      expect(await ids(db, 'Patient', { 'death-date': '2020-03-04' })).toEqual(['p-smithers']);
    });
    it('periods and dateTimes', async () => {
      expect(await ids(db, 'Observation', { date: '2021' })).toEqual(['obs1', 'obs2']);
      expect(await ids(db, 'Observation', { date: '2021-01-15' })).toEqual([]); // the period is wider than the day
      expect(await ids(db, 'Observation', { date: 'ap2021-01-15' })).toEqual(['obs2']);
      expect(await ids(db, 'Observation', { date: 'gt2021-06-15T08:00:00Z' })).toEqual(['obs1', 'obs3']);
      expect(await ids(db, 'Observation', { date: '2021-06-15T08:30:00Z' })).toEqual(['obs1']);
      expect(await ids(db, 'Observation', { date: '2021-06-15T10:30:00+02:00' })).toEqual(['obs1']);
      expect(await ids(db, 'Observation', { date: '2021-06-15T10:30:00 02:00' })).toEqual(['obs1']);
    });
    it('open-ended periods', async () => {
      expect(await ids(db, 'Encounter', { date: 'ge2020' })).toEqual(['enc-open']);
      expect(await ids(db, 'Encounter', { date: 'gt2999-01-01' })).toEqual(['enc-open']);
      expect(await ids(db, 'Encounter', { date: 'lt2020-05-01' })).toEqual([]);
      expect(await ids(db, 'Encounter', { date: 'eb2020-04-30' })).toEqual([]);
      expect(await ids(db, 'Encounter', { date: '2020' })).toEqual([]);
    });
    it('_lastUpdated on the resources table', async () => {
      const all = await ids(db, 'Organization', {});
      expect(all).toEqual(['org1', 'org2']);
      expect(await ids(db, 'Organization', { _lastUpdated: 'gt2000-01-01' })).toEqual(['org1', 'org2']);
      expect(await ids(db, 'Organization', { _lastUpdated: 'lt2000-01-01' })).toEqual([]);
    });
  });

  describe('number and quantity', () => {
    it('number with implicit precision and prefixes', async () => {
      expect(await ids(db, 'RiskAssessment', { probability: '0.25' })).toEqual(['risk1']);
      expect(await ids(db, 'RiskAssessment', { probability: '0.4' })).toEqual([]);
      expect(await ids(db, 'RiskAssessment', { probability: 'gt0.7' })).toEqual(['risk1']);
      expect(await ids(db, 'RiskAssessment', { probability: 'gt0.9' })).toEqual([]);
      expect(await ids(db, 'RiskAssessment', { probability: 'le0.25' })).toEqual(['risk1']);
      expect(await ids(db, 'RiskAssessment', { probability: 'lt0.25' })).toEqual([]);
    });
    it('quantity value|system|code', async () => {
      expect(await ids(db, 'Observation', { 'value-quantity': '72.5' })).toEqual(['obs1']);
      expect(await ids(db, 'Observation', { 'value-quantity': '72.5|http://unitsofmeasure.org|kg' })).toEqual(
        ['obs1'],
      );
      expect(await ids(db, 'Observation', { 'value-quantity': '72.5||kg' })).toEqual(['obs1']);
      expect(await ids(db, 'Observation', { 'value-quantity': '72.5||cm' })).toEqual([]);
      expect(await ids(db, 'Observation', { 'value-quantity': 'gt80||kg' })).toEqual(['obs3']);
      expect(await ids(db, 'Observation', { 'value-quantity': 'ge72.5' })).toEqual(['obs1', 'obs2', 'obs3']);
      expect(await ids(db, 'Observation', { 'value-quantity': 'ap100' })).toEqual(['obs3']);
      expect(await ids(db, 'Observation', { 'value-quantity': 'ne100' })).toEqual(['obs1', 'obs2']);
      // 1e2 has one significant figure: [50, 150)
      expect(await ids(db, 'Observation', { 'value-quantity': '1e2' })).toEqual(['obs1', 'obs3']);
    });
  });

  describe('uri', () => {
    it('equality, :below and :above', async () => {
      expect(await ids(db, 'ValueSet', { url: 'http://example.org/fhir/ValueSet/colors' })).toEqual(['vs1']);
      expect(await ids(db, 'ValueSet', { url: 'http://example.org/fhir/ValueSet' })).toEqual([]);
      expect(await ids(db, 'ValueSet', { 'url:below': 'http://example.org/fhir' })).toEqual(['vs1']);
      expect(
        await ids(db, 'ValueSet', { 'url:above': 'http://example.org/fhir/ValueSet/colors/v2' }),
      ).toEqual(['vs1']);
    });
  });

  describe(':missing', () => {
    it('true and false on every type', async () => {
      expect(await ids(db, 'Patient', { deceased: 'true' })).toEqual(['p-smithers']);
      expect(await ids(db, 'Patient', { deceased: 'false' })).toEqual(['p-meta', 'p-smith', 'p-zoe']);
      expect(await ids(db, 'Patient', { 'death-date:missing': 'false' })).toEqual(['p-smithers']);
      expect(await ids(db, 'Patient', { 'gender:missing': 'true' })).toEqual(['p-meta']);
      expect(await ids(db, 'Patient', { 'organization:missing': 'true' })).toEqual(['p-meta']);
      expect(await ids(db, 'Patient', { 'birthdate:missing': 'true' })).toEqual(['p-meta']);
      expect(await ids(db, 'Patient', { 'family:missing': 'false' })).toHaveLength(4);
      expect(await ids(db, 'RiskAssessment', { 'probability:missing': 'false' })).toEqual(['risk1']);
      expect(await ids(db, 'Observation', { 'value-quantity:missing': 'true' })).toEqual([]);
      expect(await ids(db, 'ValueSet', { 'url:missing': 'false' })).toEqual(['vs1']);
    });
  });

  describe('SQL metacharacters', () => {
    const nasty = ["'", '%', '_', '\\', ';--', "' OR '1'='1", "x'); DROP TABLE resources;--"];
    it('are harmless in every parameter type', async () => {
      for (const v of nasty) {
        expect(await ids(db, 'Patient', { family: v })).toEqual([]);
        expect(await ids(db, 'Patient', { 'family:contains': v })).toEqual(
          v === "'" || v === ';--' || v === '\\' || v === '_' || v === '%' ? ['p-meta'] : [],
        );
        expect(await ids(db, 'Patient', { 'family:exact': v })).toEqual([]);
        expect(await ids(db, 'Patient', { identifier: `${v}|${v}` })).toEqual([]);
        expect(await ids(db, 'Patient', { 'identifier:text': v })).toEqual([]);
        expect(await ids(db, 'Patient', { organization: `Organization/${v}` })).toEqual([]);
        expect(await ids(db, 'ValueSet', { url: v, 'url:below': v })).toEqual([]);
        expect(await ids(db, 'Patient', { _id: v })).toEqual([]);
      }
      expect(await ids(db, 'Patient', { family: "o'brien_100%\\\\x;--" })).toEqual(['p-meta']);
      expect(await ids(db, 'Patient', { family: 'o%' })).toEqual([]);
      expect(await ids(db, 'Patient', { family: 's_ith' })).toEqual([]);
      expect(await ids(db, 'Patient', { identifier: "sys'%_\\\\;--|v'%_\\\\;--" })).toEqual(['p-meta']);
      expectFhirError(() => parseSearchRequest('Patient', { birthdate: "1970'; --" }), 'search.bad-date');
      expectFhirError(
        () => parseSearchRequest('RiskAssessment', { probability: "1'; --" }),
        'search.bad-number',
      );
      expectFhirError(
        () => parseSearchRequest('Observation', { 'value-quantity': '%' }),
        'search.bad-number',
      );
      expectFhirError(() => parseSearchRequest('Patient', { organization: "a'b" }), 'search.bad-reference');
      expect((await db.query('SELECT count(*)::int AS n FROM resources')).rows[0]).toEqual({ n: 13 });
    });
  });

  describe('include and revinclude', () => {
    it('_include follows references of the page, _revinclude finds referrers', async () => {
      const r = await search(db, 'Observation', { code: '29463-7', _include: 'Observation:subject' });
      expect(r.matches.map((m) => m.id).sort()).toEqual(['obs1', 'obs3']);
      expect(r.included.map((m) => m.id).sort()).toEqual(['p-smith', 'p-smithers']);
      const typed = await search(db, 'Observation', { _id: 'obs1', _include: 'Observation:subject:Group' });
      expect(typed.included).toEqual([]);
      const rev = await search(db, 'Patient', {
        _id: 'p-smith',
        _revinclude: ['Observation:subject', 'RiskAssessment:subject'],
      });
      expect(rev.included.map((m) => m.id).sort()).toEqual(['obs1', 'risk1']);
      const both = await search(db, 'Patient', {
        _id: 'p-smith,p-smithers',
        _include: 'Patient:organization',
        _revinclude: 'Observation:patient',
      });
      expect(both.included.map((m) => `${m.resourceType}/${m.id}`).sort()).toEqual([
        'Observation/obs1',
        'Observation/obs3',
        'Organization/org1',
        'Organization/org2',
      ]);
      const star = await search(db, 'Patient', { _id: 'p-smith', _include: '*' });
      expect(star.included.map((m) => m.id).sort()).toEqual(['dr1', 'org1']);
      expect(JSON.parse(star.included[0]?.json ?? '{}').resourceType).toBeTruthy();
    });
  });

  describe('errors', () => {
    it('unknown parameters, modifiers and bad values are 400 with a stable code', () => {
      expectFhirError(() => parseSearchRequest('Patient', { nope: 'x' }), 'search.unknown-param');
      expectFhirError(() => parseSearchRequest('Patient', { 'family:nope': 'x' }), 'search.bad-modifier');
      expectFhirError(() => parseSearchRequest('Patient', { 'gender:exact': 'x' }), 'search.bad-modifier');
      expectFhirError(
        () => parseSearchRequest('Patient', { 'birthdate:contains': 'x' }),
        'search.bad-modifier',
      );
      expectFhirError(
        () => parseSearchRequest('Patient', { 'organization:Patient': 'x' }),
        'search.bad-modifier',
      );
      expectFhirError(
        () => parseSearchRequest('Patient', { '_lastUpdated:missing': 'true' }),
        'search.bad-modifier',
      );
      expectFhirError(
        () => parseSearchRequest('Patient', { 'gender:missing': 'maybe' }),
        'search.bad-missing',
      );
      expectFhirError(() => parseSearchRequest('Patient', { birthdate: 'xx2020' }), 'search.bad-date');
      expectFhirError(() => parseSearchRequest('Patient', { birthdate: '2020-13-01' }), 'search.bad-date');
      expectFhirError(() => parseSearchRequest('Patient', { birthdate: 'gt' }), 'search.bad-date');
      expectFhirError(
        () => parseSearchRequest('RiskAssessment', { probability: 'gt0.5x' }),
        'search.bad-number',
      );
      expectFhirError(() => parseSearchRequest('Patient', { _count: 'ten' }), 'search.bad-count');
      expectFhirError(() => parseSearchRequest('Patient', { _count: '1.5' }), 'search.bad-count');
      expectFhirError(() => parseSearchRequest('Patient', { _count: '-1' }), 'search.bad-count');
      expectFhirError(() => parseSearchRequest('Patient', { _sort: 'nope' }), 'search.bad-sort');
      expectFhirError(() => parseSearchRequest('Patient', { _total: 'all' }), 'search.bad-total');
      expectFhirError(() => parseSearchRequest('Patient', { _summary: 'yes' }), 'search.bad-summary');
      expectFhirError(
        () => parseSearchRequest('Patient', { _include: 'Patient:name' }),
        'search.bad-include',
      );
      expectFhirError(
        () => parseSearchRequest('Patient', { _include: 'Nope:subject' }),
        'search.bad-include',
      );
      expectFhirError(() => parseSearchRequest('Patient', { _cursor: 'garbage' }), 'search.bad-cursor');
      expectFhirError(() => parseSearchRequest('Patient', { _elements: 'name;drop' }), 'search.bad-elements');
      expectFhirError(() => parseSearchRequest('Nope', {}), 'search.unknown-type');
      expect(() => parseSearchRequest('Observation', { 'code-value-quantity': 'x' })).toThrow(FhirError);
      const err = (() => {
        try {
          parseSearchRequest('Patient', { nope: 'x' });
        } catch (e) {
          return e as FhirError;
        }
      })();
      expect(err?.issues[0]?.code).toBe('invalid');
      expect(err?.message).toContain("'nope'");
    });
    it('_count defaults to 20, clamps at 1000, allows 0; _format is ignored', () => {
      expect(parseSearchRequest('Patient', {}).count).toBe(20);
      expect(parseSearchRequest('Patient', { _count: '5000' }).count).toBe(1000);
      expect(parseSearchRequest('Patient', { _count: '0', _format: 'json' }).count).toBe(0);
    });
  });
});

function patient(id: string, family: string, birthDate?: string): Resource {
  return { resourceType: 'Patient', id, name: [{ family }], ...(birthDate ? { birthDate } : {}) };
}

describe.each(testDatabases())('paging, sorting and scope on $name', ({ open }) => {
  let db: Db;

  beforeAll(async () => {
    db = await open();
  });
  afterAll(async () => {
    await db.close();
  });

  async function pageAll(
    type: string,
    query: Record<string, string>,
    between?: (n: number) => Promise<void>,
  ) {
    const seen: string[] = [];
    let cursor: Record<string, string> | undefined;
    for (let n = 0; n < 100; n++) {
      const r = await search(db, type, { ...query, ...cursor });
      seen.push(...r.matches.map((m) => m.id));
      if (!r.nextCursor) return seen;
      cursor = r.nextCursor;
      if (between) await between(n);
    }
    throw new Error('paging did not end');
  }

  it('pages through every result by cursor while rows are inserted, without duplicates or gaps', async () => {
    const initial = Array.from({ length: 45 }, (_, i) =>
      patient(`pg-${String(i).padStart(2, '0')}`, 'Paging'),
    );
    await insert(db, initial);
    let added = 0;
    const seen = await pageAll('Patient', { family: 'paging', _count: '10' }, async () => {
      await insert(db, [patient(`pg-new-${added++}`, 'Paging')]);
    });
    const original = seen.filter((id) => !id.startsWith('pg-new'));
    expect(original).toEqual(initial.map((p) => p.id));
    expect(new Set(seen).size).toBe(seen.length);
    // Rows inserted while paging sort after the cursor (later last_updated) and are reached too.
    expect(seen.filter((id) => id.startsWith('pg-new')).length).toBeGreaterThan(0);
  });

  it('_sort on several keys, ascending and descending, paged by cursor', async () => {
    const rows = [
      patient('s1', 'Sortb', '2000-01-01'),
      patient('s2', 'Sorta', '1990-01-01'),
      patient('s3', 'Sortb', '1980-01-01'),
      patient('s4', 'Sorta', '1990-01-01'),
      patient('s5', 'Sortc'),
      { resourceType: 'Patient', id: 's6', gender: 'sortless' },
    ];
    await insert(db, rows);
    const q = { _id: 's1,s2,s3,s4,s5,s6' };
    const sorted = async (sort: string): Promise<string[]> =>
      pageAll('Patient', { ...q, _sort: sort, _count: '2' });
    expect(await sorted('family,-birthdate')).toEqual(['s2', 's4', 's1', 's3', 's5', 's6']);
    // Without a value, last in both directions (issue 30: a descending page is read from the index's end).
    expect(await sorted('-family,birthdate')).toEqual(['s5', 's3', 's1', 's2', 's4', 's6']);
    expect(await sorted('-family')).toEqual(['s5', 's1', 's3', 's2', 's4', 's6']);
    expect(await sorted('birthdate,-_id')).toEqual(['s3', 's4', 's2', 's1', 's6', 's5']);
    expect(await sorted('-_lastUpdated')).toEqual(['s6', 's5', 's4', 's3', 's2', 's1']);
    expect(await sorted('_id')).toEqual(['s1', 's2', 's3', 's4', 's5', 's6']);
    // Same order on one page as across pages.
    const one = await search(db, 'Patient', { ...q, _sort: 'family,-birthdate', _count: '100' });
    expect(one.matches.map((m) => m.id)).toEqual(['s2', 's4', 's1', 's3', 's5', 's6']);
  });

  it('_total, _summary=count and _count=0', async () => {
    await insert(
      db,
      Array.from({ length: 25 }, (_, i) => patient(`t-${i}`, 'Totals')),
    );
    const plain = await search(db, 'Patient', { family: 'totals' });
    expect(plain.matches).toHaveLength(20);
    expect(plain.total).toBeUndefined();
    expect(plain.nextCursor?._cursor).toBeTruthy();
    const accurate = await search(db, 'Patient', { family: 'totals', _total: 'accurate', _count: '5' });
    expect(accurate.total).toBe(25);
    expect(accurate.matches).toHaveLength(5);
    const count = await search(db, 'Patient', { family: 'totals', _summary: 'count' });
    expect(count).toMatchObject({ matches: [], total: 25 });
    const zero = await search(db, 'Patient', { family: 'totals', _count: '0' });
    expect(zero).toMatchObject({ matches: [], total: 25 });
    expect(zero.nextCursor).toBeUndefined();
    const none = await search(db, 'Patient', { family: 'totals', _total: 'none', _count: '100' });
    expect(none.matches).toHaveLength(25);
    expect(none.nextCursor).toBeUndefined();
  });

  it('project scope: never another project’s rows, includes or chain targets', async () => {
    await insert(db, [{ resourceType: 'Organization', id: 'scope-org-a', name: 'Scope Org' }], 'p1');
    await insert(db, [{ resourceType: 'Organization', id: 'scope-org-b', name: 'Scope Org' }], 'p2');
    await insert(
      db,
      [
        {
          resourceType: 'Patient',
          id: 'scope-a',
          name: [{ family: 'Scoped' }],
          managingOrganization: { reference: 'Organization/scope-org-b' },
        },
      ],
      'p1',
    );
    await insert(
      db,
      [
        {
          resourceType: 'Patient',
          id: 'scope-b',
          name: [{ family: 'Scoped' }],
          managingOrganization: { reference: 'Organization/scope-org-a' },
        },
        {
          resourceType: 'Observation',
          id: 'scope-obs-b',
          status: 'final',
          code: { text: 'x' },
          subject: { reference: 'Patient/scope-a' },
        },
      ],
      'p2',
    );
    expect(await ids(db, 'Patient', { family: 'scoped' }, P1)).toEqual(['scope-a']);
    expect(await ids(db, 'Patient', { family: 'scoped' }, { projectId: 'p2' })).toEqual(['scope-b']);
    expect(await ids(db, 'Patient', { family: 'scoped' }, ALL)).toEqual(['scope-a', 'scope-b']);
    const inc = await search(
      db,
      'Patient',
      { family: 'scoped', _include: 'Patient:organization', _revinclude: 'Observation:subject' },
      P1,
    );
    expect(inc.included).toEqual([]);
    const incAll = await search(db, 'Patient', {
      _id: 'scope-a',
      _include: 'Patient:organization',
      _revinclude: 'Observation:subject',
    });
    expect(incAll.included.map((m) => m.id).sort()).toEqual(['scope-obs-b', 'scope-org-b']);
    expect(await ids(db, 'Patient', { 'organization.name': 'scope' }, P1)).toEqual([]);
    expect(await ids(db, 'Patient', { 'organization.name': 'scope' }, ALL)).toEqual(['scope-a', 'scope-b']);
    const count = await search(db, 'Patient', { family: 'scoped', _summary: 'count' }, P1);
    expect(count.total).toBe(1);
  });

  it('deleted rows are never matched nor included; reindex and deleteIndex', async () => {
    const [ridA] = await insert(db, [
      { resourceType: 'Organization', id: 'del-org', name: 'Deleted Org' },
      {
        resourceType: 'Patient',
        id: 'del-p',
        name: [{ family: 'Deletable' }],
        managingOrganization: { reference: 'Organization/del-org' },
      },
    ]);
    await db.query('UPDATE resources SET deleted = true WHERE rid = $1', [ridA]);
    expect(await ids(db, 'Organization', { name: 'deleted' })).toEqual([]);
    const inc = await search(db, 'Patient', { family: 'deletable', _include: 'Patient:organization' });
    expect(inc.matches.map((m) => m.id)).toEqual(['del-p']);
    expect(inc.included).toEqual([]);
    expect(await ids(db, 'Patient', { 'organization.name': 'deleted' })).toEqual([]);

    const [rid] = await insert(db, [patient('re-1', 'Before')]);
    await db.query(
      `UPDATE resources SET content = jsonb_set(content::jsonb, '{name}', '[{"family":"After"}]') WHERE rid = $1`,
      [rid],
    );
    expect(await ids(db, 'Patient', { family: 'after' })).toEqual([]);
    await db.transaction((tx) => reindexResources(tx, [rid as number]));
    expect(await ids(db, 'Patient', { family: 'after' })).toEqual(['re-1']);
    expect(await ids(db, 'Patient', { family: 'before' })).toEqual([]);
    await db.transaction((tx) => deleteIndex(tx, [rid as number]));
    expect(await ids(db, 'Patient', { family: 'after' })).toEqual([]);
  });

  it('_elements keeps the listed elements and marks the resource SUBSETTED', async () => {
    await insert(db, [
      {
        resourceType: 'Observation',
        id: 'el-1',
        meta: { tag: [{ system: 'x', code: 'y' }] },
        status: 'final',
        code: { text: 'c' },
        valueQuantity: { value: 1 },
        _status: { extension: [] },
        subject: { reference: 'Patient/x' },
      },
    ]);
    const req = parseSearchRequest('Observation', { _id: 'el-1', _elements: 'status,value' });
    expect(req.elements).toEqual(['status', 'value']);
    const r = await executeSearch(db, req, ALL);
    const json = applyElements(r.matches[0]?.json ?? '', req.elements ?? []);
    const out = JSON.parse(json);
    expect(Object.keys(out).sort()).toEqual([
      '_status',
      'id',
      'meta',
      'resourceType',
      'status',
      'valueQuantity',
    ]);
    expect(out.meta.tag).toEqual([
      { system: 'x', code: 'y' },
      { system: 'http://terminology.hl7.org/CodeSystem/v3-ObservationValue', code: 'SUBSETTED' },
    ]);
    expect(JSON.parse(applyElements(json, ['status'])).meta.tag).toHaveLength(2);
  });
});
