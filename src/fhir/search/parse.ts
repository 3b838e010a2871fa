// Query parameters → SearchRequest, pure. https://hl7.org/fhir/R4/search.html
// Repeated parameters are AND'ed, comma-separated values OR'ed; `\,` `\|` `\$` `\\` escape.
import { FhirError } from '../outcome.js';
import { decodeCursor } from './cursor.js';
import { isResourceType } from './model.js';
import { dateRange, decimalRange, indexKey, normaliseReference, referenceParts } from './normalise.js';
import { getSearchParam as builtinParam, type SearchParamInfo } from './registry.js';
import { isIndexedComposite } from './extract-composite.js';
import { FULL_TEXT_PARAMS, parseFullText } from './full-text.js';
import type {
  FilterValue,
  IncludeSpec,
  Modifier,
  Prefix,
  SearchFilter,
  SearchRequest,
  SortKey,
} from './request.js';

export type { SearchRequest, SearchFilter, FilterValue, SortKey, IncludeSpec, Prefix, Modifier };

export const DEFAULT_COUNT = 20;
export const MAX_COUNT = 1000;
/**
 * The largest `_offset`: an offset page costs the rows it skips, so deep pages use the `next` link's `_cursor`,
 * which costs the same on every page.
 */
export const MAX_OFFSET = 10_000;

/**
 * Cost limits of one search (issue 12: 100 `name:contains` filters in one GET held the embedded database for 27 s).
 * Each AND'ed filter is one `rid IN (subquery)` semi-join, and PostgreSQL's planning time grows steeply with their
 * number (measured on PGlite with no rows: 12 filters plan in ~20 ms, 50 in 2.3 s, 100 in 7 s), so the number of
 * filters is bounded, GET and POST _search alike. Values OR'ed inside one filter share its subquery and cost little,
 * except leading-wildcard matches (`:contains`), which scan every index row of the parameter; chains join two more
 * tables each; `_include`s and `_sort` keys add queries or joins.
 */
/**
 * The search result parameters (https://hl7.org/fhir/R4/search.html#return): they shape an answer and choose no
 * match, so a query that only selects (`_typeFilter`, a Subscription's criteria) may not use them.
 */
export const RESULT_PARAMETERS: ReadonlySet<string> = new Set([
  '_count',
  '_sort',
  '_include',
  '_revinclude',
  '_elements',
  '_summary',
  '_total',
  '_contained',
  '_containedType',
  '_cursor',
  '_offset',
]);

export const SEARCH_LIMITS = {
  /** AND'ed filter parameters (`name=a&name=b` are two; each link of a chain counts one more). */
  filters: 12,
  /** Values over all filters (`name=a,b` holds two). */
  values: 200,
  /** `:contains` and `:text` values over all filters. */
  costlyValues: 10,
  /** Links of chains and reverse chains over all filters (`subject:Patient.organization.name` holds two). */
  chains: 6,
  /** Links in one chained or reverse-chained parameter. */
  chainDepth: 3,
  /** `_include` and `_revinclude` parameters together. */
  includes: 10,
  /** `_sort` keys. */
  sortKeys: 5,
} as const;

/** Result parameters that do not filter and are handled elsewhere (or have no effect on the result). */
const IGNORED = new Set(['_format', '_pretty']);

const bad = (message: string, code: string): FhirError => new FhirError('invalid', message, `search.${code}`);

const MODIFIERS: Record<string, readonly string[]> = {
  string: ['exact', 'contains', 'missing'],
  token: ['not', 'text', 'missing', 'in', 'not-in', 'below', 'above', 'of-type'],
  reference: ['missing', 'identifier'],
  date: ['missing'],
  number: ['missing'],
  quantity: ['missing'],
  uri: ['missing', 'above', 'below'],
};

const PREFIXES = new Set(['eq', 'ne', 'gt', 'lt', 'ge', 'le', 'sa', 'eb', 'ap']);

