// A search of a conformance type returns the project's own matches and then the shared ones (API.md §9,
// https://hl7.org/fhir/R4/search.html#paging): the project's pages come first (keyset or offset paging as for any
// type); the page where they end is filled with the first shared matches, and the pages after it walk the shared
// matches by position, with a `_cursor` of their own (`s.` + the position, the first shared page's position and the
// cursor of the page before it), so that every match is seen once across pages. `_sort` orders each part: the project's
// rows in the database, the shared ones in memory (shared-sort.ts); `_include`s follow the project's rows only.
import type { Queryable } from '../../storage/db.js';
import type { ConformanceType, SharedSet } from '../conformance/model.js';
import { matchShared } from '../conformance/shared-search.js';
import { FhirError } from '../outcome.js';
import { executeSearch, type SearchResult } from '../search/execute.js';
import type { SearchRequest } from '../search/request.js';
import type { AccessScope } from '../types.js';

const PREFIX = 's.';

/** Where a shared page starts: `k` (position among the shared matches), `s0` (the first shared-only page's position), `m` (the cursor of the page that mixed both, null for the first page). */
export interface SharedCursor {
  k: number;
  s0: number;
  m: string | null;
}

export function encodeSharedCursor(c: SharedCursor): string {
  return PREFIX + Buffer.from(JSON.stringify([c.k, c.s0, c.m]), 'utf8').toString('base64url');
}

/** The shared-page cursor of a query (then taken out of it: the search engine's cursor is another), or undefined. */
export function takeSharedCursor(query: Record<string, string | string[] | undefined>): {
  cursor?: SharedCursor;
  query: Record<string, string | string[] | undefined>;
} {
  const raw = query._cursor;
  const text = Array.isArray(raw) ? raw[raw.length - 1] : raw;
  if (typeof text !== 'string' || !text.startsWith(PREFIX)) return { query };
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text.slice(PREFIX.length), 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const [k, s0, m] = Array.isArray(parsed) && parsed.length === 3 ? (parsed as unknown[]) : [];
  if (
    !Number.isSafeInteger(k) ||
    !Number.isSafeInteger(s0) ||
    (k as number) < 0 ||
    (s0 as number) < 0 ||
    (m !== null && (typeof m !== 'string' || m.startsWith(PREFIX)))
  ) {
    throw new FhirError(
      'invalid',
      'Invalid _cursor: it does not belong to this search',
      'search.bad-shared-cursor',
    );
  }
  const rest = { ...query };
  delete rest._cursor;
  return { cursor: { k: k as number, s0: s0 as number, m: m as string | null }, query: rest };
}

export interface SharedSearch {
  shared: SharedSet;
  type: ConformanceType;
  /** The query's filters (as given; result parameters are left out by the matcher). */
  query: Record<string, string | string[] | undefined>;
  /** The shared-page cursor of the request, if it has one. */
  cursor?: SharedCursor;
  /** The request's own `_cursor` (a project page), kept in the shared cursors for the `previous` link. */
  rawCursor?: string;
}

/** The search's result with the shared matches added, and a warning when they could not be searched. */
export async function executeWithShared(
  db: Queryable,
  req: SearchRequest,
  scope: AccessScope,
  s: SharedSearch,
): Promise<SearchResult & { warning?: string }> {
  const found = await matchShared(s.shared, s.type, s.query, req.ignored ?? [], req.sort);
  if ('unsupported' in found) {
    const r = await executeSearch(db, req, scope);
    return { ...r, warning: `Shared ${s.type} resources were not searched: ${found.unsupported}` };
  }
  const hits = found.hits;
  const countOnly = req.summary === 'count' || req.count === 0;
  const wantTotal = countOnly || req.total === 'accurate' || req.total === 'estimate';
  if (s.cursor && !countOnly) {
    // A shared-only page: the project's rows were all on earlier pages.
    const { k, s0, m } = s.cursor;
    const total = wantTotal
      ? (await executeSearch(db, { ...req, summary: 'count' }, scope)).total
      : undefined;
    const page = hits.slice(k, k + req.count);
    const result: SearchResult = {
      matches: page.map((h) => ({ resourceType: s.type, id: h.id, json: h.json() })),
      included: [],
      previousCursor:
        k > s0
          ? { _cursor: encodeSharedCursor({ k: Math.max(s0, k - req.count), s0, m }) }
          : m !== null
            ? { _cursor: m }
            : {},
    };
    if (k + req.count < hits.length)
      result.nextCursor = { _cursor: encodeSharedCursor({ k: k + req.count, s0, m }) };
    if (total !== undefined) result.total = total + hits.length;
    return result;
  }
  const r = await executeSearch(db, req, scope);
  if (countOnly || r.nextCursor) {
    if (r.total !== undefined) r.total += hits.length;
    return r;
  }
  // The project's matches end on this page: the shared ones follow.
  const room = req.count - r.matches.length;
  let start = 0;
  if (req.offset !== undefined) {
    // Offset paging: the page's offset among all matches, past the project's.
    const own = r.total ?? req.offset + r.matches.length;
    start = Math.max(0, req.offset - own);
    if (start + room < hits.length) r.nextCursor = { _offset: String(req.offset + req.count) };
  } else if (room < hits.length) {
    r.nextCursor = { _cursor: encodeSharedCursor({ k: room, s0: room, m: s.rawCursor ?? null }) };
  }
  for (const h of hits.slice(start, start + room))
    r.matches.push({ resourceType: s.type, id: h.id, json: h.json() });
  if (r.total !== undefined) r.total += hits.length;
  return r;
}
