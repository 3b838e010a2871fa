// Runs a SearchRequest: one query for the page, one for the total when asked, one per _include/_revinclude.
// Paging is keyset-based (`_cursor`): the default order (last_updated, rid; for a search with one string or
// `system|code` token filter, that filter's index order: see drivingFilter in sql.ts) and any `_sort` order (sort
// key values, then rid). A row never appears twice or is skipped across pages unless its own sort values change in between;
// rows inserted meanwhile appear on a later page when they sort after the cursor. https://hl7.org/fhir/R4/search.html
import type { Queryable } from '../../storage/db.js';
import type { AccessScope } from '../types.js';
import { encodeCursor } from './cursor.js';
import type { IncludeSpec, SearchRequest } from './request.js';
import { FhirError } from '../outcome.js';
import { planMissing } from './missing-plan.js';
import {
  countSql,
  estimateSql,
  INCLUDE_LIMIT,
  includeSql,
  revincludeSql,
  searchSql,
  sortWalkSql,
} from './sql.js';

export interface SearchEntry {
  resourceType: string;
  id: string;
  /** `content::text` as stored: never parsed and re-serialised here. */
  json: string;
}

export interface SearchResult {
  matches: SearchEntry[];
  included: SearchEntry[];
  /** The parameters of the previous page (none on the first). */
  previousCursor?: Record<string, string>;
  /**
   * Number of matches: always with `_total=accurate|estimate` and `_summary=count` (or `_count=0`); also when a page
   * reached without `_cursor` (the first, or an `_offset` page) is the last (counted when it lies past the last match).
   */
  total?: number;
  /** Query parameters to add to the request for the next page; absent on the last page. */
  nextCursor?: Record<string, string>;
}

interface PageRow {
  rid: number | string;
  resource_type: string;
  id: string;
  json: string;
  [key: string]: unknown;
}

export interface SearchOptions {
  /**
   * Config `searchCountLimit`: a total is counted up to this many matches. Beyond it `_total=accurate`, `_summary=count`
   * and `_count=0` answer 400 too-costly naming the limit, `_total=estimate` the planner's estimate, and a last page
   * reached by `_offset` past the end leaves the total out. Absent: counted whatever the number (internal callers).
   */
  countLimit?: number;
}

/** `_total=estimate` counts exactly up to this many matches (or the count limit when lower), then estimates. */
export const ESTIMATE_EXACT_UP_TO = 10_000;

export async function executeSearch(
  db: Queryable,
  asked: SearchRequest,
  scope: AccessScope,
  opts: SearchOptions = {},
): Promise<SearchResult> {
  const req = await planMissing(db, asked);
  const countOnly = req.summary === 'count' || req.count === 0;
  const wantTotal = countOnly || req.total === 'accurate' || req.total === 'estimate';
  const result: SearchResult = { matches: [], included: [] };
  if (!countOnly) {
    const rows = await pageRows(db, req, scope);
    const back = req.cursor?.before === true;
    // Read backwards, one row more tells there is a page before; the page is then turned round.
    const more = rows.length > req.count;
    const page = more ? rows.slice(0, req.count) : rows;
    if (back) page.reverse();
    result.matches = page.map((r) => ({ resourceType: r.resource_type, id: r.id, json: r.json }));
    const first = page[0];
    const last = page[page.length - 1];
    if (req.offset !== undefined) {
      // Offset paging stays offset paging: the next page is the next offset.
      if (more) result.nextCursor = { _offset: String(req.offset + req.count) };
      if (req.offset > 0) result.previousCursor = { _offset: String(Math.max(0, req.offset - req.count)) };
    } else {
      if (last && (back || more)) result.nextCursor = { _cursor: cursorOf(req, last, false) };
      if (first && (back ? more : req.cursor))
        result.previousCursor = { _cursor: cursorOf(req, first, true) };
    }
    // The last page tells the total: its offset plus its rows. An empty page past the end does not (the matches
    // may end anywhere before its offset): there they are counted.
    if (!more && !req.cursor && !wantTotal) {
      const pastEnd = page.length === 0 && (req.offset ?? 0) > 0;
      const total = pastEnd
        ? await boundedCount(db, req, scope, opts.countLimit)
        : (req.offset ?? 0) + page.length;
      if (total !== undefined) result.total = total;
    }
    if (page.length > 0) result.included = await includes(db, req, scope, page);
  }
  if (wantTotal) result.total = await total(db, req, scope, opts.countLimit);
  return result;
}

/** The total asked for: accurate (or 400 beyond the count limit), or with `_total=estimate` the planner's beyond it. */
async function total(
  db: Queryable,
  req: SearchRequest,
  scope: AccessScope,
  limit: number | undefined,
): Promise<number> {
  if (req.total === 'estimate') {
    const exactUpTo = Math.min(limit ?? ESTIMATE_EXACT_UP_TO, ESTIMATE_EXACT_UP_TO);
    const n = await boundedCount(db, req, scope, exactUpTo);
    return n ?? Math.max(exactUpTo + 1, await estimate(db, req, scope));
  }
  const n = await boundedCount(db, req, scope, limit);
  if (n === undefined)
    throw new FhirError(
      'too-costly',
      `Search too costly: more than ${limit} matches to count (searchCountLimit is ${limit}); ` +
        'ask _total=estimate for an estimate, or narrow the search',
      'search.count-limit',
      { status: 400 },
    );
  return n;
}

