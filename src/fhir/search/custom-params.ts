// SearchParameter resources as search parameters beyond the built-in ones (API.md §9 "Search"): a project's own and
// the shared packages'. Pure: reading and checking a SearchParameter, compiling its expression, and the set of such
// parameters a project searches and indexes with. https://hl7.org/fhir/R4/searchparameter.html
import { createHash } from 'node:crypto';
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { ExtractedValues } from './extract-composite.js';
import { compileFastPart, type Evaluator } from './fast-path.js';
import { FHIRPATH_OPTIONS, withOfType } from './fhirpath-options.js';
import { typedValuesOf } from './extract.js';
import { toIndexValues } from './normalise.js';
import { getSearchParam, isResourceType, splitUnion, type SearchParamInfo } from './registry.js';
import type { SearchFilter, SearchRequest } from './request.js';
import { mapLeaves } from './filter.js';

/** An expression runs inside every write of the project that owns it: its size is bounded, and so its parse cost. */
export const MAX_EXPRESSION_LENGTH = 2000;
export const MAX_BASES = 20;
/** The types Cinder indexes (composite and special are refused: their values are not one expression's). */
export const CUSTOM_TYPES: ReadonlySet<string> = new Set([
  'string',
  'token',
  'reference',
  'date',
  'number',
  'quantity',
  'uri',
]);
/** A search parameter name: a letter, then letters, digits, `-` and `_` (no `.`, `:` or `$`, which search syntax uses). */
const CODE = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;
/**
 * Refused in expressions, which run synchronously on every write of their bases and cannot be interrupted (as in
 * subscriptions/topic-fhirpath.ts): regular expressions a tenant writes (catastrophic backtracking), walks whose
 * cost grows with a power of the resource's size (`descendants`, `repeat`, `aggregate`), and the variables that
 * reach the whole resource again from inside `select`/`where` (`%resource`, `%context`, ...), whose nesting
 * multiplies the work by the resource's size at each level.
 */
