// Which shared conformance resources a search matches (API.md §9, https://hl7.org/fhir/R4/search.html), decided in
// memory by the search engine's own matcher (subscriptions/match-search.ts: the same parser, parameters and index
// values), with a fast path for `url` (and `url` + `version`) through the canonical index, and ordered by `_sort`
// (shared-sort.ts). Parameters whose expressions reach only light elements are matched on each resource's stub; the
// others on the full resource.
import { FhirError } from '../outcome.js';
import { RESULT_PARAMETERS } from '../search/parse.js';
import { getSearchParam } from '../search/registry.js';
import { compileCriteria } from '../subscriptions/match-search.js';
import type { SortKey } from '../search/request.js';
import type { Resource } from '../types.js';
import type { ConformanceType, SharedSet } from './model.js';
import { STUB_OMITTED } from './shared-load.js';
import { isSharedIndex, type SharedEntry } from './shared-set.js';
import { compareKeys, sortKeys } from './shared-sort.js';

/** One shared match: its id and (read when the page shows it) its JSON text. */
export interface SharedHit {
  id: string;
  json: () => string;
}

export type SharedMatch = { hits: SharedHit[] } | { unsupported: string };

/** Parameters of the query that choose matches (the result parameters and those a lenient search left out go). */
function filterQuery(
  query: Record<string, string | string[] | undefined>,
  ignored: readonly string[],
): [string, string][] {
  const out: [string, string][] = [];
  for (const [key, raw] of Object.entries(query)) {
    if (raw === undefined || RESULT_PARAMETERS.has(key) || key === '_format' || key === '_pretty') continue;
    if (key.startsWith('_include') || key.startsWith('_revinclude') || ignored.includes(key)) continue;
    for (const v of Array.isArray(raw) ? raw : [raw]) if (v !== '') out.push([key, v]);
  }
  return out;
}

/** Whether a parameter's expression reaches an element a stub leaves out (then full resources are matched). */
function needsFull(type: string, key: string): boolean {
  const code = key.split(':')[0] as string;
  const expression = getSearchParam(type, code)?.expression ?? '';
  return [...STUB_OMITTED].some((el) => expression.includes(`${type}.${el}`));
}

const yieldToOthers = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** `url=<one url>` with or without `version=<one version>`: answered from the canonical index. */
function fastPath(params: [string, string][]): { url: string; version?: string } | undefined {
  const urls = params.filter(([k]) => k === 'url');
  const versions = params.filter(([k]) => k === 'version');
  if (urls.length !== 1 || versions.length > 1 || urls.length + versions.length !== params.length)
    return undefined;
  const url = (urls[0] as [string, string])[1];
  const version = versions[0]?.[1];
  // An OR list or an escaped value goes to the matcher, which reads them as the search does.
  if (/[,\\]/.test(url) || (version !== undefined && /[,\\|]/.test(version))) return undefined;
  return version === undefined ? { url } : { url, version };
}

/** A hit with its sort keys. */
type Sortable = { hit: SharedHit; keys: (string | number | null)[]; n: number };

/** The hits in `_sort` order (the set's order among equals). */
function sorted(sort: readonly SortKey[], rows: Sortable[]): SharedHit[] {
  if (sort.length > 0) rows.sort((a, b) => compareKeys(sort, a.keys, b.keys) || a.n - b.n);
  return rows.map((r) => r.hit);
}

/**
 * The shared resources of `type` matching the query's filters, in `_sort` order, else the set's stable order. `{ unsupported }` names why
 * the matcher cannot decide the query for shared resources (chains, `_has`, `_text` and the like); the caller then
 * answers with the project's own only and a warning.
 */
export async function matchShared(
  shared: SharedSet,
  type: ConformanceType,
  query: Record<string, string | string[] | undefined>,
  ignored: readonly string[] = [],
  sort: readonly SortKey[] = [],
): Promise<SharedMatch> {
  const params = filterQuery(query, ignored);
  const keysOf = (r: Resource) => (sort.length ? sortKeys(type, sort, r) : []);
  if (!isSharedIndex(shared)) {
    // A SharedSet without the index (a test's own): full resources, matched one by one.
    const criteria = compile(type, params);
    if (typeof criteria === 'string') return { unsupported: criteria };
    const rows: Sortable[] = [];
    for (const r of shared.all(type)) {
      const hit = { id: r.id as string, json: () => JSON.stringify(r) };
      if (criteria.matches(r)) rows.push({ hit, keys: keysOf(r), n: rows.length });
    }
    return { hits: sorted(sort, rows) };
  }
  await shared.ready();
  const hitOf = (e: SharedEntry): SharedHit => ({ id: e.id, json: () => JSON.stringify(e.read()) });
  // Stubs suffice unless a filter or sort parameter reaches an element they leave out.
  const full = [...params.map(([k]) => k), ...sort.map((k) => k.code)].some((k) => needsFull(type, k));
  const resourceOf = (e: SharedEntry): Resource => (full ? e.read() : (JSON.parse(e.stub) as Resource));
  const fast = fastPath(params);
  if (fast) {
    const found = shared
      .entriesByUrl(type, fast.url)
      .filter((e) => fast.version === undefined || e.version === fast.version);
    return {
      hits: sorted(
        sort,
        found.map((e, n) => ({ hit: hitOf(e), keys: sort.length ? keysOf(resourceOf(e)) : [], n })),
      ),
    };
  }
  const criteria = compile(type, params);
  if (typeof criteria === 'string') return { unsupported: criteria };
  const rows: Sortable[] = [];
  let i = 0;
  for (const e of shared.entries(type)) {
    // A search over thousands of resources gives way to other requests now and then.
    if (++i % (full ? 20 : 500) === 0) await yieldToOthers();
    const r = resourceOf(e);
    if (criteria.matches(r)) rows.push({ hit: hitOf(e), keys: keysOf(r), n: rows.length });
  }
  return { hits: sorted(sort, rows) };
}

function compile(type: string, params: [string, string][]): ReturnType<typeof compileCriteria> | string {
  const text = params.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
  try {
    return compileCriteria(text, { resourceType: type });
  } catch (err) {
    if (err instanceof FhirError && err.code === 'subscription.criteria-unsupported') {
      return err.message.replace(/^Subscription criteria: /, '');
    }
    throw err;
  }
}
