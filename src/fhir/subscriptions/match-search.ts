// Whether one resource version matches a FHIR search, decided in memory with the search engine's own parser,
// parameter definitions and index values, so that it answers as the search would (classic Subscription criteria,
// SubscriptionTopic queryCriteria, topic filters). https://hl7.org/fhir/R4/subscription.html#2.46.6.1
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { compositeValuesOf } from '../search/extract-composite.js';
import { indexedParamsOf } from '../search/extract.js';
import { isResourceType } from '../search/model.js';
import { toIndexValues, type IndexValue } from '../search/normalise.js';
import { parseSearchRequest, RESULT_PARAMETERS } from '../search/parse.js';
import { getSearchParam, type SearchParamInfo } from '../search/registry.js';
import type { FilterValue, SearchFilter } from '../search/request.js';
import type { CompiledCriteria } from './model.js';
import { atPoint, instantMs, valueTest } from './match-value.js';

/** Filters that need other resources or full text, which one resource version cannot answer. */
const NOT_IN_MEMORY = new Set(['_has', '_text', '_content', '_list', '_filter', '_query', '_type']);

/** Search errors meaning "the search cannot do this" rather than "this is malformed": refused alike. */
const SEARCH_UNSUPPORTED = new Set([
  'search.bad-modifier',
  'search.unsupported-param',
  'search.terminology-unavailable',
]);

/**
 * Modifiers a match in memory does not decide: `:of-type` and reference `:identifier` read index rows the matcher
 * does not extract (sp_identifier); `:in`, `:not-in`, token `:below`/`:above` need terminology (refused by the parser).
 */
const NOT_IN_MEMORY_MODIFIERS = new Set(['of-type', 'identifier', 'in', 'not-in']);

/** The one refusal: `message` names the parameter. */
const unsupported = (message: string): FhirError =>
  new FhirError('invalid', `Subscription criteria: ${message}`, 'subscription.criteria-unsupported');

const cannotUse = (key: string, why: string): FhirError =>
  unsupported(`cannot use the search parameter '${key}': ${why}`);

/** The values of the parameter in a slot (see compileCriteria) of the resource being matched, found once per call. */
type Values = (slot: number) => unknown;
type ResourceTest = (resource: Resource, values: Values) => boolean;

/** `Type?query`, `Type` or (with a type given) `query`: the resource type and the query text. */
function splitCriteria(text: string, given?: string): { resourceType: string; query: string } {
  const trimmed = text.trim();
  // A query starts with a parameter (lower case or `_`), never with a type name.
  const typed = /^([A-Z][A-Za-z0-9]*)(?:\?(.*))?$/s.exec(trimmed);
  const resourceType = typed ? (typed[1] as string) : given;
  const query = typed ? (typed[2] ?? '') : trimmed.replace(/^\?/, '');
  if (resourceType === undefined || !isResourceType(resourceType) || (given && resourceType !== given)) {
    throw new FhirError(
      'invalid',
      `Invalid criteria '${text.slice(0, 100)}': expected ${given ? `${given}?query or a query` : 'Type?query with a known resource type'}`,
      'subscription.criteria-type',
    );
  }
  return { resourceType, query };
}

/** The query text as parameters; a `+` stays a plus (a time zone offset), as in _typeFilter. */
function queryParams(query: string): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [key, value] of new URLSearchParams(query.replace(/\+/g, '%2B'))) {
    const code = key.split(/[:.]/)[0] as string;
    if (RESULT_PARAMETERS.has(code)) throw cannotUse(key, 'a result parameter does not choose matches');
    if (NOT_IN_MEMORY.has(code)) throw cannotUse(key, 'it needs other resources or full text');
    if (key.indexOf('.') > 0) throw cannotUse(key, 'a chained parameter needs the referenced resources');
    (out[key] ??= []).push(value);
  }
  return out;
}

/**
 * A version's extracted values by parameter, shared by every subscription that matches the same version object: a
 * write that 100 subscriptions on its type look at extracts `code` once, not 100 times. Versions are not changed once
 * written (the write path builds a new object for each), and the entry goes with the object.
 */
const EXTRACTED = new WeakMap<Resource, Map<string, unknown>>();
function extractedOf(resource: Resource): Map<string, unknown> {
  let m = EXTRACTED.get(resource);
  if (!m) EXTRACTED.set(resource, (m = new Map()));
  return m;
}

