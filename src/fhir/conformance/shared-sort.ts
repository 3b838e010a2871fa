// `_sort` among the shared matches of a search (https://hl7.org/fhir/R4/search.html#sort), with the values the index
// writer extracts (extract.ts, normalise.ts) and the rule sql.ts orders stored rows by: a resource's smallest value
// ascending, its largest descending (dates: the range's low or high end), missing values last ascending and first
// descending, then the set's own order. Text compares by code point (the database's collation may differ slightly).
import { indexedParamsOf } from '../search/extract.js';
import { toIndexValues, type IndexValue } from '../search/normalise.js';
import type { SortKey } from '../search/request.js';
import type { Resource } from '../types.js';

type Key = string | number | null;

function scalar(v: IndexValue, descending: boolean): Key {
  switch (v.t) {
    case 'string':
      return v.norm;
    case 'token':
      return v.value;
    case 'reference':
      return v.ref;
    case 'uri':
      return v.value;
    case 'date':
      return descending ? v.high : v.low;
    case 'number':
    case 'quantity':
      return Number(v.value);
    case 'identifier':
      // Only :of-type and :identifier read these rows; a sort reads the token rows of the same values.
      return null;
  }
}

/** One sort key of a resource, or null when it has no value. */
function keyOf(type: string, k: SortKey, r: Resource): Key {
  if (k.code === '_id') return typeof r.id === 'string' ? r.id : null;
  if (k.code === '_lastUpdated') {
    const t = Date.parse(String(r.meta?.lastUpdated ?? ''));
    return Number.isNaN(t) ? null : t;
  }
  const compiled = indexedParamsOf(type).find((c) => c.param.code === k.code);
  if (!compiled) return null;
  let values: IndexValue[];
  try {
    values = toIndexValues(compiled.param.type, compiled.evaluate(r as Record<string, unknown>));
  } catch {
    return null;
  }
  let best: Key = null;
  for (const v of values) {
    const s = scalar(v, k.descending);
    if (s === null) continue;
    if (best === null || (k.descending ? s > best : s < best)) best = s;
  }
  return best;
}

/** The sort keys of each resource, computed once (the resource may be dropped afterwards). */
export function sortKeys(type: string, sort: readonly SortKey[], r: Resource): Key[] {
  return sort.map((k) => keyOf(type, k, r));
}

/** Compares two rows' keys as sql.ts orders them (ASC NULLS LAST, DESC NULLS FIRST); 0 keeps the set's order. */
export function compareKeys(sort: readonly SortKey[], a: Key[], b: Key[]): number {
  for (let i = 0; i < sort.length; i++) {
    const [x, y] = [a[i] ?? null, b[i] ?? null];
    if (x === y) continue;
    const desc = (sort[i] as SortKey).descending;
    if (x === null) return desc ? -1 : 1;
    if (y === null) return desc ? 1 : -1;
    const c = x < y ? -1 : 1;
    return desc ? -c : c;
  }
  return 0;
}
