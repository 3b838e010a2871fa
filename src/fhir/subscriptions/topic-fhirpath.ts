// fhirPathCriteria of a SubscriptionTopic's resource trigger: a FHIRPath boolean over %previous and %current, compiled
// once with HL7's fhirpath engine and the R4 model, evaluated on writes within bounds.
// https://hl7.org/fhir/R5/subscriptiontopic-definitions.html#SubscriptionTopic.resourceTrigger.fhirPathCriteria
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { FHIRPATH_OPTIONS } from '../search/fhirpath-options.js';
import { FhirError } from '../outcome.js';
import type { WriteChange } from './model.js';

/** FHIRPath criteria are evaluated in the write's process: their size is bounded, and so their parse cost. */
export const MAX_FHIRPATH_LENGTH = 2000;
/**
 * Functions refused in fhirPathCriteria, which run synchronously on every matching write and cannot be interrupted:
 * regular expressions a tenant writes (catastrophic backtracking), and walks whose cost grows with a power of the
 * resource's size when nested. Criteria compare elements of two versions; they need none of these.
 */
const REFUSED_FUNCTIONS =
  /(?:^|[^A-Za-z0-9_])(matches|matchesFull|replaceMatches|descendants|repeat|aggregate)\s*\(/;

const invalid = (message: string, code: string, at: string): FhirError =>
  new FhirError('processing', message, `subscription.topic-${code}`, { status: 422, expression: [at] });

type FhirpathFn = (resource: unknown, vars: Record<string, unknown>) => unknown[];
const fhirpathCache = new Map<string, FhirpathFn>();
const FHIRPATH_CACHE_SIZE = 500;

/** The compiled FHIRPath, kept per expression text (topics are recompiled when their version changes). */
function compiledFhirpath(expression: string): FhirpathFn {
  const hit = fhirpathCache.get(expression);
  if (hit) return hit;
  const fn = fhirpath.compile(
    expression,
    r4 as never,
    {
      ...FHIRPATH_OPTIONS,
      resolveInternalTypes: true,
    } as never,
  ) as unknown as FhirpathFn;
  if (fhirpathCache.size >= FHIRPATH_CACHE_SIZE) {
    const oldest = fhirpathCache.keys().next().value;
    if (oldest !== undefined) fhirpathCache.delete(oldest);
  }
  fhirpathCache.set(expression, fn);
  return fn;
}

/**
 * fhirPathCriteria: a FHIRPath boolean over `%previous` and `%current` (each empty when the version is missing),
 * evaluated on the current version (the previous one for a delete). Only a single `true` passes; an evaluation error
 * is no match, never a failed write. Parsed at compile time, and run once on an empty resource so an unknown function
 * or variable is refused then rather than silently never matching.
 */
export function compileFhirPathCriteria(
  value: unknown,
  type: string,
  at: string,
): (change: WriteChange) => boolean {
  if (typeof value !== 'string' || value.trim() === '') {
    throw invalid(`${at} must be a FHIRPath expression`, 'fhirpath-empty', at);
  }
  if (value.length > MAX_FHIRPATH_LENGTH) {
    throw invalid(`${at} is longer than ${MAX_FHIRPATH_LENGTH} characters`, 'fhirpath-length', at);
  }
  // Names inside string literals are text; a `delimited` identifier is still a name.
  const code = value.replace(/'(?:[^'\\]|\\.)*'/g, "''").replace(/`([^`]*)`/g, '$1');
  const refused = REFUSED_FUNCTIONS.exec(code)?.[1];
  if (refused) {
    throw invalid(`${at} may not use ${refused}() (evaluated on every write)`, 'fhirpath-function', at);
  }
  let fn: FhirpathFn;
  try {
    fn = compiledFhirpath(value);
    const empty = { resourceType: type };
    fn(empty, { current: empty, previous: null });
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw invalid(
      `${at} is not a FHIRPath expression Cinder can evaluate: ${why.slice(0, 300)}`,
      'fhirpath',
      at,
    );
  }
  return (change) => {
    const base = change.current ?? change.previous;
    if (!base) return false;
    try {
      const result = fn(base, { current: change.current, previous: change.previous });
      return result.length === 1 && result[0] === true;
    } catch {
      return false;
    }
  };
}
