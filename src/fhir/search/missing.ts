// `:missing=true` and `:not` from an index (migration 028): `sp_missing` holds per resource the ids of the built-in
// parameters it has no value for, so "no value of P" is a GIN containment probe rather than an anti-join over every
// resource of the type. https://hl7.org/fhir/R4/search.html#modifiers
import { paramIds } from '../../storage/migrations/028-param-codes.js';
import type { FilterValue } from './request.js';
import { systemKey } from './system-key.js';

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
    const named = [...systems].filter((s) => s !== '').map((s) => systemKey(s));
    const same = `${x}.value = ${bind(code)}`;
    for (const r of around(`${x}.system`, named, bind)) out.push(`${same} AND ${r}`);
    if (!systems.has('')) out.push(`${same} AND ${x}.system IS NULL`);
    else if (named.length === 0) out.push(`${same} AND ${x}.system IS NOT NULL`);
  }
  return out;
}

/**
 * Conditions on `col` whose union is every value but the points, each an index range with literal bounds (so the
 * planner estimates each from the statistics): below the first, between neighbours, above the last. The points are
 * sorted here, and every range also requires PostgreSQL to agree on that order in the column's collation (constant
 * comparisons, folded when the statement is planned); where it does not, one filtered scan of the parameter's rows
 * stands in for them.
 */
function around(col: string, points: readonly string[], bind: (v: unknown) => string): string[] {
  if (points.length === 0) return [];
  const p = [...points].sort().map((v) => bind(v));
  if (p.length === 1) return [`${col} < ${p[0]}`, `${col} > ${p[0]}`];
  const sorted = p
    .slice(1)
    .map((v, i) => `${p[i]}::text < ${v}::text`)
    .join(' AND ');
  const out = [`${col} < ${p[0]}`];
  for (let i = 1; i < p.length; i++) out.push(`${col} > ${p[i - 1]} AND ${col} < ${p[i]}`);
  out.push(`${col} > ${p[p.length - 1]}`);
  return [
    ...out.map((c) => `${c} AND (${sorted})`),
    `${col} <> ALL(ARRAY[${p.join(', ')}]::text[]) AND NOT (${sorted})`,
  ];
}
