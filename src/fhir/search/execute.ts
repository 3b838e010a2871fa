// Runs a SearchRequest: one query for the page, one for the total when asked, one per _include/_revinclude.
// Paging is keyset-based (`_cursor`): the default order (last_updated, rid) and any `_sort` order (sort key values,
// then rid). A row never appears twice or is skipped across pages unless its own sort values change in between;
// rows inserted meanwhile appear on a later page when they sort after the cursor. https://hl7.org/fhir/R4/search.html
import type { Queryable } from '../../storage/db.js';
import type { AccessScope } from '../types.js';
import { encodeCursor } from './cursor.js';
import type { SearchRequest } from './request.js';
import { countSql, includeSql, revincludeSql, searchSql } from './sql.js';

export interface SearchEntry {
  resourceType: string;
  id: string;
  /** `content::text` as stored: never parsed and re-serialised here. */
  json: string;
}

export interface SearchResult {
  matches: SearchEntry[];
  included: SearchEntry[];
  /** With `_offset`: the parameters of the previous page (none on the first). */
  previousCursor?: Record<string, string>;
  /** Number of matches: always with `_total=accurate|estimate` and `_summary=count` (or `_count=0`); also when the first page holds every match. */
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

export async function executeSearch(
  db: Queryable,
  req: SearchRequest,
  scope: AccessScope,
): Promise<SearchResult> {
  const countOnly = req.summary === 'count' || req.count === 0;
  const wantTotal = countOnly || req.total === 'accurate' || req.total === 'estimate';
  const result: SearchResult = { matches: [], included: [] };
  if (!countOnly) {
    const q = searchSql(req, scope);
    const rows = (await db.query<PageRow>(q.text, q.values)).rows;
    const more = rows.length > req.count;
    const page = more ? rows.slice(0, req.count) : rows;
    result.matches = page.map((r) => ({ resourceType: r.resource_type, id: r.id, json: r.json }));
    const last = page[page.length - 1];
    if (more && last && req.offset !== undefined) {
      // Offset paging stays offset paging: the next page is the next offset.
      result.nextCursor = { _offset: String(req.offset + req.count) };
    } else if (more && last) {
      const keyCount = Math.max(1, req.sort.length);
      const keys = Array.from({ length: keyCount }, (_, i) => (last[`k${i}`] ?? null) as string | null);
      result.nextCursor = { _cursor: encodeCursor({ rid: Number(last.rid), keys }) };
    }
    if (req.offset !== undefined && req.offset > 0)
      result.previousCursor = { _offset: String(Math.max(0, req.offset - req.count)) };
    if (!more && !req.cursor && !wantTotal) result.total = (req.offset ?? 0) + page.length;
    if (page.length > 0) result.included = await includes(db, req, scope, page);
  }
  if (wantTotal) {
    const q = countSql(req, scope);
    const r = await db.query<{ total: number }>(q.text, q.values);
    result.total = Number(r.rows[0]?.total ?? 0);
  }
  return result;
}

async function includes(
  db: Queryable,
  req: SearchRequest,
  scope: AccessScope,
  page: PageRow[],
): Promise<SearchEntry[]> {
  if (req.include.length === 0 && req.revinclude.length === 0) return [];
  const seen = new Set(page.map((r) => `${r.resource_type}/${r.id}`));
  const out: SearchEntry[] = [];
  const add = (rows: SearchEntry[]): void => {
    for (const r of rows) {
      const key = `${r.resourceType}/${r.id}`;
      if (seen.has(key)) continue;
      seen.add(key);
      out.push({ resourceType: r.resourceType, id: r.id, json: r.json });
    }
  };
  const rids = page.map((r) => Number(r.rid));
  for (const spec of req.include) {
    if (spec.sourceType !== req.resourceType) continue;
    const q = includeSql(spec, rids, scope);
    add(toEntries((await db.query<PageRow>(q.text, q.values)).rows));
  }
  const refs = page.map((r) => `${r.resource_type}/${r.id}`);
  for (const spec of req.revinclude) {
    if (spec.targetType && spec.targetType !== req.resourceType) continue;
    const q = revincludeSql(spec, refs, scope);
    add(toEntries((await db.query<PageRow>(q.text, q.values)).rows));
  }
  return out;
}

function toEntries(rows: PageRow[]): SearchEntry[] {
  return rows.map((r) => ({ resourceType: r.resource_type, id: r.id, json: r.json }));
}
