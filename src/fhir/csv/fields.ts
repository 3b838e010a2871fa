// `_fields` of $csv (API.md §6, seed §4.4): the list split into entries, each entry compiled once into a function
// that finds the entry's first value in a resource together with its FHIR type.
//
// Types come from the engine, not from guessing: entries inside the simple path subset (`Patient.name`,
// `telecom.where(system='phone')`, `name[0].given`, ...) run on the search indexer's fast path, which walks the R4
// model and the service types' StructureDefinitions; every other entry runs on HL7's fhirpath engine with the R4
// model, whose results carry their type (`FHIR.HumanName`, `System.String`). Only values the engine cannot type
// (elements of the service types under fhirpath, e.g. `ProjectMembership.user.where(...)`) fall back to the value's
// shape (cells.ts guessType).
import { FhirError } from '../outcome.js';
import { withOfType } from '../search/fhirpath-options.js';
import { compileFastPart, parseFastPath, type Evaluator } from '../search/fast-path.js';
import { elementInfo, suffixOf } from '../search/model.js';
import { getSearchParam, splitUnion } from '../search/registry.js';
import type { CellValue } from './cells.js';
import type { SlowColumn } from './fhirpath-eval.js';

/** Finds the first value of an entry in a resource; throws when the FHIRPath fails on this resource. */
export type FieldEvaluator = (resource: Record<string, unknown>) => CellValue | undefined;

export interface CompiledField {
  /** The trimmed `_fields` entry (the column's header). */
  entry: string;
  /** The FHIRPath evaluated: the entry itself, or the search parameter's expression for this type. */
  expression: string;
  /** The fast path evaluator, run in-process; absent when the entry needs the fhirpath engine (`slow`). */
  evaluate?: FieldEvaluator;
  /** An entry beyond the fast path: run by the FHIRPath worker pool (fhirpath-pool.ts), off the event loop. */
  slow?: SlowColumn;
  /**
   * The top-level JSON properties the entry reads (`name`; `deceasedBoolean`, `deceasedDateTime` for a choice), so
   * that storage may send only those; undefined when it may read anything (FHIRPath beyond the fast path).
   */
  keys?: string[];
}

/** Splits `_fields` on commas outside parentheses and quotes (`'...'`, `"..."`, `` `...` ``); entries are trimmed. */
export function splitFields(text: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let quote: string | undefined;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = undefined;
    } else if (c === "'" || c === '"' || c === '`') quote = c;
    else if (c === '(') depth++;
    else if (c === ')') depth = Math.max(0, depth - 1);
    else if (c === ',' && depth === 0) {
      out.push(text.slice(start, i).trim());
      start = i + 1;
    }
  }
  out.push(text.slice(start).trim());
  return out;
}

const invalid = (entry: string, why: string): FhirError =>
  new FhirError(
    'invalid',
    `Invalid FHIRPath expression: ${entry.slice(0, 200)}: ${why.slice(0, 200)}`,
    'csv.fhirpath',
  );

/** A union part of an entry as the fast path reads it: `name.given` means `Patient.name.given` on a Patient. */
const rooted = (part: string, resourceType: string): string =>
  /^[a-z]/.test(part) ? `${resourceType}.${part}` : part;

/** The fast path of all union parts of `expression`, or undefined when one part is outside it. */
function fastField(
  expression: string,
  resourceType: string,
): Pick<CompiledField, 'evaluate' | 'keys'> | undefined {
  const parts = splitUnion(expression).map((p) => rooted(p, resourceType));
  const evs = parts.map((p) => compileFastPart(p, resourceType));
  if (evs.length === 0 || evs.some((p) => p === undefined)) return undefined;
  const keys = keysOf(parts, resourceType);
  const evaluate: FieldEvaluator = (resource) => {
    for (const ev of evs as Evaluator[]) {
      const v = ev(resource)[0];
      if (v !== undefined) return v;
    }
    return undefined;
  };
  return keys ? { evaluate, keys } : { evaluate };
}

/** The top-level properties fast path parts start with; undefined when one reads the whole resource. */
function keysOf(parts: string[], resourceType: string): string[] | undefined {
  const keys: string[] = [];
  for (const part of parts) {
    const first = parseFastPath(part)?.steps[0];
    if (first?.kind !== 'field') return undefined;
    const info = elementInfo(resourceType, first.name);
    if (!info) return undefined;
    if (info.choice) keys.push(...info.types.map((t) => first.name + suffixOf(t)));
    else keys.push(first.name);
  }
  return keys;
}

/**
 * Compiles one trimmed entry. A search parameter name of the type stands for its expression (only the union
 * parts of this type, `as` read as `ofType` as the indexer does); anything else is FHIRPath.
 * Entries beyond the fast path are only checked (parsed and run on an empty resource) by the FHIRPath pool.
 */
export function compileField(resourceType: string, entry: string): CompiledField {
  const param = getSearchParam(resourceType, entry);
  if (param) {
    const expression = param.expression;
    const fast = fastField(expression, resourceType);
    return fast
      ? { entry, expression, ...fast }
      : { entry, expression, slow: { entry, expression: withOfType(expression) } };
  }
  if (entry === '') throw invalid(entry, 'empty entry');
  // `as` over several values is an error in FHIRPath; the fast path would read it as ofType, so leave it to fhirpath.
  const fast = /\bas\b/.test(entry) ? undefined : fastField(entry, resourceType);
  return fast
    ? { entry, expression: entry, ...fast }
    : { entry, expression: entry, slow: { entry, expression: entry } };
}
