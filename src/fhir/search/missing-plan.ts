// How a search answers `:missing=true` and token `:not` (issue 30, migration 028): from their candidates when those are
// few, else by the anti-join as before. PostgreSQL cannot estimate the candidates of a union (it assumes 200), so the
// choice is made here by counting them, up to a cap, with index reads only: few (the filter matches nothing or little,
// where the anti-join read every resource of the type) → the search starts from them; many → the match is broad, and
// walking the resources in page order finds a page at once, as before. https://hl7.org/fhir/R4/search.html#modifiers
import type { Queryable } from '../../storage/db.js';
import type { SearchFilter, SearchRequest } from './request.js';
import { candidateCountSql } from './sql.js';

/** Up to this many candidates, a search starts from them (each then read by rid). */
export const CANDIDATE_LIMIT = 2000;

/** `req` with its `:missing=true` and token `:not` filters marked `fromCandidates` where they have few. */
export async function planMissing(db: Queryable, req: SearchRequest): Promise<SearchRequest> {
  if (req.system || !req.filters.some((f) => f.missing === true || f.modifier === 'not')) return req;
  const filters: SearchFilter[] = [];
  let changed = false;
  for (const f of req.filters) {
    const q =
      f.missing === true || f.modifier === 'not'
        ? candidateCountSql(req.resourceType, f, CANDIDATE_LIMIT + 1)
        : undefined;
    if (q) {
      const row = (await db.query<{ n: number; pending: boolean }>(q.text, q.values)).rows[0];
      // Until the index backfill has written sp_missing for every resource stored before migration 028, absences
      // are not all recorded: the anti-join.
      if (row && !row.pending && Number(row.n) <= CANDIDATE_LIMIT) {
        filters.push({ ...f, fromCandidates: true });
        changed = true;
        continue;
      }
    }
    filters.push(f);
  }
  return changed ? { ...req, filters } : req;
}