const REFUSED_FUNCTIONS =
  /(?:^|[^A-Za-z0-9_])(matches|matchesFull|replaceMatches|descendants|repeat|aggregate|trace|defineVariable)\s*\(/;
const REFUSED_VARIABLE = /%[A-Za-z`]/;

/** A SearchParameter as a search parameter of one base type; `key` is the code its index rows carry. */
export interface CustomParam extends SearchParamInfo {
  base: string;
  /**
   * `<code>~<hash of type and expression>`: rows written under an earlier definition never match a later one, so an
   * update that changes the expression answers from fresh rows only (those of writes since, then of the reindex).
   */
  key: string;
  evaluate: Evaluator;
}

const invalid = (message: string, code: string, at: string): FhirError =>
  new FhirError('invalid', message, `search-parameter.${code}`, { expression: [`SearchParameter.${at}`] });

/** Whether a stored SearchParameter is a search parameter (`active`); drafts and retired ones are not. */
export const isActive = (sp: Resource): boolean => sp.status === 'active';

/**
 * Evaluates with HL7's fhirpath engine, compiled here rather than in extract.ts's process-wide cache: tenants'
 * expressions live as long as the project set holding them.
 */
function compileFhirpath(expression: string): (r: unknown) => unknown[] {
  return fhirpath.compile(withOfType(expression) as never, r4, FHIRPATH_OPTIONS as never) as unknown as (
    r: unknown,
  ) => unknown[];
}

function evaluatorOf(expression: string, base: string): Evaluator {
  const fast = splitUnion(expression).map((p) => compileFastPart(p, base));
  if (fast.every((f) => f !== undefined)) {
    const evs = fast as Evaluator[];
    return (r) => evs.flatMap((e) => e(r));
  }
  return typedValuesOf(compileFhirpath(expression));
}

function readCode(sp: Resource): string {
  const code = sp.code;
  if (typeof code !== 'string' || !CODE.test(code)) {
    const shown = typeof code === 'string' ? `'${code.slice(0, 64)}'` : 'missing';
    throw invalid(
      `SearchParameter.code ${shown} is not a search parameter name (a letter, then letters, digits, '-' or '_')`,
      'code',
      'code',
    );
  }
  return code;
}

function readBases(sp: Resource, code: string, builtIn: boolean): string[] {
  const base = sp.base;
  if (!Array.isArray(base) || base.length === 0 || base.length > MAX_BASES) {
    throw invalid(`SearchParameter.base must list 1 to ${MAX_BASES} resource types`, 'base', 'base');
  }
  for (const b of base) {
    if (typeof b !== 'string' || !isResourceType(b)) {
      throw invalid(
        `SearchParameter.base names an unknown resource type: ${String(b).slice(0, 64)}`,
        'base',
        'base',
      );
    }
    if (builtIn && getSearchParam(b, code)) {
      throw invalid(
        `SearchParameter.code '${code}' is a built-in search parameter of ${b}`,
        'code-clash',
        'code',
      );
    }
  }
  return [...new Set(base as string[])];
}

function readExpression(sp: Resource, bases: readonly string[]): string {
  const expression = sp.expression;
  if (typeof expression !== 'string' || expression.trim() === '') {
    throw invalid('An active SearchParameter needs an expression (FHIRPath)', 'expression', 'expression');
  }
  if (expression.length > MAX_EXPRESSION_LENGTH) {
    throw invalid(
      `SearchParameter.expression is longer than ${MAX_EXPRESSION_LENGTH} characters`,
      'expression-length',
      'expression',
    );
  }
  // Names inside string literals are text; a `delimited` identifier is still a name.
  const code = expression.replace(/'(?:[^'\\]|\\.)*'/g, "''").replace(/`([^`]*)`/g, '$1');
  const refused = REFUSED_FUNCTIONS.exec(code)?.[1];
  if (refused || REFUSED_VARIABLE.test(code)) {
    const what = refused ? `${refused}()` : 'environment variables (%resource, %context, ...)';
    throw invalid(
      `SearchParameter.expression may not use ${what}: it is evaluated on every write`,
      'expression-refused',
      'expression',
    );
  }
  try {
    const compiled = compileFhirpath(expression);
    for (const b of bases) compiled({ resourceType: b });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw invalid(
      `SearchParameter.expression is not valid FHIRPath: ${why.slice(0, 300)}`,
      'expression-compile',
      'expression',
    );
  }
  return expression;
}

/**
 * The search parameters an active SearchParameter defines, one per base; throws a 400 naming the element at fault.
 * `builtIn`: refuse a code that a base already has built in (a project's; the shared set skips those instead).
 */
export function readSearchParameter(sp: Resource, builtIn = true): CustomParam[] {
  const code = readCode(sp);
  const type = sp.type;
  if (typeof type !== 'string' || !CUSTOM_TYPES.has(type)) {
    throw invalid(
      `SearchParameter.type must be one of ${[...CUSTOM_TYPES].join(', ')} (got ${String(type).slice(0, 32)})`,
      'type',
      'type',
    );
  }
  const bases = readBases(sp, code, builtIn);
  const expression = readExpression(sp, bases);
  const targets = Array.isArray(sp.target)
    ? (sp.target as unknown[]).filter((t) => typeof t === 'string')
    : [];
  const hash = createHash('sha256').update(`${type}\n${expression}`).digest('hex').slice(0, 12);
  return bases.map((base) => ({
    code,
    type: type as CustomParam['type'],
    expression,
    targets: targets as string[],
    url: typeof sp.url === 'string' ? sp.url : '',
    base,
    key: `${code}~${hash}`,
    evaluate: evaluatorOf(expression, base),
  }));
}

/** The custom parameters one project searches and indexes with: the shared packages' and its own. */
export interface ParamSet {
  /** The parameter `code` of `resourceType`, when it is a custom one. */
  get(resourceType: string, code: string): CustomParam | undefined;
  /** Custom parameters of a type. */
  of(resourceType: string): readonly CustomParam[];
  /** Index values of a resource for its type's custom parameters, by index key. */
  extract(resource: Resource): ExtractedValues[];
  size: number;
}

export function paramSet(params: readonly CustomParam[]): ParamSet {
  const byType = new Map<string, Map<string, CustomParam>>();
  for (const p of params) {
    let m = byType.get(p.base);
    if (!m) byType.set(p.base, (m = new Map()));
    if (!m.has(p.code)) m.set(p.code, p); // the first wins: shared ones come first
  }
  return {
    size: params.length,
    get: (t, c) => byType.get(t)?.get(c),
    of: (t) => [...(byType.get(t)?.values() ?? [])],
    extract(resource) {
      const out: ExtractedValues[] = [];
      for (const p of byType.get(resource.resourceType)?.values() ?? []) {
        try {
          const found = p.evaluate(resource as Record<string, unknown>);
          if (found.length === 0) continue;
          const values = toIndexValues(p.type, found);
          if (values.length > 0) out.push({ code: p.key, values });
        } catch {
          // A value of an unexpected shape contributes nothing rather than failing the write (as extract.ts).
        }
      }
      return out;
    },
  };
}

export const EMPTY_SET: ParamSet = paramSet([]);

/**
 * The request with each custom parameter's code replaced by its index key, in filters (chains and `_has`
 * included), sort keys and includes. Built-in parameters keep theirs.
 */
export function rekey(req: SearchRequest, set: ParamSet): SearchRequest {
  if (set.size === 0) return req;
  const key = (type: string, code: string): string =>
    getSearchParam(type, code) ? code : (set.get(type, code)?.key ?? code);
  const filter = (type: string, f: SearchFilter): SearchFilter => {
    if (f.expr) return { ...f, expr: mapLeaves(f.expr, (g) => filter(type, g)) };
    if (f.has) {
      const { sourceType } = f.has;
      return {
        ...f,
        has: { ...f.has, code: key(sourceType, f.has.code), filter: filter(sourceType, f.has.filter) },
      };
    }
    const code = key(type, f.code);
    if (f.chain)
      return { ...f, code, chain: { ...f.chain, filter: filter(f.chain.targetType, f.chain.filter) } };
    return { ...f, code };
  };
  return {
    ...req,
    filters: req.filters.map((f) => filter(req.resourceType, f)),
    sort: req.sort.map((k) => ({ ...k, code: key(req.resourceType, k.code) })),
    include: req.include.map((i) => (i.code === '*' ? i : { ...i, code: key(i.sourceType, i.code) })),
    revinclude: req.revinclude.map((i) => (i.code === '*' ? i : { ...i, code: key(i.sourceType, i.code) })),
  };
}
