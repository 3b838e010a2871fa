// `_fields` entries beyond the fast path, evaluated with HL7's fhirpath engine (R4 model): compiled once, checked on
// a resource without data, then run on each resource. Runs inside the FHIRPath worker (fhirpath-worker.ts), never
// on the event loop: parsing and evaluating a hostile expression can take minutes. https://hl7.org/fhirpath/
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { parseJson } from '../json/parse.js';
import { rawNumberText } from '../json/raw-numbers.js';
import { FHIRPATH_OPTIONS, systemTypeName } from '../search/fhirpath-options.js';
import type { CellValue } from './cells.js';

/** One column that needs the engine: the `_fields` entry (for messages) and the FHIRPath evaluated. */
export interface SlowColumn {
  entry: string;
  expression: string;
}

/** A cell: its value (undefined: empty), or the message of a FHIRPath that failed on this resource. */
export type CellResult = CellValue | undefined | { error: string };

/** An entry that does not parse, or names an unknown function or variable. */
export class InvalidEntry extends Error {
  constructor(
    readonly entry: string,
    readonly why: string,
  ) {
    super(why);
  }
}

type Compiled = (resource: unknown, env: Record<string, unknown>) => unknown[];

/** `%resource` and `%rootResource` (https://hl7.org/fhir/R4/fhirpath.html#variables): the exported resource. */
const envOf = (resource: unknown): Record<string, unknown> => ({ resource, rootResource: resource });

const MAX_CACHED = 500;
const cache = new Map<string, Compiled>();

/** Compiles a column, checked on `{ resourceType }` once per expression; throws InvalidEntry. */
function compiled(resourceType: string, c: SlowColumn): Compiled {
  const key = `${resourceType}\n${c.expression}`;
  let fn = cache.get(key);
  if (fn) return fn;
  try {
    fn = fhirpath.compile(c.expression, r4, FHIRPATH_OPTIONS as never) as unknown as Compiled;
  } catch (err) {
    throw new InvalidEntry(c.entry, (err as Error).message.split('\n')[0] ?? '');
  }
  // Unknown functions and environment variables only fail when run: a resource without data tells them apart
  // from failures that depend on a resource's values (e.g. `substring` of several given names).
  try {
    const empty = { resourceType };
    fn(empty, envOf(empty));
  } catch (err) {
    throw new InvalidEntry(c.entry, (err as Error).message);
  }
  if (cache.size >= MAX_CACHED) cache.clear();
  cache.set(key, fn);
  return fn;
}

/** Compiles and checks every column; throws InvalidEntry for the first bad one. */
export function checkColumns(resourceType: string, columns: readonly SlowColumn[]): void {
  for (const c of columns) compiled(resourceType, c);
}

/**
 * The written text of a decimal result (CellValue.raw), which would not survive the trip to the main thread. A
 * number is found through the engine's node (its parent's data and property name); rawNumberText checks that the
 * slot still holds that very number, so a node of another shape only means no text.
 */
function rawText(item: unknown, value: unknown): string | undefined {
  if (value !== null && typeof value === 'object') return rawNumberText(value, 'value');
  if (typeof value !== 'number') return undefined;
  const node = item as { parentResNode?: { data?: unknown } | null; propName?: unknown; index?: unknown };
  const parent = node?.parentResNode?.data;
  if (parent === null || typeof parent !== 'object' || typeof node.propName !== 'string') return undefined;
  const slot = (parent as Record<string, unknown>)[node.propName];
  if (typeof node.index === 'number')
    return Array.isArray(slot) ? rawNumberText(slot, node.index) : undefined;
  return rawNumberText(parent, node.propName);
}

/** The first typed value of `fn` on `resource`. */
function firstValue(fn: Compiled, resource: unknown): CellValue | undefined {
  for (const item of fn(resource, envOf(resource))) {
    const value = (fhirpath.resolveInternalTypes([item]) as unknown[])[0];
    if (value === undefined || value === null) continue;
    const type = systemTypeName(fhirpath.types([item])[0]);
    const raw = rawText(item, value);
    return { type: type === 'Object' ? undefined : type, value, ...(raw === undefined ? {} : { raw }) };
  }
  return undefined;
}

/** The cells of each resource (stored JSON text), one per column. */
export function evaluateRows(
  resourceType: string,
  columns: readonly SlowColumn[],
  jsons: readonly string[],
): CellResult[][] {
  const fns = columns.map((c) => compiled(resourceType, c));
  return jsons.map((json) => {
    const resource = parseJson(json);
    return fns.map((fn) => {
      try {
        return firstValue(fn, resource);
      } catch (err) {
        return { error: (err as Error).message };
      }
    });
  });
}