/** The number of matches, or undefined when there are more than `limit` (counting stops there). */
async function boundedCount(
  db: Queryable,
  req: SearchRequest,
  scope: AccessScope,
  limit: number | undefined,
): Promise<number | undefined> {
  if (limit === undefined) return count(db, req, scope);
  const q = countSql(req, scope, limit + 1);
  const n = Number((await db.query<{ total: number }>(q.text, q.values)).rows[0]?.total ?? 0);
  return n > limit ? undefined : n;
}

/** The planner's estimate of the matches: the row count EXPLAIN gives the search's statement. */
async function estimate(db: Queryable, req: SearchRequest, scope: AccessScope): Promise<number> {
  const q = estimateSql(req, scope);
  const res = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${q.text}`, q.values);
  const raw = res.rows[0]?.['QUERY PLAN'];
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan?: { 'Plan Rows'?: number } }[];
  return Math.round(plan[0]?.Plan?.['Plan Rows'] ?? 0);
}

/**
 * The page's rows (`count + 1`): from one query, or for a search sorted by one parameter from the segments of
 * sortWalkSql, read in turn until the page is full (an `_offset` is skipped here).
 */
async function pageRows(db: Queryable, req: SearchRequest, scope: AccessScope): Promise<PageRow[]> {
  const walk = sortWalkSql(req, scope);
  if (!walk) {
    const q = searchSql(req, scope);
    return (await db.query<PageRow>(q.text, q.values)).rows;
  }
  const start = req.offset ?? 0;
  const want = start + req.count + 1;
  const rows: PageRow[] = [];
  for (const q of walk) {
    if (rows.length >= want) break;
    rows.push(...(await db.query<PageRow>(q.text, q.values)).rows);
  }
  return rows.slice(start, want);
}

async function count(db: Queryable, req: SearchRequest, scope: AccessScope): Promise<number> {
  const q = countSql(req, scope);
  const r = await db.query<{ total: number }>(q.text, q.values);
  return Number(r.rows[0]?.total ?? 0);
}

/** The `_cursor` of a row: the page after it, or (`before`) the page before it. */
function cursorOf(req: SearchRequest, row: PageRow, before: boolean): string {
  const keyCount = Math.max(1, req.sort.length);
  const keys = Array.from({ length: keyCount }, (_, i) => (row[`k${i}`] ?? null) as string | null);
  return encodeCursor({ rid: Number(row.rid), keys, ...(before ? { before } : {}) });
}

/** Rounds of `:iterate` after the first: each starts from what the previous round added. */
export const INCLUDE_ITERATIONS = 3;

async function includes(
  db: Queryable,
  req: SearchRequest,
  scope: AccessScope,
  page: PageRow[],
): Promise<SearchEntry[]> {
  if (req.include.length === 0 && req.revinclude.length === 0) return [];
  const seen = new Set(page.map((r) => `${r.resource_type}/${r.id}`));
  const out: (SearchEntry & { rid: number })[] = [];
  const add = (rows: (SearchEntry & { rid: number })[]): void => {
    for (const r of rows) {
      const key = `${r.resourceType}/${r.id}`;
      if (seen.has(key) || out.length >= INCLUDE_LIMIT) continue;
      seen.add(key);
      out.push(r);
    }
  };
  // First round: from the page's matches; then `:iterate` specs again from what the last round added.
  let from = page.map((r) => ({ rid: Number(r.rid), resourceType: r.resource_type, id: r.id }));
  for (let round = 0; round <= INCLUDE_ITERATIONS && from.length > 0; round++) {
    const specs = (list: IncludeSpec[]): IncludeSpec[] =>
      round === 0 ? list : list.filter((s) => s.iterate);
    const before = out.length;
    for (const spec of specs(req.include)) {
      const rids = from.filter((r) => r.resourceType === spec.sourceType).map((r) => r.rid);
      if (rids.length === 0) continue;
      const q = includeSql(spec, rids, scope);
      add(toEntries((await db.query<PageRow>(q.text, q.values)).rows));
    }
    for (const spec of specs(req.revinclude)) {
      const refs = from
        .filter((r) => !spec.targetType || spec.targetType === r.resourceType)
        .map((r) => `${r.resourceType}/${r.id}`);
      if (refs.length === 0) continue;
      const q = revincludeSql(spec, refs, scope);
      add(toEntries((await db.query<PageRow>(q.text, q.values)).rows));
    }
    from = out.slice(before).map((e) => ({ rid: e.rid, resourceType: e.resourceType, id: e.id }));
  }
  return out.map(({ resourceType, id, json }) => ({ resourceType, id, json }));
}

function toEntries(rows: PageRow[]): (SearchEntry & { rid: number })[] {
  return rows.map((r) => ({ rid: Number(r.rid), resourceType: r.resource_type, id: r.id, json: r.json }));
}
