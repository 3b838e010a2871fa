// Query plans of the statements a piece of code runs: a Queryable that records them, and EXPLAIN of one of them
// reduced to how each table is read. For tests that a lookup goes through an index at any table size.
import type { Db, Queryable } from '../../src/storage/db.js';

export interface Recorded {
  sql: string;
  params: readonly unknown[];
}

/** A Queryable that passes every statement on to `db` and keeps those whose text matches `pattern`. */
export function recordQueries(db: Db, pattern: RegExp): { q: Queryable; seen: Recorded[] } {
  const seen: Recorded[] = [];
  const q: Queryable = {
    query(sql, params, opts) {
      // A copy: the caller may push to its array after the call.
      if (pattern.test(sql)) seen.push({ sql, params: [...(params ?? [])] });
      return db.query(sql, params, opts);
    },
  };
  return { q, seen };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

const nodes = (n: PlanNode): PlanNode[] => [n, ...(n.Plans ?? []).flatMap(nodes)];

/** How the plan of `sql` reads `table`: one entry per scan, e.g. `Seq Scan` or `Index Only Scan sp_reference_ref`. */
export async function tableAccess(db: Db, r: Recorded, table: string): Promise<string[]> {
  const res = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${r.sql}`, r.params);
  const raw = res.rows[0]?.['QUERY PLAN'];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
  return nodes(plan[0]?.Plan as PlanNode)
    .filter((n) => n['Relation Name'] === table)
    .map((n) => `${n['Node Type']}${n['Index Name'] ? ` ${n['Index Name']}` : ''}`);
}

/** Rows the plan of `r` read from `table` (EXPLAIN ANALYZE): returned plus removed by a filter, over every loop. */
export async function rowsRead(db: Db, r: Recorded, table: string): Promise<number> {
  const res = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${r.sql}`, r.params);
  const raw = res.rows[0]?.['QUERY PLAN'];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
  return nodes(plan[0]?.Plan as PlanNode)
    .filter((n) => n['Relation Name'] === table)
    .reduce(
      (sum, n) =>
        sum +
        ((n['Actual Rows'] ?? 0) +
          (n['Rows Removed by Filter'] ?? 0) +
          (n['Rows Removed by Index Recheck'] ?? 0)) *
          (n['Actual Loops'] ?? 1),
      0,
    );
}
