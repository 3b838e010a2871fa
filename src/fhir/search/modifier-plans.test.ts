// The search modifiers of API.md §9 are answered from the search indexes at any table size (the query plan names
// them, never a sequential scan of an index table): `:in` over a value set of hundreds of codes (one probe per pair
// through unnest), `:not-in`, `:of-type` and reference `:identifier` (sp_identifier, migration 017), uri `:below` and
// `:above`. PostgreSQL only, as plans.test.ts.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import { tableAccess } from '../../../test/support/plans.js';
import { fakeTerminology } from '../../../test/support/terminology.js';
import type { Db } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';
import { searchSql } from './sql.js';
import { resolveTerminology } from './terminology.js';

const N = 4000;
const LOINC = 'http://loinc.org';
const V2 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const MRN = 'http://hospital.org/mrn';
const scope = { projectId: 'plans' };

const terminology = fakeTerminology({
  valueSets: {
    plans: {
      // 300 codes, of which the observations use a handful.
      'http://vs.test/some': Array.from({ length: 300 }, (_, i) => ({ system: LOINC, code: `${i * 50}-1` })),
    },
  },
});

function resourcesAt(i: number): Resource[] {
  return [
    {
      resourceType: 'Patient',
      id: `pp-${i}`,
      identifier: [
        { system: MRN, value: `M${i}`, type: { coding: [{ system: V2, code: 'MR' }] } },
        { system: 'http://ssn', value: `S${i}`, type: { coding: [{ system: V2, code: 'SS' }] } },
      ],
    },
    {
      resourceType: 'Observation',
      id: `po-${i}`,
      status: 'final',
      code: { coding: [{ system: LOINC, code: `${i % 1000}-1` }] },
      subject: { identifier: { system: MRN, value: `M${i}` } },
    },
    {
      resourceType: 'ValueSet',
      id: `pv-${i}`,
      status: 'draft',
      url: `http://acme.org/fhir/p${i % 40}/ValueSet/v${i}`,
    },
  ];
}

const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(postgres)(`search modifier plans on ${N} resources of each type on PostgreSQL`, () => {
  let db: Db;
  beforeAll(async () => {
    db = await (postgres as NonNullable<typeof postgres>).open();
    const all = Array.from({ length: N }, (_, i) => resourcesAt(i)).flat();
    for (let k = 0; k < all.length; k += 2000) {
      const batch = all.slice(k, k + 2000);
      await db.transaction(async (tx) => {
        const res = await tx.query<{ rid: number }>(
          `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
           SELECT x.resource_type, x.id, 'plans', 1, now(), false, x.content
           FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid`,
          [JSON.stringify(batch.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r })))],
        );
        await writeIndex(
          tx,
          batch.map((resource, i) => ({ rid: Number(res.rows[i]?.rid), resource })),
        );
      });
    }
    await db.query('ANALYZE');
  }, 600_000);
  afterAll(async () => {
    await db?.close();
  });

  /** How the search reads `table` (one entry per scan), the indexes its plan names, and what it finds. */
  const plan = async (type: string, query: Record<string, string>, table: string) => {
    const parsed = parseSearchRequest(type, { _count: '20', ...query }, { terminology: true });
    const req = await resolveTerminology(parsed, terminology, { projectId: 'plans' });
    const q = searchSql(req, scope);
    const access = await tableAccess(db, { sql: q.text, params: q.values }, table);
    const text = (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${q.text}`, q.values)).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    const found = (await executeSearch(db, req, scope)).matches.map((m) => m.id);
    return { access, text, found };
  };
  /** Every read of the table goes through an index (a bitmap heap scan is driven by one), and `index` is used. */
  const indexed = (p: { access: string[]; text: string }, index: string): void => {
    expect(p.access.length, p.text).toBeGreaterThan(0);
    for (const a of p.access) expect(a, p.text).toMatch(/Index|Bitmap Heap Scan/);
    expect(p.text).toContain(index);
  };

  it(':in reads the token value index once per code of the value set', async () => {
    const p = await plan('Observation', { 'code:in': 'http://vs.test/some' }, 'sp_token');
    indexed(p, 'sp_token_value');
    expect(p.found).toHaveLength(20);
  });

  it(':not-in tests each candidate through an index, never a scan of the token table', async () => {
    const { access, found } = await plan('Observation', { 'code:not-in': 'http://vs.test/some' }, 'sp_token');
    for (const a of access) expect(a).not.toMatch(/Seq Scan/);
    expect(found).toHaveLength(20);
  });

  it(':of-type and reference :identifier read the identifier index', async () => {
    const ofType = await plan('Patient', { 'identifier:of-type': `${V2}|MR|M1234` }, 'sp_identifier');
    indexed(ofType, 'sp_identifier_value');
    expect(ofType.found).toEqual(['pp-1234']);
    const ref = await plan('Observation', { 'subject:identifier': `${MRN}|M77` }, 'sp_identifier');
    indexed(ref, 'sp_identifier_value');
    expect(ref.found).toEqual(['po-77']);
  });

  it('uri :below and :above read the uri value index', async () => {
    const below = await plan(
      'ValueSet',
      { 'url:below': 'http://acme.org/fhir/p7', _count: '1000' },
      'sp_uri',
    );
    indexed(below, 'sp_uri_value');
    expect(below.found).toHaveLength(N / 40);
    const above = await plan('ValueSet', { 'url:above': 'http://acme.org/fhir/p7/ValueSet/v7/x' }, 'sp_uri');
    indexed(above, 'sp_uri_value');
    expect(above.found).toEqual(['pv-7']);
  });
});
