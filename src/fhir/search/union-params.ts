// Search parameters whose expression is the union of other parameters' expressions (Observation `combo-code` =
// `Observation.code | Observation.component.code` = `code` ∪ `component-code`): their values are exactly the values
// of those parameters, so the index keeps them once, under the parts' codes, and every query on the union's code reads
// the parts' codes (issue 30, fewer bytes per resource; migration 027 deletes the rows written before). Found in the R4
// definitions: a parameter whose union parts (splitUnion) are all parts of other parameters of the same type, each of
// which has fewer parts. In R4 these are Observation's `combo-code`, `combo-value-quantity`, `combo-value-concept`
// and `combo-data-absent-reason`. A project's own SearchParameters are never parts or unions (their index codes are
// their own).
// https://hl7.org/fhir/R4/search.html
import { searchParamsOf, splitUnion, type SearchParamInfo } from './registry.js';

/** The value tables' parameter types (references have their own pairs: reference-pairs.ts). */
const TYPES = new Set(['token', 'quantity', 'date', 'string', 'number', 'uri']);

const cache = new Map<string, ReadonlyMap<string, readonly string[]>>();

function find(resourceType: string): ReadonlyMap<string, readonly string[]> {
  const params = searchParamsOf(resourceType).filter((p) => TYPES.has(p.type) && p.expression);
  const parts = new Map(params.map((p) => [p.code, new Set(splitUnion(p.expression))]));
  const within = (p: SearchParamInfo): SearchParamInfo[] => {
    const mine = parts.get(p.code) as Set<string>;
    return params.filter((q) => {
      const theirs = parts.get(q.code) as Set<string>;
      return (
        q.code !== p.code &&
        q.type === p.type &&
        theirs.size < mine.size &&
        [...theirs].every((x) => mine.has(x))
      );
    });
  };
  const covered = (p: SearchParamInfo): boolean => {
    const q = within(p);
    const all = new Set(q.flatMap((x) => [...(parts.get(x.code) as Set<string>)]));
    return q.length > 0 && [...(parts.get(p.code) as Set<string>)].every((x) => all.has(x));
  };
  const out = new Map<string, readonly string[]>();
  // The parts are taken among the parameters that are no union themselves (those hold the rows): each part strictly
  // smaller than the union, so the parts of a smaller union are smaller still and cover it.
  for (const p of params)
    if (covered(p))
      out.set(
        p.code,
        within(p)
          .filter((q) => !covered(q))
          .map((q) => q.code),
      );
  return out;
}

/** The parameters whose rows hold the values of the union parameter `code` of `resourceType`; undefined if none. */
export function unionOf(resourceType: string, code: string): readonly string[] | undefined {
  let m = cache.get(resourceType);
  if (!m) cache.set(resourceType, (m = find(resourceType)));
  return m.get(code);
}
