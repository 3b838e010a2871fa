// search (type level, GET and POST _search): https://hl7.org/fhir/R4/http.html#search, search.html
import type { Queryable } from '../../storage/db.js';
import { assertChainsReadable, canRead, searchScope } from '../access.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { RawJson, type FhirResult } from '../result.js';
import { applyElements } from '../search/elements.js';
import { applySummary } from '../search/summary.js';
import { executeSearch } from '../search/execute.js';
import { parseProjectSearch } from './custom-index.js';
import type { SearchFilter, SearchRequest } from '../search/request.js';
import type { RepoContext } from './context.js';

/** The resource types that the chains and reverse chains (`_has`) of a search read (for the access check). */
export function chainedTypes(req: Pick<SearchRequest, 'filters'>): string[] {
  const out: string[] = [];
  const walk = (f: SearchFilter): void => {
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

export async function searchResources(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  selfUrl: string,
  opts: { compartment?: SearchRequest['compartment']; lenient?: boolean } = {},
): Promise<FhirResult> {
  const scope = searchScope(ctx.actor, ctx.author, resourceType, ctx.scope);
  const req = await parseProjectSearch(db, ctx, resourceType, query, { lenient: opts.lenient === true });
  if (opts.compartment) req.compartment = opts.compartment;
  assertChainsReadable(ctx.actor, chainedTypes(req));
  const result = await executeSearch(db, req, scope);
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
  if (req.cursor || req.offset) link.push({ relation: 'first', url: page({}) });
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
  if (req.ignored?.length) entry.push(ignoredOutcome(req.ignored));
  const text = bundleToJson(
    { type: 'searchset', ...(result.total !== undefined ? { total: result.total } : {}), link, entry },
    ctx.newId(),
  );
  return { status: 200, body: new RawJson(text) };
}
