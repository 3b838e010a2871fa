// `:missing=true` and `:not` that match nothing or a few no longer read every resource of the type (issue 30): they
// start from sp_missing's GIN index (migration 028) and the value index's ranges around the excluded value, so the
// rows EXPLAIN ANALYZE says each table gave stay far below the 3,000 Observations (the anti-joins before read them
// all). Answers are checked too. On PGlite and PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import { recordQueries, rowsRead } from '../../../test/support/plans.js';
import type { Db, Queryable } from '../../storage/db.js';
import type { AccessScope, Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';

const N = 3000;
/** Every RARE-th Observation is amended and has no subject. */
const RARE = 500;
const LOINC = 'http://loinc.org';
const scope: AccessScope = { projectId: 'a' };

function observation(i: number, project: string): Resource {
  const rare = i % RARE === 7;
  return {
    resourceType: 'Observation',
    id: `${project}-o${i}`,
    status: rare ? 'amended' : 'final',
    code: { coding: [{ system: LOINC, code: i % 2 === 0 ? '8302-2' : `${i % 50}-9` }] },
    ...(rare ? {} : { subject: { reference: `Patient/${project}-p${i % 100}` } }),
    effectiveDateTime: `2020-01-${String((i % 28) + 1).padStart(2, '0')}`,
  };
}

async function insert(db: Db, resources: Resource[], project: string): Promise<void> {
  await db.transaction(async (tx: Queryable) => {
    const res = await tx.query<{ rid: number; id: string }>(
      `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, $2, 1, now(), false, x.content
       FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid, id`,
      [
        JSON.stringify(resources.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r }))),
        project,
      ],
    );
    const rid = new Map(res.rows.map((r) => [r.id, Number(r.rid)]));
    await writeIndex(
      tx,
      resources.map((resource) => ({ rid: rid.get(resource.id as string) as number, resource })),
    );
  });
}

const rare = Array.from({ length: N }, (_, i) => i)
  .filter((i) => i % RARE === 7)
  .map((i) => `a-o${i}`)
  .sort();

/** Searches that match nothing or a few, with their answers. */
const CASES: [string, Record<string, string>, string[]][] = [
  ['Observation', { 'subject:missing': 'true' }, rare],
  ['Observation', { 'patient:missing': 'true' }, rare],
  ['Observation', { 'status:not': 'final' }, rare],
  ['Observation', { 'status:not': 'final,amended' }, []],
  ['Observation', { 'date:missing': 'true' }, []],
  ['Observation', { 'code:missing': 'true' }, []],
  ['Observation', { 'subject:missing': 'true', code: `${LOINC}|8302-2` }, []],
  ['Observation', { 'status:not': 'final', 'subject:missing': 'true' }, rare],
];

describe.each(testDatabases())(':missing and :not plans on $name', (database) => {
  let db: Db;
  beforeAll(async () => {
    db = await database.open();
    // Another project's rows interleaved with ours, with as few absences.
    for (let k = 0; k < N; k += 500) {
      await insert(
        db,
        Array.from({ length: 500 }, (_, i) => observation(k + i, 'a')),
        'a',
      );
      await insert(
        db,
        Array.from({ length: 100 }, (_, i) => observation(k / 5 + i, 'b')),
        'b',
      );
    }
    // VACUUM moves the GIN index's pending entries into its tree (autovacuum does it as a table grows); on rows
    // only in the pending list, PostgreSQL prefers a sequential scan of so small a table.
    await db.query('VACUUM ANALYZE');
  }, 600_000);
  afterAll(async () => {
    await db?.close();
  });

  it('answers a page, and counts, without reading every resource of the type', async () => {
    for (const [type, query, expected] of CASES) {
      const what = JSON.stringify(query);
      const all = await executeSearch(db, parseSearchRequest(type, { ...query, _count: '1000' }), scope);
      expect(all.matches.map((m) => m.id).sort(), what).toEqual(expected);
      for (const extra of [{ _count: '10' }, { _summary: 'count' }]) {
        const { q, seen } = recordQueries(db, /FROM resources/);
        const r = await executeSearch(q, parseSearchRequest(type, { ...query, ...extra }), scope);
        if (extra._summary) expect(r.total, what).toBe(expected.length);
        expect(seen.length).toBeGreaterThan(0);
        for (const s of seen)
          for (const table of ['resources', 'sp_token', 'sp_reference', 'sp_date', 'sp_missing']) {
            const read = await rowsRead(db, s, table);
            // The anti-joins read each of the 3,000 Observations (and their index rows) to find none.
            expect(read, `${what} ${JSON.stringify(extra)} ${table}`).toBeLessThan(250);
          }
      }
    }
  });

  it('still starts from a selective filter', async () => {
    const { q, seen } = recordQueries(db, /FROM resources/);
    const r = await executeSearch(
      q,
      parseSearchRequest('Observation', { subject: 'Patient/a-p7', 'status:not': 'amended', _count: '100' }),
      scope,
    );
    // a-p7's 30 Observations but the 6 without a subject (i % 500 = 7).
    expect(r.matches).toHaveLength(24);
    for (const s of seen)
      for (const table of ['resources', 'sp_token', 'sp_missing'])
        expect(await rowsRead(db, s, table), table).toBeLessThan(250);
  });
});
