// `:missing=true` and `:not` from an index (migration 028): `sp_missing` holds per resource the ids of the built-in
// parameters it has no value for, so "no value of P" is a GIN containment probe rather than an anti-join over every
// resource of the type. https://hl7.org/fhir/R4/search.html#modifiers
import { paramIds } from '../../storage/migrations/028-param-codes.js';
import type { FilterValue } from './request.js';

/** The index table of absences, named as the index backfill names it (migration 023). */
export const MISSING_TABLE = 'sp_missing';

let byType: Map<string, Map<string, number>> | undefined;

function ids(): Map<string, Map<string, number>> {
  if (byType) return byType;
  byType = new Map();
  for (const [id, type, code] of paramIds()) {
    let m = byType.get(type);
    if (!m) byType.set(type, (m = new Map()));
    m.set(code, id);
  }
  return byType;
}

/** The id of a parameter whose absence sp_missing records; undefined for the others (custom, added since 028). */
export function absentIdOf(resourceType: string, code: string): number | undefined {
  return ids().get(resourceType)?.get(code);
}

/** The ids of the recorded parameters of `resourceType` that are not among `present` (ascending). */
export function absentIdsOf(resourceType: string, present: ReadonlySet<string>): number[] {
  const out: number[] = [];
  for (const [code, id] of ids().get(resourceType) ?? []) if (!present.has(code)) out.push(id);
  return out;
}

/**
 * A SELECT of the rids of the resources of `resourceType` that have no value of the parameter `id`: the rows of
 * sp_missing naming it, and, while the index backfill of migration 028 has not reached them, the resources stored
 * before it that it has not written yet (rid in (checkpoint, upto]) tested the old way, `noRow(alias)` (no index row
 * of the parameter). Once the backfill is done that range is empty (its bounds are NULL) and costs nothing.
 */
export function absentRidsSql(
  resourceType: string,
  id: number,
  noRow: (alias: string) => string,
  bind: (v: unknown) => string,
): string {
  const backfill = (col: string): string =>
    `(SELECT bf.${col} FROM index_backfills bf WHERE bf.table_name = ${bind(MISSING_TABLE)} AND bf.state <> 'done')`;
  return (
    `SELECT ms.rid FROM ${MISSING_TABLE} ms WHERE ms.absent @> ${bind([id])}::smallint[] ` +
    `UNION ALL SELECT mu.rid FROM resources mu WHERE mu.resource_type = ${bind(resourceType)} ` +
    `AND mu.rid > ${backfill('checkpoint')} AND mu.rid <= ${backfill('upto')} AND ${noRow('mu')}`
  );
}

/**
 * Conditions on a token index row `x` whose union is every row that does NOT match any of `values` (the rows of
 * another value): index ranges around each matched code (`value < c`, between codes, `value > c`, `value IS NULL`),
 * and for a code matched only within some systems, the ranges around those systems. Undefined when a value has no
 * code (`system|`): that match is no range of the value index.
 */
export function otherTokenRanges(
  values: readonly FilterValue[],
  x: string,
  bind: (v: unknown) => string,
): string[] | undefined {
  // Per code: the systems it matches in ('' = no system), or 'any'.
  const codes = new Map<string, Set<string> | 'any'>();
  for (const v of values) {
    if (v.kind !== 'token' || v.code === undefined) return undefined;
    const seen = codes.get(v.code);
    if (v.system === undefined) codes.set(v.code, 'any');
    else if (seen !== 'any') codes.set(v.code, new Set([...(seen ?? []), v.system]));
  }
  const sorted = [...codes.keys()];
  const out = around(`${x}.value`, sorted, bind);
  out.push(`${x}.value IS NULL`);
  for (const code of sorted) {
    const systems = codes.get(code);
    if (systems === 'any' || systems === undefined) continue;
    const named = [...systems].filter((s) => s !== '');
    const same = `${x}.value = ${bind(code)}`;
    for (const r of around(`${x}.system`, named, bind)) out.push(`${same} AND ${r}`);
    if (!systems.has('')) out.push(`${same} AND ${x}.system IS NULL`);
    else if (named.length === 0) out.push(`${same} AND ${x}.system IS NOT NULL`);
  }
  return out;
}

/**
 * Ranges of `col` whose union is every value but the points: below the least, above the greatest, and between them
 * the others. The least and greatest are taken by PostgreSQL (min/max in the column's collation), so the ranges
 * follow the index's order whatever the collation.
 */
function around(col: string, points: readonly string[], bind: (v: unknown) => string): string[] {
  if (points.length === 0) return [];
  if (points.length === 1) {
    const p = bind(points[0]);
    return [`${col} < ${p}`, `${col} > ${p}`];
  }
  const all = `${bind(points)}::text[]`;
  const lo = `(SELECT min(u) FROM unnest(${all}) u)`;
  const hi = `(SELECT max(u) FROM unnest(${all}) u)`;
  return [`${col} < ${lo}`, `${col} > ${hi}`, `${col} > ${lo} AND ${col} < ${hi} AND ${col} <> ALL(${all})`];
}
