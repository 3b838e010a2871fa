// Invariants (ElementDefinition.constraint, https://hl7.org/fhir/R4/conformance-rules.html#constraints): FHIRPath
// expressions evaluated with HL7's engine on the element, with %resource and %rootResource. Compiled once per
// (element path, expression); ele-1 and ext-1, on every element, are checked natively (same meaning, no engine).
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { FHIRPATH_OPTIONS } from '../../search/fhirpath-options.js';
import type { Constraint } from './compile.js';
import { isObject, type Json } from './values.js';

type Compiled = (data: unknown, env: Record<string, unknown>) => unknown[];

/** Longer expressions are not evaluated (reported), nor those repeating costly traversals (a hostile profile). */
export const MAX_EXPRESSION_LENGTH = 2_000;
const MAX_TRAVERSALS = 8;
/** A traversal of a traversal's every result (quadratic or worse on a large resource). */
const CHAINED = /(descendants|repeat)\s*\([^)]*\)\s*\.\s*(descendants|repeat)\s*\(/;
/** A traversal inside the argument of a function applied to a traversal's results (also quadratic). */
const NESTED =
  /(descendants|repeat)\s*\([^)]*\)[^;]*?\.\s*(where|select|all|exists|repeat|aggregate|any|iif)\s*\([^)]*(descendants|repeat)\s*\(/;
const MAX_CACHED = 2_000;
const cache = new Map<string, Compiled | Error>();

/** ele-1: `hasValue() or (children().count() > id.count())` (https://hl7.org/fhir/R4/element.html#invs). */
function ele1(value: unknown, extra: Json | undefined): boolean {
  if (value !== undefined && value !== null && !isObject(value)) return true;
  if (extra && Object.keys(extra).some((k) => k !== 'id')) return true;
  return isObject(value) && Object.keys(value).some((k) => k !== 'id');
}

/** ext-1: `extension.exists() != value.exists()` (https://hl7.org/fhir/R4/extensibility.html#invs). */
function ext1(value: unknown): boolean {
  if (!isObject(value)) return true;
  const hasExtension = Array.isArray(value.extension) && value.extension.length > 0;
  // A primitive value present only by its `_valueX` part (extensions) is a value too.
  const hasValue = Object.keys(value).some(
    (k) => (k.startsWith('value') && k.length > 5) || (k.startsWith('_value') && k.length > 6),
  );
  return hasExtension !== hasValue;
}

const NATIVE: Record<string, (value: unknown, extra: Json | undefined) => boolean> = {
  'ele-1\nhasValue() or (children().count() > id.count())': ele1,
  'ext-1\nextension.exists() != value.exists()': ext1,
};

/** Counts of `descendants()` and `repeat(` in an expression. */
function traversals(expression: string): number {
  return (expression.match(/descendants\s*\(|repeat\s*\(/g) ?? []).length;
}

/** The expression compiled for elements at `base` (an element path), or the Error that compiling it gave. */
export function compiledConstraint(base: string, expression: string): Compiled | Error {
  const key = `${base}\n${expression}`;
  const hit = cache.get(key);
  if (hit) return hit;
  let out: Compiled | Error;
  if (
    expression.length > MAX_EXPRESSION_LENGTH ||
    traversals(expression) > MAX_TRAVERSALS ||
    CHAINED.test(expression) ||
    NESTED.test(expression)
  ) {
    out = new Error('the expression is too long or repeats costly traversals; not evaluated');
  } else {
    try {
      out = fhirpath.compile({ base, expression }, r4, FHIRPATH_OPTIONS as never) as unknown as Compiled;
    } catch (err) {
      out = err instanceof Error ? err : new Error(String(err));
    }
  }
  if (cache.size >= MAX_CACHED) cache.clear();
  cache.set(key, out);
  return out;
}

export type InvariantResult = { ok: true } | { ok: false } | { error: string };

/** Evaluates one constraint on a value found at element path `base`; never throws. */
export function evaluateConstraint(
  c: Constraint,
  base: string,
  value: unknown,
  extra: Json | undefined,
  root: unknown,
): InvariantResult {
  const native = NATIVE[`${c.key}\n${c.expression}`];
  if (native) return { ok: native(value, extra) };
  // A primitive's own invariants need the engine's model of primitives; the base ones are natively checked above.
  if (!isObject(value)) return { ok: true };
  const fn = compiledConstraint(base.replace(/\[x\]/g, ''), c.expression);
  if (fn instanceof Error) return { error: fn.message.split('\n')[0] ?? 'cannot compile' };
  try {
    const out = fn(value, { resource: root, rootResource: root });
    // A constraint holds when it is true; an empty result is taken as true (nothing to contradict it).
    return { ok: out.length === 0 || out.every((x) => x === true) };
  } catch (err) {
    return { error: (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? 'error' };
  }
}
