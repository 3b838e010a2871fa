// Search modifiers of API.md §9 on each test database: token `:in`/`:not-in` (value sets), `:below`/`:above` (code
// hierarchies), `:of-type` (identifier types), reference `:identifier`, uri `:below`/`:above` by path segment; parse
// → resolveTerminology (a fake Terminology) → sql → executeSearch. https://hl7.org/fhir/R4/search.html#modifiers
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import { fakeTerminology } from '../../../test/support/terminology.js';
import type { Db } from '../../storage/db.js';
import { FhirError } from '../outcome.js';
import { compileCriteria } from '../subscriptions/match-search.js';
import type { Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { reindexResources, writeIndex } from './index-writer.js';
import { MAX_CANONICAL, parseSearchRequest } from './parse.js';
import { searchSql } from './sql.js';
import { MAX_SEARCH_CODES, resolveTerminology } from './terminology.js';

const LOINC = 'http://loinc.org';
const OTHER = 'http://other.org/codes';
const SCT = 'http://snomed.info/sct';
const V2 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const MRN = 'http://hospital.org/mrn';

const many = Array.from({ length: 5000 }, (_, i) => ({
  system: LOINC,
  code: `9${String(i).padStart(4, '0')}-0`,
}));
const terminology = fakeTerminology({
  valueSets: {
    p1: {
      'http://vs.test/a': [{ system: LOINC, code: '1000-1' }],
      'http://vs.test/big': [...many, { system: LOINC, code: '2000-2' }],
    },
    p2: { 'http://vs.test/p2-only': [{ system: LOINC, code: '1000-1' }] },
    '*': { 'http://vs.test/shared': [{ system: LOINC, code: '2000-2' }] },
  },
  tooLarge: ['http://vs.test/huge'],
  hierarchies: { [SCT]: { root: [], mid: ['root'], child: ['mid'], other: ['root'] } },
});

const obs = (id: string, system: string | undefined, code: string, extra: object = {}): Resource => ({
  resourceType: 'Observation',
  id,
  status: 'final',
  code: { coding: [{ ...(system ? { system } : {}), code }] },
  ...extra,
});

const resources: Resource[] = [
  obs('o-a', LOINC, '1000-1'),
  obs('o-b', LOINC, '2000-2'),
  // The same code in another system: never a member of a LOINC value set.
  obs('o-other', OTHER, '1000-1'),
  obs('o-nosys', undefined, '1000-1'),
  obs('o-child', SCT, 'child', { subject: { identifier: { system: MRN, value: '123' } } }),
  obs('o-root', SCT, 'root', { subject: { reference: 'Patient/pat-1' } }),
  obs('o-sibling', SCT, 'other'),
  {
    resourceType: 'Patient',
    id: 'pat-1',
    identifier: [{ system: MRN, value: '12345', type: { coding: [{ system: V2, code: 'MR' }] } }],
  },
  {
    resourceType: 'Patient',
    id: 'pat-2',
    identifier: [
      { system: MRN, value: '12345' },
      {
        value: '999',
        type: {
          coding: [
            { system: V2, code: 'DL' },
            { system: V2, code: 'MR' },
          ],
        },
      },
    ],
  },
  { resourceType: 'ValueSet', id: 'u1', status: 'active', url: 'http://acme.org/fhir/ValueSet/x' },
  { resourceType: 'ValueSet', id: 'u2', status: 'active', url: 'http://acme.org/fhirx/ValueSet/y' },
  { resourceType: 'ValueSet', id: 'u3', status: 'active', url: 'http://acme.org/fhir' },
  { resourceType: 'ValueSet', id: 'u4', status: 'active', url: 'http://acme.org' },
];

let clock = Date.parse('2024-01-01T00:00:00Z');

async function insert(db: Db, list: Resource[], projectId: string): Promise<number[]> {
  const rows = list.map((r) => ({
    resource_type: r.resourceType,
    id: r.id,
    project_id: projectId,
    last_updated: new Date((clock += 1000)).toISOString(),
    content: r,
  }));
  return db.transaction(async (tx) => {
    const res = await tx.query<{ rid: number }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, x.project_id, 1, x.last_updated, false, x.content
       FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, project_id text, last_updated timestamptz, content jsonb)
       RETURNING rid`,
      [JSON.stringify(rows)],
    );
    const rids = res.rows.map((r) => Number(r.rid));
    await writeIndex(
      tx,
      list.map((resource, i) => ({ rid: rids[i] as number, resource })),
    );
    return rids;
  });
}

describe.each(testDatabases())('search modifiers on $name', (database) => {
  let db: Db;
  beforeAll(async () => {
    db = await database.open();
    await insert(db, resources, 'p1');
    // Another project's copies: never found from p1.
    await insert(
      db,
      resources.map((r) => ({ ...r, id: `x-${r.id}` })),
      'p2',
    );
  }, 120_000);
  afterAll(async () => {
    await db.close();
  });

  const ids = async (type: string, query: Record<string, string>, projectId = 'p1'): Promise<string[]> => {
    const parsed = parseSearchRequest(type, { _count: '1000', ...query }, { terminology: true });
    const req = await resolveTerminology(parsed, terminology, { projectId, db });
    const r = await executeSearch(db, req, { projectId });
    return r.matches.map((m) => m.id).sort();
  };
  const failure = async (
    type: string,
    query: Record<string, string>,
    projectId = 'p1',
  ): Promise<FhirError> => {
    try {
      await ids(type, query, projectId);
    } catch (err) {
      expect(err).toBeInstanceOf(FhirError);
      return err as FhirError;
    }
    throw new Error(`expected an error for ${JSON.stringify(query)}`);
  };

  describe('token :in and :not-in', () => {
    it('match system and code together, never a code of another system', async () => {
      expect(await ids('Observation', { 'code:in': 'http://vs.test/a' })).toEqual(['o-a']);
      expect(await ids('Observation', { 'code:in': 'http://vs.test/a|1.0' })).toEqual(['o-a']);
      expect(await ids('Observation', { 'code:in': 'http://vs.test/a,http://vs.test/shared' })).toEqual([
        'o-a',
        'o-b',
      ]);
    });

    it(':not-in keeps resources with no code of the parameter in the set', async () => {
      expect(await ids('Observation', { 'code:not-in': 'http://vs.test/a' })).toEqual([
        'o-b',
        'o-child',
        'o-nosys',
        'o-other',
        'o-root',
        'o-sibling',
      ]);
    });

    it('resolve value sets in the project first, then the shared set; another project’s never', async () => {
      expect(await ids('Observation', { 'code:in': 'http://vs.test/shared' })).toEqual(['o-b']);
      expect(await ids('Observation', { 'code:in': 'http://vs.test/p2-only' }, 'p2')).toEqual(['x-o-a']);
      const err = await failure('Observation', { 'code:in': 'http://vs.test/p2-only' });
      expect(err.status).toBe(400);
      expect(err.code).toBe('search.unknown-value-set');
      expect(err.message).toContain('http://vs.test/p2-only');
    });

    it('a value set of 5,000 codes is one probe per code; too large to expand is 422', async () => {
      expect(await ids('Observation', { 'code:in': 'http://vs.test/big' })).toEqual(['o-b']);
      const q = searchSql(
        await resolveTerminology(
          parseSearchRequest('Observation', { 'code:in': 'http://vs.test/big' }, { terminology: true }),
          terminology,
          { projectId: 'p1' },
        ),
        { projectId: 'p1' },
      );
      expect(q.text).toContain('unnest(');
      expect(q.text).not.toMatch(/ OR .* OR /);
      expect(q.values.length).toBeLessThan(20);
      const err = await failure('Observation', { 'code:in': 'http://vs.test/huge' });
      expect([err.status, err.issueCode]).toEqual([422, 'too-costly']);
    });

    it('are resolved inside chains and _has', async () => {
      expect(await ids('Patient', { '_has:Observation:subject:code:in': 'http://vs.test/shared' })).toEqual(
        [],
      );
      expect(await ids('Patient', { '_has:Observation:subject:code:below': `${SCT}|root` })).toEqual([
        'pat-1',
      ]);
    });
  });

  describe('token :below and :above', () => {
    it('follow the code system hierarchy, the code itself included', async () => {
      expect(await ids('Observation', { 'code:below': `${SCT}|mid` })).toEqual(['o-child']);
      expect(await ids('Observation', { 'code:below': `${SCT}|root` })).toEqual([
        'o-child',
        'o-root',
        'o-sibling',
      ]);
      expect(await ids('Observation', { 'code:above': `${SCT}|child` })).toEqual(['o-child', 'o-root']);
    });

    it('an unknown code or system is a 400 naming it', async () => {
      for (const v of [`${SCT}|nope`, 'http://unknown.org|root']) {
        const err = await failure('Observation', { 'code:below': v });
        expect([err.status, err.code]).toEqual([400, 'search.unknown-code']);
        expect(err.message).toContain(v);
      }
    });
  });

  describe('identifier :of-type', () => {
    it('matches the type coding and the value of the same identifier', async () => {
      expect(await ids('Patient', { 'identifier:of-type': `${V2}|MR|12345` })).toEqual(['pat-1']);
      expect(await ids('Patient', { 'identifier:of-type': `${V2}|MR|999` })).toEqual(['pat-2']);
      expect(await ids('Patient', { 'identifier:of-type': `${V2}|DL|999` })).toEqual(['pat-2']);
      expect(await ids('Patient', { 'identifier:of-type': `${V2}|DL|12345` })).toEqual([]);
      expect(await ids('Patient', { 'identifier:of-type': `http://other|MR|12345` })).toEqual([]);
      expect(await ids('Observation', { 'subject:Patient.identifier:of-type': `${V2}|MR|12345` })).toEqual([
        'o-root',
      ]);
    });

    it('is found for older rows once they are reindexed', async () => {
      const [rid] = await insert(db, [{ ...resources[7], id: 'pat-old' } as Resource], 'p1');
      await db.query('DELETE FROM sp_identifier WHERE rid = $1', [rid]);
      expect(await ids('Patient', { 'identifier:of-type': `${V2}|MR|12345` })).toEqual(['pat-1']);
      await db.transaction((tx) => reindexResources(tx, [rid as number]));
      expect(await ids('Patient', { 'identifier:of-type': `${V2}|MR|12345` })).toEqual(['pat-1', 'pat-old']);
    });
  });

  describe('reference :identifier', () => {
    it('matches the Reference.identifier by system|value, value, or system|', async () => {
      expect(await ids('Observation', { 'subject:identifier': `${MRN}|123` })).toEqual(['o-child']);
      expect(await ids('Observation', { 'subject:identifier': '123' })).toEqual(['o-child']);
      expect(await ids('Observation', { 'subject:identifier': `${MRN}|` })).toEqual(['o-child']);
      expect(await ids('Observation', { 'subject:identifier': `${OTHER}|123` })).toEqual([]);
      expect(await ids('Observation', { 'subject:identifier': '|123' })).toEqual([]);
      // An identifier-only reference is still a missing reference, as before.
      expect(await ids('Observation', { 'subject:missing': 'false' })).toEqual(['o-root']);
    });
  });

  describe('uri :below and :above', () => {
    it('go by path segments', async () => {
      expect(await ids('ValueSet', { 'url:below': 'http://acme.org/fhir' })).toEqual(['u1', 'u3']);
      expect(await ids('ValueSet', { 'url:below': 'http://acme.org/fhir/' })).toEqual(['u1', 'u3']);
      expect(await ids('ValueSet', { 'url:above': 'http://acme.org/fhir/ValueSet/x' })).toEqual([
        'u1',
        'u3',
        'u4',
      ]);
      expect(await ids('ValueSet', { 'url:above': 'http://acme.org/fhirx' })).toEqual(['u4']);
    });
  });
});