/** Splits on `sep` where it is not escaped by a backslash; parts keep their escapes. */
function splitEscaped(s: string, sep: string, limit = Infinity): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i] as string;
    if (c === '\\' && i + 1 < s.length) {
      cur += c + s[i + 1];
      i++;
    } else if (c === sep && out.length < limit - 1) {
      out.push(cur);
      cur = '';
    } else cur += c;
  }
  out.push(cur);
  return out;
}

function unescape(s: string): string {
  return s.replace(/\\([,|$\\])/g, '$1');
}

function asList(v: string | string[] | undefined): string[] {
  if (v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

export interface ParseOptions {
  /** Parameters the caller handles itself (e.g. `_fields` of $csv). */
  ignore?: readonly string[];
  /**
   * `Prefer: handling=lenient`: an unknown parameter is left out (and named in `req.ignored`) instead of being a 400
   * (https://hl7.org/fhir/R4/search.html#errors).
   */
  lenient?: boolean;
  /** Parameters beyond the built-in ones (a project's SearchParameters, search/custom-params.ts); built-ins win. */
  params?: (resourceType: string, code: string) => SearchParamInfo | undefined;
  /**
   * The caller resolves the token modifiers that need terminology (`:in`, `:not-in`, `:below`, `:above`) with
   * resolveTerminology (terminology.ts) before building SQL. Without it they are a 400: a caller that cannot resolve
   * them (conditional writes, `_typeFilter`, Subscription criteria) refuses them rather than matching wrongly.
   */
  terminology?: boolean;
}

/** ParseOptions.params of the parse under way: set only while parseSearchRequest runs, which is synchronous. */
let extraParams: ParseOptions['params'];
const getSearchParam = (type: string, code: string): SearchParamInfo | undefined =>
  builtinParam(type, code) ?? extraParams?.(type, code);

export function parseSearchRequest(
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  opts: ParseOptions = {},
): SearchRequest {
  const outer = extraParams;
  extraParams = opts.params;
  try {
    return parseRequest(resourceType, query, opts);
  } finally {
    extraParams = outer;
  }
}

function parseRequest(
  resourceType: string,
  query: Record<string, string | string[] | undefined>,
  opts: ParseOptions,
): SearchRequest {
  if (!isResourceType(resourceType)) throw bad(`Unknown resource type '${resourceType}'`, 'unknown-type');
  const req: SearchRequest = {
    resourceType,
    filters: [],
    sort: [],
    count: DEFAULT_COUNT,
    include: [],
    revinclude: [],
  };
  let cursorText: string | undefined;
  for (const [key, raw] of Object.entries(query)) {
    const list = asList(raw);
    if (list.length === 0 || IGNORED.has(key) || opts.ignore?.includes(key)) continue;
    const last = list[list.length - 1] as string;
    switch (key) {
      case '_count':
        req.count = parseCount(last);
        continue;
      case '_sort':
        req.sort = parseSort(resourceType, last);
        continue;
      case '_total':
        if (last !== 'none' && last !== 'estimate' && last !== 'accurate') {
          throw bad(`Invalid _total '${last}': expected none, estimate or accurate`, 'bad-total');
        }
        req.total = last;
        continue;
      case '_summary':
        if (!['true', 'false', 'text', 'data', 'count'].includes(last)) {
          throw bad(`Invalid _summary '${last}': expected true, false, text, data or count`, 'bad-summary');
        }
        req.summary = last as SearchRequest['summary'];
        continue;
      case '_elements':
        req.elements = parseElements(resourceType, list);
        continue;
      case '_cursor':
        cursorText = last;
        continue;
      case '_offset':
        req.offset = parseOffset(last);
        continue;
      case '_include':
      case '_include:iterate':
        for (const v of list)
          req.include.push(parseInclude(resourceType, v, false, key.endsWith(':iterate')));
        continue;
      case '_revinclude':
      case '_revinclude:iterate':
        for (const v of list)
          req.revinclude.push(parseInclude(resourceType, v, true, key.endsWith(':iterate')));
        continue;
    }
    for (const value of list) {
      if (value === '') continue; // an empty value does not constrain (https://hl7.org/fhir/R4/search.html#errors)
      try {
        req.filters.push(parseFilter(resourceType, key, value, 0, opts.terminology === true));
      } catch (err) {
        if (!opts.lenient || !(err instanceof FhirError) || err.code !== 'search.unknown-param') throw err;
        (req.ignored ??= []).push(key);
        break;
      }
    }
  }
  if (cursorText && req.offset !== undefined)
    throw bad('Use _offset or _cursor, not both', 'offset-and-cursor');
  if (cursorText) req.cursor = decodeCursor(cursorText, Math.max(1, req.sort.length));
  assertWithinLimits(req);
  return req;
}

/** The modifiers whose values terminology.ts resolves into codes. */
export const TERMINOLOGY_MODIFIERS: ReadonlySet<string> = new Set(['in', 'not-in', 'below', 'above']);

const tooCostly = (what: string, found: number, limit: number): FhirError =>
  new FhirError(
    'too-costly',
    `Search too costly: ${found} ${what} (at most ${limit} per search); narrow the search or split it`,
    'search.too-costly',
    { status: 400 },
  );

/** The filter at the end of a filter's chain or reverse chain. */
function inner(f: SearchFilter): SearchFilter {
  const next = f.chain?.filter ?? f.has?.filter;
  return next ? inner(next) : f;
}

/** The links of a filter's chain or reverse chain (0 for a plain parameter). */
function linksOf(f: SearchFilter): number {
  const next = f.chain?.filter ?? f.has?.filter;
  return next ? 1 + linksOf(next) : 0;
}

/** Throws a 400 too-costly FhirError naming the first limit of SEARCH_LIMITS the request exceeds. */
function assertWithinLimits(req: SearchRequest): void {
  const L = SEARCH_LIMITS;
  const chains = req.filters.reduce((n, f) => n + linksOf(f), 0);
  const filters = req.filters.length + chains;
  const values = req.filters.reduce((n, f) => n + Math.max(1, inner(f).values.length), 0);
  const costly = req.filters.reduce(
    (n, f) => n + (['contains', 'text'].includes(inner(f).modifier ?? '') ? inner(f).values.length : 0),
    0,
  );
  const includes = req.include.length + req.revinclude.length;
  if (filters > L.filters)
    throw tooCostly('filter parameters (each chain link counts one more)', filters, L.filters);
  if (values > L.values) throw tooCostly('filter values', values, L.values);
  if (costly > L.costlyValues) throw tooCostly(':contains and :text values', costly, L.costlyValues);
  if (chains > L.chains) throw tooCostly('chain links', chains, L.chains);
  if (includes > L.includes) throw tooCostly('_include and _revinclude parameters', includes, L.includes);
  if (req.sort.length > L.sortKeys) throw tooCostly('_sort keys', req.sort.length, L.sortKeys);
}

function parseCount(v: string): number {
  if (!/^\d+$/.test(v)) throw bad(`Invalid _count '${v}': expected a non-negative integer`, 'bad-count');
  return Math.min(Number(v), MAX_COUNT);
}

function parseOffset(v: string): number {
  if (!/^\d{1,9}$/.test(v))
    throw bad(`Invalid _offset '${v.slice(0, 32)}': expected a non-negative integer`, 'bad-offset');
  const n = Number(v);
  if (n > MAX_OFFSET)
    throw bad(
      `_offset ${n} is beyond the largest offset, ${MAX_OFFSET}: page further with the next link (_cursor)`,
      'offset-too-large',
    );
  return n;
}

function parseSort(resourceType: string, v: string): SortKey[] {
  const keys: SortKey[] = [];
  for (const raw of v.split(',')) {
    const s = raw.trim();
    if (!s) continue;
    const descending = s.startsWith('-');
    const code = descending ? s.slice(1) : s;
    const p = getSearchParam(resourceType, code);
    if (!p || p.type === 'composite' || p.type === 'special') {
      throw bad(`Invalid _sort: '${code}' is not a sortable search parameter of ${resourceType}`, 'bad-sort');
    }
    keys.push({ code, type: p.type, descending });
  }
  return keys;
}

function parseElements(resourceType: string, list: string[]): string[] {
  const out: string[] = [];
  for (const v of list) {
    for (const raw of v.split(',')) {
      let e = raw.trim();
      if (!e) continue;
      if (e.startsWith(`${resourceType}.`)) e = e.slice(resourceType.length + 1);
      if (!/^[A-Za-z][A-Za-z0-9]*$/.test(e)) throw bad(`Invalid _elements entry '${raw}'`, 'bad-elements');
      if (!out.includes(e)) out.push(e);
    }
  }
  return out;
}

function parseInclude(resourceType: string, v: string, reverse: boolean, iterate: boolean): IncludeSpec {
  const what = reverse ? '_revinclude' : '_include';
  const it = iterate ? { iterate } : {};
  // `*`: every reference parameter of the searched type (_include), or of any type that points at it (_revinclude).
  if (v === '*') return { sourceType: reverse ? '*' : resourceType, code: '*', ...it };
  const [source, code, target, extra] = v.split(':');
  if (!source || !code || extra !== undefined || !isResourceType(source)) {
    throw bad(`Invalid ${what} '${v}': expected SourceType:parameter[:TargetType]`, 'bad-include');
  }
  if (code !== '*') {
    const p = getSearchParam(source, code);
    if (!p || p.type !== 'reference') {
      throw bad(`Invalid ${what} '${v}': '${code}' is not a reference parameter of ${source}`, 'bad-include');
    }
  }
  if (target !== undefined && !isResourceType(target)) {
    throw bad(`Invalid ${what} '${v}': unknown target type '${target}'`, 'bad-include');
  }
  return { sourceType: source, code, ...(target ? { targetType: target } : {}), ...it };
}

/** One `key=value` filter. */
function parseFilter(
  resourceType: string,
  key: string,
  value: string,
  depth: number,
  terminology: boolean,
): SearchFilter {
  const linked = key.startsWith('_has:') || key.indexOf('.') > 0;
  if (linked && depth >= SEARCH_LIMITS.chainDepth) {
    throw bad(
      `Invalid parameter '${key}': chains and _has go at most ${SEARCH_LIMITS.chainDepth} levels deep`,
      'chain-depth',
    );
  }
  if (key.startsWith('_has:')) return parseHas(resourceType, key, value, depth, terminology);
  const dot = key.indexOf('.');
  if (dot > 0)
    return parseChain(resourceType, key.slice(0, dot), key.slice(dot + 1), value, depth, terminology);
  const colon = key.indexOf(':');
  const code = colon >= 0 ? key.slice(0, colon) : key;
  const modifier = colon >= 0 ? key.slice(colon + 1) : undefined;
  if (FULL_TEXT_PARAMS.has(code)) return parseFullText(resourceType, key, value);
  const param = lookup(resourceType, code);
  if (isIndexedComposite(param) && modifier === undefined)
    return parseComposite(resourceType, param, key, value);
  if (param.type === 'special' || param.type === 'composite') {
    throw new FhirError(
      'not-supported',
      `Search parameter '${code}' (${param.type}) is not supported`,
      'search.unsupported-param',
    );
  }
  const filter: SearchFilter = { code, type: param.type, values: [] };
  if (code === '_id') filter.column = 'id';
  if (code === '_lastUpdated') filter.column = 'last_updated';

  let refType: string | undefined;
  if (modifier !== undefined) {
    if (param.type === 'reference' && isResourceType(modifier)) {
      if (param.targets.length > 0 && !param.targets.includes(modifier)) {
        throw bad(
          `Invalid modifier ':${modifier}' on '${code}': it cannot refer to ${modifier}`,
          'bad-modifier',
        );
      }
      refType = modifier;
    } else if (!(MODIFIERS[param.type] ?? []).includes(modifier) || (filter.column && modifier !== 'not')) {
      throw bad(`Unknown or unsupported modifier ':${modifier}' on parameter '${code}'`, 'bad-modifier');
    } else filter.modifier = modifier as Modifier;
  }
  if (!terminology && param.type === 'token' && TERMINOLOGY_MODIFIERS.has(filter.modifier ?? '')) {
    throw new FhirError(
      'not-supported',
      `Unsupported modifier ':${modifier}' on parameter '${code}' here: it needs terminology, which only a search resolves`,
      'search.terminology-unavailable',
    );
  }
  if (filter.modifier === 'missing') {
    if (value !== 'true' && value !== 'false') {
      throw bad(`Invalid value for '${key}': expected true or false`, 'bad-missing');
    }
    filter.missing = value === 'true';
    return filter;
  }
  for (const piece of splitEscaped(value, ',')) {
    if (piece === '') continue;
    filter.values.push(parseValue(param, key, piece, filter.modifier, refType));
  }
  if (filter.values.length === 0) throw bad(`Missing value for '${key}'`, 'empty-value');
  return filter;
}

function lookup(resourceType: string, code: string): SearchParamInfo {
  const param = getSearchParam(resourceType, code);
  if (!param)
    throw bad(`Unknown search parameter '${code}' for resource type ${resourceType}`, 'unknown-param');
  return param;
}

function parseChain(
  resourceType: string,
  head: string,
  rest: string,
  value: string,
  depth: number,
  terminology: boolean,
): SearchFilter {
  const [code, typeModifier, extra] = head.split(':');
  const param = lookup(resourceType, code as string);
  if (param.type !== 'reference' || extra !== undefined) {
    throw bad(
      `Invalid chained parameter '${head}.${rest}': '${code}' is not a reference parameter`,
      'bad-chain',
    );
  }
  let targetType = typeModifier;
  if (targetType !== undefined) {
    if (!isResourceType(targetType) || (param.targets.length > 0 && !param.targets.includes(targetType))) {
      throw bad(`Invalid chained parameter '${head}.${rest}': bad target type '${targetType}'`, 'bad-chain');
    }
  } else {
    const innerCode = rest.split(/[:.]/)[0] as string;
    const candidates = param.targets.filter((t) => getSearchParam(t, innerCode));
    if (candidates.length !== 1) {
      throw bad(
        `Ambiguous chained parameter '${head}.${rest}': write '${code}:Type.${rest}' with one of ${candidates.join(', ') || param.targets.join(', ')}`,
        'ambiguous-chain',
      );
    }
    targetType = candidates[0] as string;
  }
  const filter = parseFilter(targetType, rest, value, depth + 1, terminology);
  return { code: code as string, type: 'reference', values: [], chain: { targetType, filter } };
}

/** `_has:Type:param:rest`: resources that a `Type` matching `rest` references through `param`. */
function parseHas(
  resourceType: string,
  key: string,
  value: string,
  depth: number,
  terminology: boolean,
): SearchFilter {
  const [, sourceType, code, ...restParts] = key.split(':');
  const rest = restParts.join(':');
  if (!sourceType || !code || !rest || !isResourceType(sourceType)) {
    throw bad(`Invalid parameter '${key}': expected _has:Type:reference-parameter:parameter`, 'bad-has');
  }
  const param = getSearchParam(sourceType, code);
  if (!param || param.type !== 'reference') {
    throw bad(
      `Invalid parameter '${key}': '${code}' is not a reference parameter of ${sourceType}`,
      'bad-has',
    );
  }
  if (param.targets.length > 0 && !param.targets.includes(resourceType)) {
    throw bad(`Invalid parameter '${key}': ${sourceType}.${code} cannot refer to ${resourceType}`, 'bad-has');
  }
  const filter = parseFilter(sourceType, rest, value, depth + 1, terminology);
  return { code, type: 'reference', values: [], has: { sourceType, code, filter } };
}

/** A composite parameter: `$`-separated component values, each parsed as its component parameter. */
function parseComposite(
  resourceType: string,
  param: SearchParamInfo,
  key: string,
  value: string,
): SearchFilter {
  const comps = param.components ?? [];
  const filter: SearchFilter = { code: param.code, type: 'composite', values: [] };
  for (const piece of splitEscaped(value, ',')) {
    if (piece === '') continue;
    const pieces = splitEscaped(piece, '$');
    if (pieces.length !== comps.length || comps.some((c) => c.type === 'special' || c.type === 'composite')) {
      throw bad(
        `Invalid value for composite '${key}': expected ${comps.length} values separated by '$'`,
        'bad-composite',
      );
    }
    const parts = comps.map((c, k) => {
      const cp = getSearchParam(resourceType, c.code) ?? { ...c, targets: [], url: '' };
      return {
        type: c.type,
        code: `${param.code}$${k}`,
        value: parseValue({ ...cp, type: c.type }, key, pieces[k] as string, undefined, undefined),
      };
    });
    filter.values.push({ kind: 'composite', parts });
  }
  if (filter.values.length === 0) throw bad(`Missing value for '${key}'`, 'empty-value');
  return filter;
}

function parseValue(
  param: SearchParamInfo,
  key: string,
  piece: string,
  modifier: Modifier | undefined,
  refType: string | undefined,
): FilterValue {
  switch (param.type) {
    case 'string':
      return { kind: 'string', value: unescape(piece) };
    case 'uri':
      return { kind: 'uri', value: indexKey(unescape(piece)) };
    case 'token': {
      if (modifier === 'text') return { kind: 'text', value: unescape(piece) };
      if (modifier !== undefined && modifier !== 'not')
        return parseTokenModifierValue(param, key, piece, modifier);
      const parts = splitEscaped(piece, '|', 2).map(unescape);
      if (parts.length === 1) return { kind: 'token', code: indexKey(parts[0] as string) };
      const [system, code] = parts as [string, string];
      return {
        kind: 'token',
        system: indexKey(system),
        ...(code !== '' ? { code: indexKey(code) } : {}),
      };
    }
    case 'reference':
      if (modifier === 'identifier') return parseIdentifierValue(key, piece);
      return parseReferenceValue(param, key, unescape(piece), refType);
    case 'date':
      return parseDateValue(key, piece);
    case 'number':
    case 'quantity':
      return parseNumberValue(param.type, key, piece);
    default:
      throw bad(`Search parameter '${param.code}' cannot be searched`, 'unsupported-param');
  }
}

/** Longest ValueSet canonical of `:in`/`:not-in` (a canonical is a URL, not a list of codes). */
export const MAX_CANONICAL = 1024;

/** `url` or `url|version`, the url absolute (https://hl7.org/fhir/R4/datatypes.html#canonical). */
const CANONICAL = /^[A-Za-z][A-Za-z0-9+.-]*:[^\s|]+(\|[^\s|]+)?$/;

/** The values of token `:in`, `:not-in`, `:below`, `:above` and `:of-type` (https://hl7.org/fhir/R4/search.html#token). */
function parseTokenModifierValue(
  param: SearchParamInfo,
  key: string,
  piece: string,
  modifier: Modifier,
): FilterValue {
  if (modifier === 'in' || modifier === 'not-in') {
    const canonical = unescape(piece);
    if (canonical.length > MAX_CANONICAL || !CANONICAL.test(canonical)) {
      throw bad(
        `Invalid value for '${key}': expected a ValueSet canonical (url or url|version), got '${canonical.slice(0, 64)}${canonical.length > 64 ? '…' : ''}'`,
        'bad-canonical',
      );
    }
    return { kind: 'value-set', canonical };
  }
  if (modifier === 'below' || modifier === 'above') {
    const [system, code, extra] = splitEscaped(piece, '|').map(unescape);
    if (
      !system ||
      !code ||
      extra !== undefined ||
      system.length > MAX_CANONICAL ||
      code.length > MAX_CANONICAL
    ) {
      throw bad(
        `Invalid value for '${key}': expected system|code of a code system with a hierarchy`,
        'bad-hierarchy',
      );
    }
    return { kind: 'hierarchy', system, code };
  }
  // of-type: only identifiers have a type (https://hl7.org/fhir/R4/search.html#token).
  if (!/\.identifier(\W|$)/.test(param.expression)) {
    throw bad(
      `Invalid modifier ':of-type' on '${param.code}': it is not an identifier parameter`,
      'bad-modifier',
    );
  }
  const parts = splitEscaped(piece, '|').map(unescape);
  if (parts.length !== 3 || parts.some((x) => x === '')) {
    throw bad(
      `Invalid value for '${key}': expected type-system|type-code|value (three parts separated by '|')`,
      'bad-of-type',
    );
  }
  const [typeSystem, typeCode, value] = parts.map(indexKey) as [string, string, string];
  return { kind: 'of-type', typeSystem, typeCode, value };
}

/** reference `:identifier`: `system|value`, `value`, `|value` or `system|`, as a token (search.html#reference). */
function parseIdentifierValue(key: string, piece: string): FilterValue {
  const parts = splitEscaped(piece, '|', 2).map(unescape);
  if (parts.length === 1) return { kind: 'identifier', value: indexKey(parts[0] as string) };
  const [system, value] = parts as [string, string];
  if (system === '' && value === '') throw bad(`Missing value for '${key}'`, 'empty-value');
  return {
    kind: 'identifier',
    system: indexKey(system),
    ...(value !== '' ? { value: indexKey(value) } : {}),
  };
}

function parseReferenceValue(param: SearchParamInfo, key: string, v: string, refType?: string): FilterValue {
  if (!v.includes('/') && !v.includes(':')) {
    if (!/^[A-Za-z0-9\-.]{1,64}$/.test(v))
      throw bad(`Invalid reference '${v}' for '${key}'`, 'bad-reference');
    const types = refType ? [refType] : param.targets;
    if (types.length === 0) return { kind: 'reference-id', id: v };
    return { kind: 'reference', refs: types.map((t) => `${t}/${v}`) };
  }
  const parts = referenceParts(v);
  if (refType && parts && parts.type !== refType) return { kind: 'reference', refs: [] };
  const norm = normaliseReference(v);
  if (!norm || norm.t !== 'reference') throw bad(`Invalid reference '${v}' for '${key}'`, 'bad-reference');
  return { kind: 'reference', refs: [norm.ref] };
}

function splitPrefix(piece: string): { prefix: Prefix; rest: string } {
  const p = piece.slice(0, 2);
  if (PREFIXES.has(p) && /^[a-z]{2}[^a-z]/.test(piece)) return { prefix: p as Prefix, rest: piece.slice(2) };
  return { prefix: 'eq', rest: piece };
}

function parseDateValue(key: string, piece: string): FilterValue {
  const { prefix, rest } = splitPrefix(piece);
  // A `+` of a time zone arrives as a space when the client did not percent-encode it.
  const range = dateRange(rest) ?? dateRange(rest.replace(/ /g, '+'));
  if (!range) throw bad(`Invalid date '${piece}' for '${key}'`, 'bad-date');
  return { kind: 'date', prefix, ...range };
}

function parseNumberValue(type: 'number' | 'quantity', key: string, piece: string): FilterValue {
  const { prefix, rest } = splitPrefix(piece);
  const parts = type === 'quantity' ? splitEscaped(rest, '|', 3).map(unescape) : [rest];
  const range = decimalRange(parts[0] as string);
  if (!range) throw bad(`Invalid number '${piece}' for '${key}'`, 'bad-number');
  const system = parts[1] || undefined;
  const unit = parts[2] || undefined;
  return { kind: 'number', prefix, ...range, ...(system ? { system } : {}), ...(unit ? { unit } : {}) };
}