/** One filter as a test of a resource; `slot` numbers the parameters whose values a matches() call may reuse. */
function compileFilter(
  resourceType: string,
  f: SearchFilter,
  slotOf: (param: SearchParamInfo, composite: boolean) => number,
): ResourceTest {
  if (f.chain || f.has) throw cannotUse(f.code, 'chains and _has need other resources');
  if (NOT_IN_MEMORY_MODIFIERS.has(f.modifier ?? ''))
    throw cannotUse(`${f.code}:${f.modifier ?? ''}`, 'a subscription cannot match this modifier');
  if (f.column === 'id') {
    const ids = new Set(
      f.values.flatMap((v) => (v.kind === 'token' && v.code !== undefined ? [v.code] : [])),
    );
    const not = f.modifier === 'not';
    return (r) => typeof r.id === 'string' && ids.has(r.id) !== not;
  }
  if (f.column === 'last_updated') {
    // As sql.ts's columnCondition: a point in time, whatever the modifier.
    const tests = f.values.flatMap((v) => {
      if (v.kind !== 'date') return [];
      const [vl, vh] = [instantMs(v.low), instantMs(v.high)];
      return [(t: number) => atPoint(v.prefix, t, vl, vh)];
    });
    return (r) => {
      const t = typeof r.meta?.lastUpdated === 'string' ? Date.parse(r.meta.lastUpdated) : NaN;
      return !Number.isNaN(t) && tests.some((test) => test(t));
    };
  }
  const param = getSearchParam(resourceType, f.code) as SearchParamInfo;
  if (f.type === 'composite') {
    const slot = slotOf(param, true);
    const alternatives = f.values.map((v) => compositeTest(v));
    return (r, values) => {
      const groups = values(slot) as Grouped;
      return alternatives.some((test) => test(groups));
    };
  }
  const slot = slotOf(param, false);
  if (f.missing !== undefined) {
    const missing = f.missing;
    // As the SQL's `:missing`: rows of the parameter type's own table (identifier rows live elsewhere).
    const type = f.type;
    return (_r, values) => !(values(slot) as IndexValue[]).some((v) => v.t === type) === missing;
  }
  const tests = f.values.map((v) => valueTest(v, f.modifier));
  const any = (found: IndexValue[]): boolean => found.some((iv) => tests.some((test) => test(iv)));
  if (f.modifier === 'not') return (_r, values) => !any(values(slot) as IndexValue[]);
  return (_r, values) => any(values(slot) as IndexValue[]);
}

/** A composite parameter's values per element (`grp`): for each, the values of each component. */
type Grouped = IndexValue[][][];

/** A composite value: some element meets every component (sql.ts's compositeCondition joins them on `grp`). */
function compositeTest(v: FilterValue): (groups: Grouped) => boolean {
  if (v.kind !== 'composite') return () => false;
  const parts = v.parts.map((p) => valueTest(p.value, undefined));
  return (groups) => groups.some((components) => parts.every((test, k) => (components[k] ?? []).some(test)));
}

function grouped(resource: Resource, param: SearchParamInfo): Grouped {
  const groups = new Map<number, IndexValue[][]>();
  const n = param.components?.length ?? 0;
  for (const { code, values, grp = 0 } of compositeValuesOf(resource, param)) {
    let g = groups.get(grp);
    if (!g) groups.set(grp, (g = Array.from({ length: n }, () => [])));
    const k = Number(code.slice(code.lastIndexOf('$') + 1));
    g[k]?.push(...values);
  }
  return [...groups.values()];
}

/** How the index writer finds one parameter's values (extract.ts extractAll): the same evaluator, failures as none. */
function extractor(
  resourceType: string,
  param: SearchParamInfo,
  composite: boolean,
): (r: Resource) => unknown {
  if (composite) return (r) => grouped(r, param);
  const compiled = indexedParamsOf(resourceType).find((c) => c.param.code === param.code);
  if (!compiled) return () => [];
  return (r) => {
    try {
      return toIndexValues(param.type, compiled.evaluate(r as Record<string, unknown>));
    } catch {
      return [];
    }
  };
}

/**
 * Compiles search criteria once for matching resource versions in memory. `text` is `Type?query` (classic criteria),
 * or with `opts.resourceType` just the query (`code=http://loinc.org|8867-4`, topic filters); an empty query matches
 * every resource of the type. Throws a 400 FhirError for an unknown type (`subscription.criteria-type`), a malformed
 * value (the search's own error), or a parameter a match in memory cannot answer exactly: chains, `_has`, `_text`,
 * `_content`, `_list`, `_filter`, result parameters such as `_count` or `_include`, and whatever the search itself
 * does not support (`subscription.criteria-unsupported`).
 */
export function compileCriteria(text: string, opts: { resourceType?: string } = {}): CompiledCriteria {
  const { resourceType, query } = splitCriteria(text, opts.resourceType);
  const params = queryParams(query);
  let filters: SearchFilter[];
  try {
    filters = parseSearchRequest(resourceType, params).filters;
  } catch (err) {
    if (err instanceof FhirError && SEARCH_UNSUPPORTED.has(err.code)) throw unsupported(err.message);
    throw err;
  }
  const extractors: ((r: Resource) => unknown)[] = [];
  const keys: string[] = [];
  const slots = new Map<string, number>();
  const slotOf = (param: SearchParamInfo, composite: boolean): number => {
    let slot = slots.get(param.code);
    if (slot === undefined) {
      slot = extractors.push(extractor(resourceType, param, composite)) - 1;
      keys.push(`${composite ? '$' : ''}${param.code}`);
      slots.set(param.code, slot);
    }
    return slot;
  };
  const tests = filters.map((f) => compileFilter(resourceType, f, slotOf));
  return {
    resourceType,
    query,
    matches(resource: Resource): boolean {
      if (resource.resourceType !== resourceType) return false;
      if (tests.length === 0) return true;
      const found = extractedOf(resource);
      const values: Values = (slot) => {
        const key = keys[slot] as string;
        let v = found.get(key);
        if (v === undefined) found.set(key, (v = (extractors[slot] as (r: Resource) => unknown)(resource)));
        return v;
      };
      return tests.every((test) => test(resource, values));
    },
  };
}