describe('parse', () => {
  const parse = (query: Record<string, string>, type = 'Observation'): FhirError => {
    try {
      parseSearchRequest(type, query, { terminology: true });
    } catch (err) {
      expect(err).toBeInstanceOf(FhirError);
      expect((err as FhirError).status).toBe(400);
      return err as FhirError;
    }
    throw new Error(`expected a 400 for ${JSON.stringify(query)}`);
  };

  it('refuses malformed values with a 400 and a stable code', () => {
    expect(parse({ 'code:in': `http://vs.test/${'x'.repeat(10_000)}` }).code).toBe('search.bad-canonical');
    expect(parse({ 'code:in': 'x'.repeat(MAX_CANONICAL + 1) }).code).toBe('search.bad-canonical');
    expect(parse({ 'code:in': 'not a canonical' }).code).toBe('search.bad-canonical');
    expect(parse({ 'code:not-in': 'http://x|1|2' }).code).toBe('search.bad-canonical');
    expect(parse({ 'code:below': 'root' }).code).toBe('search.bad-hierarchy');
    expect(parse({ 'code:above': '|root' }).code).toBe('search.bad-hierarchy');
    expect(parse({ 'identifier:of-type': `${V2}|MR` }, 'Patient').code).toBe('search.bad-of-type');
    expect(parse({ 'identifier:of-type': `${V2}||1` }, 'Patient').code).toBe('search.bad-of-type');
    expect(parse({ 'code:of-type': `${V2}|MR|1` }).code).toBe('search.bad-modifier');
    expect(parse({ 'subject:identifier': '|' }).code).toBe('search.empty-value');
    expect(parse({ 'status:identifier': 'x' }).code).toBe('search.bad-modifier');
  });

  it('refuses the terminology modifiers to a caller that does not resolve them', () => {
    for (const key of [
      'code:in',
      'code:not-in',
      'code:below',
      'code:above',
      '_has:Observation:subject:code:in',
    ]) {
      const type = key.startsWith('_has') ? 'Patient' : 'Observation';
      expect(() => parseSearchRequest(type, { [key]: `${SCT}|root` }), key).toThrow(
        expect.objectContaining({ code: 'search.terminology-unavailable', status: 400 }),
      );
    }
  });

  it('codes over the per-search limit are refused as too costly, one value set or several', async () => {
    const half = Array.from({ length: MAX_SEARCH_CODES / 2 + 1 }, (_, i) => ({ system: 's', code: `${i}` }));
    const huge = fakeTerminology({
      valueSets: {
        p: {
          'http://vs/h': [...half, ...half.map((c) => ({ ...c, system: 't' }))],
          'http://vs/half': half,
          'http://vs/other-half': half.map((c) => ({ ...c, system: 't' })),
        },
      },
    });
    const at = { projectId: 'p' };
    for (const query of [
      { 'code:in': 'http://vs/h' },
      { 'code:in': 'http://vs/half,http://vs/other-half' },
      { 'code:in': 'http://vs/half', 'category:not-in': 'http://vs/other-half' },
    ]) {
      const req = parseSearchRequest('Observation', query, { terminology: true });
      await expect(resolveTerminology(req, huge, at), JSON.stringify(query)).rejects.toMatchObject({
        status: 422,
        code: 'search.too-many-codes',
      });
    }
    const one = parseSearchRequest('Observation', { 'code:in': 'http://vs/half' }, { terminology: true });
    const resolved = await resolveTerminology(one, huge, at);
    expect(resolved.filters[0]?.values[0]).toMatchObject({ kind: 'codes' });
    await expect(resolveTerminology(one, undefined, at)).rejects.toMatchObject({
      status: 400,
      code: 'search.no-terminology',
    });
  });
});

describe('subscription criteria', () => {
  it.each([
    'Observation?code:in=http://vs.test/a',
    'Observation?code:not-in=http://vs.test/a',
    `Observation?code:above=${SCT}|child`,
    `Patient?identifier:of-type=${V2}|MR|12345`,
    `Observation?subject:identifier=${MRN}|123`,
  ])('refuse %s with a 400 naming the parameter', (criteria) => {
    try {
      compileCriteria(criteria);
      throw new Error('accepted');
    } catch (err) {
      expect(err).toBeInstanceOf(FhirError);
      expect((err as FhirError).code).toBe('subscription.criteria-unsupported');
      expect((err as FhirError).status).toBe(400);
      expect((err as FhirError).message).toMatch(/'(code|identifier|subject)/);
    }
  });
});
