// The common Patient searches on a few thousand patients are answered from the search indexes (the query plan
// names them). Throughput is measured by `npm run bench`, not here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db, Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';
import { searchSql } from './sql.js';

const PATIENTS = 4000;
let tick = Date.parse('2024-01-01T00:00:00Z');

/** What store.ts does for a create: resources + history in one statement, then the index. */
async function insertBatch(tx: Queryable, resources: Resource[], projectId: string): Promise<void> {
  const rows = resources.map((r) => ({
    resource_type: r.resourceType,
    id: r.id,
    project_id: projectId,
    last_updated: new Date((tick += 1)).toISOString(),
    content: r,
  }));
  const res = await tx.query<{ rid: number; resource_type: string; id: string }>(
    `WITH ins AS (
       INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, x.project_id, 1, x.last_updated, false, x.content
       FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, project_id text, last_updated timestamptz, content jsonb)
       RETURNING rid, resource_type, id, project_id, version_id, last_updated, content
     ), hist AS (
       INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       SELECT rid, resource_type, id, version_id, project_id, last_updated, false, content FROM ins
     )
     SELECT rid, resource_type, id FROM ins`,
    [JSON.stringify(rows)],
  );
  const byKey = new Map(res.rows.map((r) => [`${r.resource_type}/${r.id}`, Number(r.rid)]));
  await writeIndex(
    tx,
    resources.map((resource) => ({
      rid: byKey.get(`${resource.resourceType}/${resource.id}`) as number,
      resource,
    })),
  );
}

const FAMILY_PARTS = [
  'Ander',
  'Bal',
  'Cor',
  'Dun',
  'Els',
  'Fair',
  'Gar',
  'Hal',
  'Ing',
  'Jar',
  'Kel',
  'Lind',
  'Mor',
  'Nor',
  'Ost',
  'Pem',
];
const FAMILY_ENDS = [
  'son',
  'ley',
  'ford',
  'ton',
  'wick',
  'by',
  'man',
  'er',
  'ham',
  'well',
  'ridge',
  'stone',
  'wood',
  'field',
  'more',
  'dale',
];
const GIVEN = [
  'Ana',
  'Ben',
  'Chloé',
  'David',
  'Emma',
  'Farid',
  'Grace',
  'Hugo',
  'Iris',
  'José',
  'Kai',
  'Lena',
  'Mia',
  'Noah',
];

function fakePatient(i: number): Resource {
  const family = `${FAMILY_PARTS[i % 16]}${FAMILY_ENDS[Math.floor(i / 16) % 16]}${Math.floor(i / 256) % 4 || ''}`;
  return {
    resourceType: 'Patient',
    id: `perf-${i}`,
    meta: { tag: [{ system: 'https://example.org/tags', code: 'perf' }] },
    identifier: [
      {
        system: 'https://example.org/mrn',
        value: `MRN${100000 + i}`,
        type: { text: 'Medical Record Number' },
      },
      { system: 'http://hl7.org/fhir/sid/us-ssn', value: `999-${String(i).padStart(6, '0')}` },
    ],
    name: [
      {
        use: 'official',
        family,
        given: [GIVEN[i % GIVEN.length] as string, GIVEN[(i * 7) % GIVEN.length] as string],
        prefix: ['Mx.'],
      },
    ],
    telecom: [
      { system: 'phone', value: `555-${String(i).padStart(4, '0')}`, use: 'home' },
      { system: 'email', value: `p${i}@example.org` },
    ],
    gender: i % 2 ? 'female' : 'male',
    birthDate: `${1930 + (i % 90)}-${String((i % 12) + 1).padStart(2, '0')}-${String((i % 28) + 1).padStart(2, '0')}`,
    address: [
      {
        line: [`${i} Main St`],
        city: ['Boston', 'Springfield', 'Salem'][i % 3],
        state: 'MA',
        postalCode: `0${1000 + (i % 900)}`,
        country: 'US',
      },
    ],
    maritalStatus: {
      coding: [{ system: 'http://terminology.hl7.org/CodeSystem/v3-MaritalStatus', code: 'M' }],
      text: 'Married',
    },
    communication: [
      { language: { coding: [{ system: 'urn:ietf:bcp:47', code: 'en-US', display: 'English' }] } },
    ],
    managingOrganization: { reference: `Organization/org-${i % 20}` },
  };
}

// PostgreSQL only (its planner is what production runs); skipped where the run has no TEST_DATABASE_URL.
const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(postgres)(`${PATIENTS} patients on PostgreSQL`, () => {
  let db: Db;
  const scope = { projectId: 'perf' };
  beforeAll(async () => {
    db = await (postgres as NonNullable<typeof postgres>).open();
    const all = Array.from({ length: PATIENTS }, (_, i) => fakePatient(i));
    for (let i = 0; i < all.length; i += 1000) {
      await db.transaction((tx) => insertBatch(tx, all.slice(i, i + 1000), 'perf'));
    }
    await db.query('ANALYZE');
  }, 600_000);
  afterAll(async () => {
    await db.close();
  });

  it('family search uses the string index', async () => {
    const family = (fakePatient(37).name as { family: string }[])[0]?.family as string;
    const req = parseSearchRequest('Patient', { family, _count: '20' });
    const q = searchSql(req, scope);
    const plan = (await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${q.text}`, q.values)).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    expect(plan).toContain('sp_string_value');
    const found = await executeSearch(db, req, scope);
    expect(found.matches.map((m) => m.id)).toContain('perf-37');
  });

  it('reads a page of a one-filter string or token search straight off its index, with no sort of the matches', async () => {
    // A prefix one Patient in 16 matches, and a tag every one has: the page must not read them all.
    for (const query of [
      { family: 'a', _count: '20' },
      { _tag: 'https://example.org/tags|perf', _count: '20' },
    ]) {
      const req = parseSearchRequest('Patient', query);
      const q = searchSql(req, scope);
      const plan = (
        await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF) ${q.text}`, q.values)
      ).rows
        .map((r) => r['QUERY PLAN'])
        .join('\n');
      expect(plan, JSON.stringify(query)).not.toMatch(/\bSort\b/);
      expect(plan, plan).toMatch(/sp_(string|token)_value/);
      expect((await executeSearch(db, req, scope)).matches).toHaveLength(20);
    }
  });

  it('other common searches find their patients', async () => {
    const cases: Record<string, string>[] = [
      { birthdate: 'ge1990-01-01', _count: '20' },
      { gender: 'female', _sort: '-birthdate', _count: '20' },
      { name: 'jos', address: 'salem', _count: '20' },
      { organization: 'Organization/org-3', _total: 'accurate', _count: '20' },
    ];
    for (const query of cases) {
      const r = await executeSearch(db, parseSearchRequest('Patient', query), scope);
      expect(r.matches.length, JSON.stringify(query)).toBe(20);
    }
    const byMrn = await executeSearch(
      db,
      parseSearchRequest('Patient', { identifier: 'https://example.org/mrn|MRN100042' }),
      scope,
    );
    expect(byMrn.matches.map((m) => m.id)).toEqual(['perf-42']);
  });
});
