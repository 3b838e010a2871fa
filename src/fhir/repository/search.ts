// search (type level, GET and POST _search): https://hl7.org/fhir/R4/http.html#search, search.html
import { AUDIT_EVENT, searchAuditEvents } from './audit-events.js';
import type { Queryable } from '../../storage/db.js';
import { assertChainsReadable, canRead, searchScope } from '../access.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { RawJson, type FhirResult } from '../result.js';
import { applyElements } from '../search/elements.js';
import { applySummary } from '../search/summary.js';
import { executeSearch, type SearchResult } from '../search/execute.js';
import { parseProjectSearch } from './custom-index.js';
import { resolveTerminology } from '../search/terminology.js';
import { leaves } from '../search/filter.js';
import type { SearchFilter, SearchRequest } from '../search/request.js';
import type { RepoContext } from './context.js';
import { isConformanceType } from '../conformance/model.js';
import { executeWithShared, takeSharedCursor } from './search-shared.js';

/** The resource types that the chains and reverse chains (`_has`) of a search read (for the access check). */
export function chainedTypes(req: Pick<SearchRequest, 'filters'>): string[] {
  const out: string[] = [];
  const walk = (f: SearchFilter): void => {
    if (f.expr) return leaves(f.expr).forEach(walk);
    const link = f.chain
      ? { type: f.chain.targetType, next: f.chain.filter }
      : f.has && { type: f.has.sourceType, next: f.has.filter };
    if (!link) return;
    out.push(link.type);
    walk(link.next);
  };
  req.filters.forEach(walk);
  return out;
}

/** The count limit of a search made through the API (config `searchCountLimit`; 0: none). */
export const countLimit = (ctx: Pick<RepoContext, 'searchCountLimit'>): { countLimit?: number } =>
  ctx.searchCountLimit ? { countLimit: ctx.searchCountLimit } : {};

/** The `outcome` entry that names the parameters a lenient search left out. */
function ignoredOutcome(ignored: readonly string[]): BundleEntryText {
  const outcome = {
    resourceType: 'OperationOutcome',
    issue: ignored.map((key) => ({
      severity: 'warning',
      code: 'not-supported',
      details: { text: `Unknown search parameter '${key}' ignored (Prefer: handling=lenient)` },
      expression: [key],
    })),
  };
  return { resource: JSON.stringify(outcome), search: { mode: 'outcome' } };
}

/** The `outcome` entry that tells the shared conformance resources were not searched (API.md §9). */
function sharedOutcome(message: string): BundleEntryText {
  const outcome = {
    resourceType: 'OperationOutcome',
    issue: [{ severity: 'warning', code: 'not-supported', details: { text: message } }],
  };
  return { resource: JSON.stringify(outcome), search: { mode: 'outcome' } };
}

export async function searchResources(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  selfUrl: string,
  opts: { compartment?: SearchRequest['compartment']; lenient?: boolean } = {},
): Promise<FhirResult> {
  if (resourceType === AUDIT_EVENT)
    return searchAuditEvents(db, ctx, query, selfUrl, {
      ...(opts.compartment ? { compartment: opts.compartment } : {}),
      ...(opts.lenient ? { lenient: true } : {}),
    });
  const scope = searchScope(ctx.actor, ctx.author, resourceType, ctx.scope);
  // A conformance type's search also returns the shared resources (API.md §9), a compartment search does not.
  const shared =
    ctx.conformance && isConformanceType(resourceType) && !opts.compartment
      ? { shared: ctx.conformance.shared, type: resourceType }
      : undefined;
  const taken = shared ? takeSharedCursor(query) : { query };
  const parsed = await parseProjectSearch(db, ctx, resourceType, taken.query, {
    lenient: opts.lenient === true,
    terminology: true,
    filter: true,
  });
  if (opts.compartment) parsed.compartment = opts.compartment;
  assertChainsReadable(ctx.actor, chainedTypes(parsed));
  // Value sets and code systems of the caller's project first, then the shared ones (API.md §9).
  const req = await resolveTerminology(parsed, ctx.conformance?.terminology, {
    projectId: ctx.actor.projectId,
    db,
  });
  const rawCursor = typeof query._cursor === 'string' && !taken.cursor ? query._cursor : undefined;
  const result = shared
    ? await executeWithShared(db, req, scope, {
        ...shared,
        query: taken.query,
        ...(taken.cursor ? { cursor: taken.cursor } : {}),
        ...(rawCursor !== undefined ? { rawCursor } : {}),
      })
    : await executeSearch(db, req, scope, countLimit(ctx));
  const outcomes: BundleEntryText[] = [];
  if (req.ignored?.length) outcomes.push(ignoredOutcome(req.ignored));
  if ('warning' in result && typeof result.warning === 'string') outcomes.push(sharedOutcome(result.warning));
  return searchsetBundle(ctx, req, result, selfUrl, {
    paged: Boolean(req.cursor || req.offset || taken.cursor),
    outcomes,
  });
}

/**
 * The searchset Bundle of a search's result: `self` (the search performed), `first` (when `paged`: the request was not
 * the first page), `previous` and `next` links, the matches, the included resources the caller may read, then the
 * `outcomes` entries.
 */
export function searchsetBundle(
  ctx: RepoContext,
  req: SearchRequest,
  result: SearchResult,
  selfUrl: string,
  opts: { paged: boolean; outcomes?: BundleEntryText[] },
): FhirResult {
  // The self link names the search performed: a `_count` above the cap shows the cap, ignored parameters are not.
  const self = new URL(selfUrl);
  const asked = self.searchParams.get('_count');
  if (asked !== null && asked !== String(req.count) && /^\d+$/.test(asked)) {
    self.searchParams.set('_count', String(req.count));
  }
  for (const key of req.ignored ?? []) self.searchParams.delete(key);
  selfUrl = self.toString();
  const link = [{ relation: 'self', url: selfUrl }];
  // `first` is the search without paging parameters; `next` and (with `_offset`) `previous` replace them.
  const page = (params: Record<string, string>): string => {
    const u = new URL(selfUrl);
    u.searchParams.delete('_cursor');
    u.searchParams.delete('_offset');
    for (const [k, v] of Object.entries(params)) u.searchParams.set(k, v);
    return u.toString();
  };
  if (opts.paged) link.push({ relation: 'first', url: page({}) });
  if (result.previousCursor) link.push({ relation: 'previous', url: page(result.previousCursor) });
  if (result.nextCursor) link.push({ relation: 'next', url: page(result.nextCursor) });
  const shape = (json: string): string =>
    req.elements?.length ? applyElements(json, req.elements) : applySummary(json, req.summary);
  const entry: BundleEntryText[] = [];
  if (req.summary !== 'count') {
    for (const m of result.matches) {
      entry.push({
        fullUrl: `${ctx.fhirBase}/${m.resourceType}/${m.id}`,
        resource: shape(m.json),
        search: { mode: 'match' },
      });
    }
    for (const m of result.included) {
      if (!canRead(ctx.actor, m.resourceType, 'read', m.id)) continue;
      entry.push({
        fullUrl: `${ctx.fhirBase}/${m.resourceType}/${m.id}`,
        resource: applySummary(m.json, req.summary),
        search: { mode: 'include' },
      });
    }
  }
  entry.push(...(opts.outcomes ?? []));
  const text = bundleToJson(
    { type: 'searchset', ...(result.total !== undefined ? { total: result.total } : {}), link, entry },
    ctx.newId(),
  );
  return { status: 200, body: new RawJson(text) };
}
