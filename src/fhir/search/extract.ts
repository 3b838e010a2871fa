// Index values of a resource for a search parameter: the fast path evaluator where the expression allows it,
// HL7's fhirpath engine otherwise. https://hl7.org/fhir/R4/search.html#table
import { LRUCache } from 'lru-cache';
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import type { Resource } from '../types.js';
import { compileFastPart, type Evaluator, type TypedValue } from './fast-path.js';
import { FHIRPATH_OPTIONS, systemTypeName, withOfType } from './fhirpath-options.js';
import { normaliseString, toIndexValues, type IndexValue } from './normalise.js';
import { searchParamsOf, splitUnion, type SearchParamInfo } from './registry.js';
import { compositeValues, type ExtractedValues } from './extract-composite.js';

export type { IndexValue, TypedValue, Evaluator };
export { FHIRPATH_OPTIONS, systemTypeName, withOfType };

/** The resources-table columns that stand in for these parameters; they get no index rows. */
export const COLUMN_PARAMS = new Set(['_id', '_lastUpdated']);

export const INDEXED_TYPES = new Set(['string', 'token', 'reference', 'date', 'number', 'quantity', 'uri']);

/**
 * Compiled expressions: R4's and the projects' own SearchParameters (custom ones come and go with their projects),
 * the least recently used dropped beyond MAX_COMPILED.
 */
const MAX_COMPILED = 10_000;
const fhirpathCache = new LRUCache<string, Evaluator>({ max: MAX_COMPILED });

/** An Evaluator from a compiled FHIRPath function: each item with its System type; nothing when evaluation throws. */
export function typedValuesOf(compiled: (r: unknown) => unknown[]): Evaluator {
  return (resource) => {
    let raw: unknown[];
    try {
      raw = compiled(resource);
    } catch {
      return []; // e.g. `as` over several values: such a resource contributes no values
    }
    const out: TypedValue[] = [];
    for (const item of raw) {
      const value = (fhirpath.resolveInternalTypes([item]) as unknown[])[0];
      if (value === undefined || value === null) continue;
      out.push({ type: systemTypeName(fhirpath.types([item])[0]), value });
    }
    return out;
  };
}

/**
 * Evaluates `expression` with HL7's fhirpath engine (R4 model), compiled once per expression; with `base`, on an
 * element found at that path (`Observation.component`) rather than on a resource.
 */
export function fhirpathEvaluator(expression: string, base?: string): Evaluator {
  const key = base ? `${base}\n${expression}` : expression;
  let ev = fhirpathCache.get(key);
  if (ev) return ev;
  const path = base ? { base, expression: withOfType(expression) } : withOfType(expression);
  const compiled = fhirpath.compile(path as never, r4, FHIRPATH_OPTIONS as never) as unknown as (
    r: unknown,
  ) => unknown[];
  ev = typedValuesOf(compiled);
  fhirpathCache.set(key, ev);
  return ev;
}

export interface CompiledParam {
  param: SearchParamInfo;
  /** True when every union part runs on the fast path. */
  fast: boolean;
  evaluate: Evaluator;
}

function compile(resourceType: string, param: SearchParamInfo): CompiledParam {
  const parts = splitUnion(param.expression);
  const fastParts = parts.map((p) => compileFastPart(p, resourceType));
  const fast = fastParts.every((f) => f !== undefined);
  if (fast) {
    const evs = fastParts as Evaluator[];
    const evaluate: Evaluator =
      evs.length === 1
        ? (evs[0] as Evaluator)
        : (r) => {
            const out: TypedValue[] = [];
            for (const e of evs) for (const v of e(r)) out.push(v);
            return out;
          };
    return { param, fast, evaluate };
  }
  return { param, fast, evaluate: fhirpathEvaluator(param.expression) };
}

const compiledCache = new Map<string, CompiledParam[]>();

/** The parameters of `resourceType` that get index rows, compiled. */
export function indexedParamsOf(resourceType: string): CompiledParam[] {
  let list = compiledCache.get(resourceType);
  if (!list) {
    list = searchParamsOf(resourceType)
      .filter((p) => INDEXED_TYPES.has(p.type) && !COLUMN_PARAMS.has(p.code))
      .map((p) => compile(resourceType, p));
    compiledCache.set(resourceType, list);
  }
  return list;
}

/** The fast path evaluator of a parameter, or undefined when it needs fhirpath (exported for the equality test). */
export function fastEvaluator(resourceType: string, param: SearchParamInfo): Evaluator | undefined {
  const c = compile(resourceType, param);
  return c.fast ? c.evaluate : undefined;
}

/** Index values of one parameter for one resource. */
export function extractValues(resource: Resource, param: SearchParamInfo): IndexValue[] {
  const c = indexedParamsOf(resource.resourceType).find((x) => x.param.code === param.code);
  const evaluate = c?.evaluate ?? compile(resource.resourceType, param).evaluate;
  return toIndexValues(param.type, evaluate(resource as Record<string, unknown>));
}

/**
 * Index values of every indexed parameter of a resource, by parameter code (composite components with the index of
 * their element, `grp`). A value of an unexpected shape contributes nothing rather than failing the write
 * (validation is not this module's job).
 */
export function extractAll(resource: Resource): ExtractedValues[] {
  const out: ExtractedValues[] = compositeValues(resource);
  for (const c of indexedParamsOf(resource.resourceType)) {
    let values: IndexValue[];
    try {
      const found = c.evaluate(resource as Record<string, unknown>);
      if (found.length === 0) continue;
      values = toIndexValues(c.param.type, found);
    } catch {
      continue;
    }
    if (values.length > 0) out.push({ code: c.param.code, values });
  }
  return out;
}

export { normaliseString };
