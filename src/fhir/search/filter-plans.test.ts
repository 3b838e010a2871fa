// The cost of a `_filter` with `or`/`not` and of a system-level search follows the caller's own project, not the
// whole table: another project's thousands of matching index rows are never read (PostgreSQL's plan, as production).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db, Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { executeSearch } from './execute.js';
import { writeIndex } from './index-writer.js';
import { parseSearchRequest } from './parse.js';
import { searchSql } from './sql.js';

const OTHERS = 8000;
const MINE = 40;

/** Stores resources of one project with their index rows (what a create does, without the rest). */
async function insert(tx: Queryable, resources: Resource[], projectId: string): Promise<void> {
  const res = await tx.query<{ rid: number; resource_type: string; id: string }>(
    `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
     SELECT x.resource_type, x.id, $2, 1, now(), false, x.content
     FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb)
     RETURNING rid, resource_type, id`,
    [
      JSON.stringify(resources.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r }))),
      projectId,
    ],
  );
  const rid = new Map(res.rows.map((r) => [`${r.resource_type}/${r.id}`, Number(r.rid)]));
  await writeIndex(
    tx,
    resources.map((resource) => ({
      rid: rid.get(`${resource.resourceType}/${resource.id}`) as number,
      resource,
    })),
  );
}

const patient = (id: string, family: string, given: string): Resource => ({
  resourceType: 'Patient',
  id,
  name: [{ family, given: [given] }],
  gender: 'male',
});

/** The most rows any node of an EXPLAIN ANALYZE returned (per loop). */
const maxRows = (plan: string): number =>
  Math.max(0, ...[...plan.matchAll(/rows=(\d+)/g)].map((m) => Number(m[1])));

const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(postgres)('_filter and system search plans on PostgreSQL', () => {
  let db: Db;
  const scope = { projectId: 'mine' };
  /**
   * The plan, with work_mem at its minimum: as when the other projects' matches are too many to hash (at this test's
   * size PostgreSQL would rightly hash them), so the plan shows what a large table gets.
   */
  const explain = (q: { text: string; values: unknown[] }): Promise<string> =>
    db.transaction(async (tx) => {
      await tx.query("SET LOCAL work_mem = '64kB'");
      const rows = (
        await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, COSTS OFF) ${q.text}`, q.values)
      ).rows;
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    });

  beforeAll(async () => {
    db = await (postgres as NonNullable<typeof postgres>).open();
    const others = Array.from({ length: OTHERS }, (_, i) => patient(`o-${i}`, 'Common', 'Zed'));
    for (let i = 0; i < others.length; i += 1000)
      await db.transaction((tx) => insert(tx, others.slice(i, i + 1000), 'other'));
    const mine = Array.from({ length: MINE }, (_, i) => patient(`m-${i}`, i % 2 ? 'Common' : 'Rare', 'Amy'));
    await db.transaction((tx) => insert(tx, mine, 'mine'));
    await db.query('ANALYZE');
  }, 300_000);
  afterAll(async () => db?.close());

  it("an or/not filter probes the project's own rows, never every project's matches", async () => {
    const req = parseSearchRequest(
      'Patient',
      { _filter: 'family eq "common" or not (given eq "amy")', _count: '100' },
      { filter: true },
    );
    const plan = await explain(searchSql(req, scope));
    // No scan returns the other project's 8000 "Common" rows: each of the caller's rows is probed by its rid.
    expect(maxRows(plan), plan).toBeLessThan(OTHERS);
    expect(plan, plan).toMatch(/sp_string_rid/);
    const found = await executeSearch(db, req, scope);
    expect(found.matches.map((m) => m.id).sort()).toEqual(
      Array.from({ length: MINE / 2 }, (_, i) => `m-${2 * i + 1}`).sort(),
    );
  });

  it('a system search without _type reads only the caller project', async () => {
    const req = parseSearchRequest('Patient', { _count: '10' });
    req.system = [{ types: ['Patient', 'Practitioner', 'Observation'], filters: [] }];
    const plan = await explain(searchSql(req, scope));
    expect(maxRows(plan), plan).toBeLessThan(OTHERS);
    expect((await executeSearch(db, { ...req, summary: 'count' }, scope)).total).toBe(MINE);
  });
});
