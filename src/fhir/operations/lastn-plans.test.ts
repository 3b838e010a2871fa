// $lastn reads index ranges, not the subject's Observations (API.md §11): the index rows its queries touch are the same
// for a patient with 4000 Observations as for one with 8 of the same codes, and no plan scans or sorts sp_lastn.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db, Queryable } from '../../storage/db.js';
import { writeIndex } from '../search/index-writer.js';
import type { Resource } from '../types.js';
import { hitsSql, lastnGroups, skipScanSql, type LastnParams } from './lastn.js';

const CODES = ['8867-4', '8310-5', '9279-1', '29463-7'];

function observation(patient: string, i: number): Resource {
  return {
    resourceType: 'Observation',
    id: `${patient}-o${i}`,
    status: 'final',
    category: [
      {
        coding: [
          { system: 'http://terminology.hl7.org/CodeSystem/observation-category', code: 'vital-signs' },
        ],
      },
    ],
    code: { coding: [{ system: 'http://loinc.org', code: CODES[i % CODES.length] as string }] },
    subject: { reference: `Patient/${patient}` },
    effectiveDateTime: new Date(Date.UTC(2020, 0, 1) + i * 3_600_000).toISOString(),
  };
}

async function insert(tx: Queryable, resources: Resource[]): Promise<void> {
  const res = await tx.query<{ rid: number; id: string }>(
    `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
     SELECT x.resource_type, x.id, 'plans', 1, now(), false, x.content
     FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, content jsonb) RETURNING rid, id`,
    [JSON.stringify(resources.map((r) => ({ resource_type: r.resourceType, id: r.id, content: r })))],
  );
  const rid = new Map(res.rows.map((r) => [r.id, Number(r.rid)]));
  await writeIndex(
    tx,
    resources.map((resource) => ({ rid: rid.get(resource.id as string) as number, resource })),
  );
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan. */
const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/** The sp_lastn index entries a query read (returned or filtered away), and its plan's node types on sp_lastn. */
async function touched(
  db: Db,
  q: { text: string; values: unknown[] },
): Promise<{ rows: number; kinds: string[] }> {
  const r = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${q.text}`, q.values);
  const raw = r.rows[0]?.['QUERY PLAN'];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
  const all = nodes(plan[0]!.Plan);
  const onLastn = all.filter(
    (n) => n['Relation Name'] === 'sp_lastn' || n['Index Name']?.startsWith('sp_lastn'),
  );
  return {
    rows: onLastn.reduce(
      (sum, n) =>
        sum + (n['Actual Rows'] + (n['Rows Removed by Filter'] ?? 0)) * Math.max(1, n['Actual Loops']),
      0,
    ),
    kinds: [
      ...new Set([
        ...onLastn.map((n) => n['Node Type']),
        ...all.filter((n) => n['Node Type'] === 'Sort').map(() => 'Sort'),
      ]),
    ],
  };
}

describe.each(testDatabases())('$lastn plans on $name', (database) => {
  let db: Db;
  beforeAll(async () => {
    db = await database.open();
    const big = Array.from({ length: 4000 }, (_, i) => observation('big', i));
    const small = Array.from({ length: 8 }, (_, i) => observation('small', i));
    for (let i = 0; i < big.length; i += 1000)
      await db.transaction((tx) => insert(tx, big.slice(i, i + 1000)));
    await db.transaction((tx) => insert(tx, small));
    await db.query('ANALYZE');
  }, 300_000);
  afterAll(async () => db?.close());

  const params = (patient: string, max: number): LastnParams => ({
    subject: `Patient/${patient}`,
    categories: ['*|vital-signs'],
    max,
  });

  it('reads as many index rows for 4000 Observations as for 8, with no scan or sort of sp_lastn', async () => {
    const cost = async (patient: string) => {
      const p = params(patient, 2);
      const groups = await lastnGroups(db, p);
      expect(groups.map((g) => g[2]).sort()).toEqual([...CODES].sort());
      const skip = await touched(db, skipScanSql(p.subject, '*|vital-signs', 'code'));
      const hits = await touched(db, hitsSql(groups, p, { projectId: 'plans' }));
      return { rows: skip.rows + hits.rows, kinds: [...skip.kinds, ...hits.kinds] };
    };
    const small = await cost('small');
    const big = await cost('big');
    for (const c of [small, big]) {
      expect(c.kinds).not.toContain('Seq Scan');
      expect(c.kinds).not.toContain('Sort');
      expect(c.kinds).not.toContain('Bitmap Heap Scan');
    }
    // A probe per code (and one past the last) and `max` rows per code: the same for both patients.
    expect(big.rows).toBeLessThanOrEqual(small.rows + CODES.length);
    expect(big.rows).toBeLessThan(40);
    expect(big.rows).toBeGreaterThanOrEqual(CODES.length * 2);
    expect(big.kinds.some((k) => k.startsWith('Index'))).toBe(true);
  });

  it('answers the newest `max` per code', async () => {
    const p = params('big', 1);
    const q = hitsSql(await lastnGroups(db, p), p, { projectId: 'plans' });
    const ids = (await db.query<{ id: string }>(q.text, q.values)).rows.map((r) => r.id).sort();
    expect(ids).toEqual(['big-o3996', 'big-o3997', 'big-o3998', 'big-o3999']);
  });
});
