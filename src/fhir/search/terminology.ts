// The step between parse.ts and sql.ts for the token modifiers that need terminology (API.md §9): `:in` and `:not-in`
// (a ValueSet canonical, expanded) and `:below` and `:above` (a code of a code system with a hierarchy) become the
// (system, code) pairs they stand for, so that both parse.ts and sql.ts stay pure.
// https://hl7.org/fhir/R4/search.html#token
import type { At, Terminology } from '../conformance/model.js';
import { getElement } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import { indexKey } from './normalise.js';
import { getSearchParam, splitUnion } from './registry.js';
import type { FilterValue, SearchFilter, SearchRequest } from './request.js';

/**
 * Most codes one search may stand for, over all its filters and values: each is one probe of the token index (or one
 * row of a hash join). As large as the terminology's own expansion limit, so any value set that expands is searchable
 * alone; beyond it the search is answered `422 too-costly`, as a value set too large to expand is.
 */
export const MAX_SEARCH_CODES = 100_000;

const tooMany = (what: string, n: number): FhirError =>
  new FhirError(
    'too-costly',
    `Search too costly: ${what} stand for ${n} codes or more (at most ${MAX_SEARCH_CODES} per search); use smaller value sets`,
    'search.too-many-codes',
  );

/** `(system, code)` pairs, each once, cut as the index cuts its keys (normalise.ts indexKey). */
class Pairs {
  readonly systems: string[] = [];
  readonly codes: string[] = [];
  private readonly seen = new Set<string>();

  add(fullSystem: string, fullCode: string): void {
    const [system, code] = [indexKey(fullSystem), indexKey(fullCode)];
    const key = `${system}\u0000${code}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.systems.push(system);
    this.codes.push(code);
  }

  get size(): number {
    return this.codes.length;
  }
}

/** Every code of a value set, paging through the expansion when the terminology returns it in parts. */
async function expandAll(terminology: Terminology, at: At, canonical: string, into: Pairs): Promise<void> {
  const first = await terminology.expand(at, canonical);
  if (!first) {
    throw new FhirError(
      'invalid',
      `Unknown value set '${canonical.slice(0, 200)}': no ValueSet with this canonical in the project or the shared set`,
      'search.unknown-value-set',
    );
  }
  if (first.total > MAX_SEARCH_CODES)
    throw tooMany(`the codes of value set '${canonical.slice(0, 200)}'`, first.total);
  let got = first.contains.length;
  for (const c of first.contains) into.add(c.system, c.code);
  while (got < first.total) {
    const next = await terminology.expand(at, canonical, { offset: got, count: first.total - got });
    if (!next || next.contains.length === 0) break;
    got += next.contains.length;
    for (const c of next.contains) into.add(c.system, c.code);
  }
}

async function resolveValue(
  f: SearchFilter,
  v: FilterValue,
  terminology: Terminology,
  at: At,
  into: Pairs,
): Promise<void> {
  if (v.kind === 'value-set') return expandAll(terminology, at, v.canonical, into);
  if (v.kind !== 'hierarchy') return;
  const codes =
    f.modifier === 'above'
      ? await terminology.above(at, v.system, v.code)
      : await terminology.below(at, v.system, v.code);
  if (!codes) {
    throw new FhirError(
      'invalid',
      `Unknown code '${v.system.slice(0, 200)}|${v.code.slice(0, 100)}' for '${f.code}:${f.modifier ?? ''}': no code system with a hierarchy knows it`,
      'search.unknown-code',
    );
  }
  for (const code of codes) into.add(v.system, code);
}

/** Whether every path of a parameter's expression is a plain element path ending on a `code` element. */
function readsCodeElements(resourceType: string, code: string): boolean {
  const expression = getSearchParam(resourceType, code)?.expression;
  if (!expression) return false;
  return splitUnion(expression).every(
    (path) =>
      /^[A-Z][A-Za-z]*(\.[a-z][A-Za-z]*)+$/.test(path) &&
      getElement(path)?.types.every((t) => t === 'code') === true,
  );
}

/** What resolving one search has used so far: codes over every filter. */
interface Budget {
  codes: number;
}

async function resolveFilter(
  resourceType: string,
  f: SearchFilter,
  terminology: Terminology,
  at: At,
  budget: Budget,
): Promise<SearchFilter> {
  if (f.chain) {
    const filter = await resolveFilter(f.chain.targetType, f.chain.filter, terminology, at, budget);
    return { ...f, chain: { ...f.chain, filter } };
  }
  if (f.has) {
    const filter = await resolveFilter(f.has.sourceType, f.has.filter, terminology, at, budget);
    return { ...f, has: { ...f.has, filter } };
  }
  if (!f.values.some((v) => v.kind === 'value-set' || v.kind === 'hierarchy')) return f;
  const pairs = new Pairs();
  for (const v of f.values) {
    await resolveValue(f, v, terminology, at, pairs);
    if (budget.codes + pairs.size > MAX_SEARCH_CODES)
      throw tooMany('the value sets and hierarchies of this search', budget.codes + pairs.size);
  }
  budget.codes += pairs.size;
  const codeOnly = readsCodeElements(resourceType, f.code);
  return {
    ...f,
    values: [
      { kind: 'codes', systems: pairs.systems, codes: pairs.codes, ...(codeOnly ? { codeOnly } : {}) },
    ],
  };
}

/** True when a request has values only terminology can resolve (anywhere in its chains). */
export function needsTerminology(req: Pick<SearchRequest, 'filters'>): boolean {
  const walk = (f: SearchFilter): boolean =>
    f.chain
      ? walk(f.chain.filter)
      : f.has
        ? walk(f.has.filter)
        : f.values.some((v) => v.kind === 'value-set' || v.kind === 'hierarchy');
  return req.filters.some(walk);
}

/**
 * The request with each `:in`/`:not-in`/`:below`/`:above` value replaced by the (system, code) pairs it stands for,
 * value sets and code systems resolved in `at.projectId` first, then in the shared set. An unknown value set or code is
 * a 400 naming it; a value set too large to expand is the terminology's 422 `too-costly`. Without a terminology (a
 * service built without conformance) such a search is a 400.
 */
export async function resolveTerminology(
  req: SearchRequest,
  terminology: Terminology | undefined,
  at: At,
): Promise<SearchRequest> {
  if (!needsTerminology(req)) return req;
  if (!terminology) {
    throw new FhirError(
      'not-supported',
      'Search modifiers :in, :not-in, :below and :above on tokens need terminology, which this service lacks',
      'search.no-terminology',
    );
  }
  const filters: SearchFilter[] = [];
  const budget: Budget = { codes: 0 };
  for (const f of req.filters)
    filters.push(await resolveFilter(req.resourceType, f, terminology, at, budget));
  return { ...req, filters };
}
