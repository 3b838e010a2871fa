// A vread and an instance history find their rows by the history's key (rid, version_id), whatever the number of
// other resources of the type: by (resource_type, id), which resource_history has no index for, they read every
// history row of the type (27 s at five million Observations in bench/growth.ts). The statements the repository
// runs are captured and explained; throughput is measured by the benchmarks, not here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../../test/support/db.js';
import type { Db, Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import type { RawJson } from '../result.js';
import { systemContext } from './context.js';
import { commitCreates } from './create.js';
import { history } from './history.js';
import { prepareWrite } from './prepare.js';
import { vreadResource } from './read.js';
import { updateResource } from './update.js';

const PATIENTS = 3000;

/** A repository answer's body (a RawJson holding the stored text) as an object. */
const json = (body: unknown): Resource & { name?: unknown } =>
  JSON.parse((body as RawJson).text) as Resource & { name?: unknown };

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

function nodes(n: PlanNode): PlanNode[] {
  return [n, ...(n.Plans ?? []).flatMap(nodes)];
}

/** A Queryable that passes every statement on and keeps those that read resource_history. */
function recorder(db: Db): { q: Queryable; seen: { sql: string; params: readonly unknown[] }[] } {
  const seen: { sql: string; params: readonly unknown[] }[] = [];
  const q: Queryable = {
    query(sql, params, opts) {
      if (/FROM resource_history/.test(sql)) seen.push({ sql, params: [...(params ?? [])] }); // the caller may push to its array later
      return db.query(sql, params, opts);
    },
  };
  return { q, seen };
}

/** How resource_history is read by the plan of `sql`. */
async function historyAccess(db: Db, sql: string, params: readonly unknown[]): Promise<string[]> {
  const r = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const raw = r.rows[0]?.['QUERY PLAN'];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
  return nodes(plan[0]?.Plan as PlanNode)
    .filter((n) => n['Relation Name'] === 'resource_history')
    .map((n) => `${n['Node Type']}${n['Index Name'] ? ` ${n['Index Name']}` : ''}`);
}

describe.each(testDatabases())('history by key on $name', ({ open }) => {
  let db: Db;
  const ctx = systemContext('project-a', {
    clock: () => new Date(),
    newId: () => crypto.randomUUID(),
    fhirBase: 'http://localhost/fhir/R4',
  });
  const id = (i: number): string => `hp-${i}`;

  beforeAll(async () => {
    db = await open();
    const now = new Date();
    for (let from = 0; from < PATIENTS; from += 500) {
      const items = Array.from({ length: 500 }, (_, k) =>
        prepareWrite(
          ctx,
          { resourceType: 'Patient', name: [{ family: `Before${from + k}` }] } as Resource,
          id(from + k),
          1,
          now,
        ),
      );
      await db.transaction((tx) => commitCreates(tx, ctx, items));
    }
    for (const i of [7, 1500, 2999]) {
      await updateResource(db, ctx, 'Patient', id(i), {
        resourceType: 'Patient',
        id: id(i),
        name: [{ family: `After${i}` }],
      } as Resource);
    }
    await db.query('ANALYZE');
  }, 120_000);
  afterAll(() => db?.close());

  it('a vread reads its version through the history key', async () => {
    const { q, seen } = recorder(db);
    const v1 = await vreadResource(q, ctx, 'Patient', id(1500), '1');
    const v2 = await vreadResource(q, ctx, 'Patient', id(1500), '2');
    expect(json(v1.body).name).toEqual([{ family: 'Before1500' }]);
    expect(json(v2.body).name).toEqual([{ family: 'After1500' }]);
    expect(v2.versionId).toBe('2');
    expect(seen.length).toBe(2);
    for (const s of seen) {
      const access = await historyAccess(db, s.sql, s.params);
      expect(access).toHaveLength(1);
      expect(access[0]).toMatch(/^Index (Only )?Scan resource_history_pkey$/);
    }
  });

  it('an instance history lists its versions, newest first, through the history key', async () => {
    const { q, seen } = recorder(db);
    const res = await history(
      q,
      ctx,
      'Patient',
      id(2999),
      {},
      'http://localhost/fhir/R4/Patient/hp-2999/_history',
    );
    const body = json(res.body) as unknown as {
      total: number;
      entry: { resource: Resource & { meta: { versionId: string } } }[];
    };
    expect(body.total).toBe(2);
    expect(body.entry.map((e) => e.resource.meta.versionId)).toEqual(['2', '1']);
    expect(body.entry[1]?.resource.name).toEqual([{ family: 'Before2999' }]);
    expect(seen.length).toBe(2); // the total and the page
    for (const s of seen) {
      const access = await historyAccess(db, s.sql, s.params);
      expect(access).toHaveLength(1);
      expect(access[0]).toMatch(/resource_history_pkey$/);
    }
  });
});
