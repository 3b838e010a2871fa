// Index values of composite search parameters: for each element the composite's expression finds (an Observation,
// each of its components), the values of every component parameter evaluated on that element, written under
// `<code>$<k>` with the element's number `grp`, so that a search matches components of one element together.
// https://hl7.org/fhir/R4/search.html#composite
import type { Resource } from '../types.js';
import { derivedComposites } from './composite-sources.js';
import { fhirpathEvaluator } from './extract.js';
import { toIndexValues, type IndexValue } from './normalise.js';
import { searchParamsOf, splitUnion, type SearchParamInfo } from './registry.js';

export interface ExtractedValues {
  code: string;
  values: IndexValue[];
  /** Composite components: the element the values belong to (same number = same element). */
  grp?: number;
}

const INDEXED = new Set(['string', 'token', 'reference', 'date', 'number', 'quantity', 'uri']);

/** The elements at a simple path (`Observation.component`) of a resource, arrays flattened. */
function elementsAt(resource: Resource, path: string): unknown[] {
  let found: unknown[] = [resource];
  for (const name of path.split('.').slice(1)) {
    const next: unknown[] = [];
    for (const v of found) {
      const child = (v as Record<string, unknown>)[name];
      if (Array.isArray(child)) next.push(...(child as unknown[]));
      else if (child !== undefined && child !== null) next.push(child);
    }
    found = next;
  }
  return found;
}

const compositesCache = new Map<string, readonly SearchParamInfo[]>();

/** A composite Cinder indexes: its components are indexed types, its expression simple paths. */
export function isIndexedComposite(p: SearchParamInfo): boolean {
  return (
    p.type === 'composite' &&
    (p.components ?? []).length > 0 &&
    (p.components ?? []).every((c) => INDEXED.has(c.type)) &&
    splitUnion(p.expression).every((part) => /^[A-Za-z]+(\.[A-Za-z]+)*$/.test(part))
  );
}

function compositesOf(resourceType: string): readonly SearchParamInfo[] {
  let list = compositesCache.get(resourceType);
  if (!list) {
    list = searchParamsOf(resourceType).filter(isIndexedComposite);
    compositesCache.set(resourceType, list);
  }
  return list;
}

/**
 * The composite index values of a resource: those of composites read from other rows (composite-sources.ts) are not
 * written.
 */
export function compositeValues(resource: Resource): ExtractedValues[] {
  const out: ExtractedValues[] = [];
  const derived = derivedComposites(resource.resourceType);
  for (const param of compositesOf(resource.resourceType))
    if (!derived.has(param.code)) compositeValuesOf(resource, param, out);
  return out;
}

/** The index values of one composite parameter of a resource (appended to `out`), as compositeValues writes them. */
export function compositeValuesOf(
  resource: Resource,
  param: SearchParamInfo,
  out: ExtractedValues[] = [],
): ExtractedValues[] {
  let grp = 0;
  for (const base of splitUnion(param.expression)) {
    for (const element of elementsAt(resource, base)) {
      const parts = (param.components ?? []).map((c) => {
        try {
          return toIndexValues(
            c.type,
            fhirpathEvaluator(c.expression, base)(element as Record<string, unknown>),
          );
        } catch {
          return [];
        }
      });
      // An element lacking a component can never match all of them.
      if (parts.every((values) => values.length > 0)) {
        parts.forEach((values, k) => out.push({ code: `${param.code}$${k}`, values, grp }));
      }
      grp++;
    }
  }
  return out;
}
