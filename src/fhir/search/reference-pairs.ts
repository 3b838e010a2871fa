// One reference row where two parameters index the same reference (issue 30, migration 026): a parameter narrowed by
// target type (`Observation.patient` = `Observation.subject.where(resolve() is Patient)`) indexes, for each of its
// references, the very row its wider parameter (`subject`) has too. The index keeps it once, under the narrower
// code: the wider parameter's rows are those under its own code and those under the narrower one, which every query
// on the wider code reads (src/fhir/search/sql.ts and the compartment lookups). The narrower parameter's rows are
// unchanged, so searches on it read what they read before.
// https://hl7.org/fhir/R4/search.html#reference
import { searchParamsOf } from './registry.js';

const cache = new Map<string, ReadonlyMap<string, string>>();

const NARROWED = /^(.*)\.where\(resolve\(\) is [A-Z][A-Za-z]*\)$/;

/** Per wider reference parameter of `resourceType`, the narrower one whose rows it shares. */
export function narrowerOf(resourceType: string): ReadonlyMap<string, string> {
  let map = cache.get(resourceType);
  if (!map) {
    const refs = searchParamsOf(resourceType).filter((p) => p.type === 'reference');
    const m = new Map<string, string>();
    for (const narrow of refs) {
      const base = NARROWED.exec(narrow.expression)?.[1];
      const wide = base ? refs.find((p) => p.expression === base && p.code !== narrow.code) : undefined;
      // One narrower parameter per wider one (the first in the published order).
      if (wide && !m.has(wide.code)) m.set(wide.code, narrow.code);
    }
    map = m;
    cache.set(resourceType, map);
  }
  return map;
}

/** The codes under which the reference rows of `code` (of `resourceType`) are kept: itself and its narrower one. */
export function referenceCodes(resourceType: string, code: string): string[] {
  const narrow = narrowerOf(resourceType).get(code);
  return narrow ? [code, narrow] : [code];
}

/** `codes` with the narrower parameters whose rows they share (for lookups of several codes at once). */
export function withNarrower(resourceType: string, codes: readonly string[]): string[] {
  return [...new Set(codes.flatMap((c) => referenceCodes(resourceType, c)))];
}
