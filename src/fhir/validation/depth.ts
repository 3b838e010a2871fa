// How deeply a resource may nest (https://hl7.org/fhir/R4/json.html): a bound checked before anything walks a body
// recursively (validation, reference rewriting, JSON Patch, search-index extraction, JSON.stringify), so that a
// hostile body is a 400 instead of a stack overflow.
import { FhirError } from '../outcome.js';

/**
 * Levels of JSON objects and arrays a resource may have, the resource itself being level 1. Real resources stay far
 * below: a Questionnaire nested ten groups deep is about 25 levels, a contained resource or nested extension adds 2.
 * Recursive code in Node.js overflows its stack somewhere between 2,000 and 5,000 levels, so 128 leaves margin both
 * ways (test/api/security-writes.test.ts stores a resource of exactly this depth through every writer).
 */
export const MAX_RESOURCE_DEPTH = 128;

/**
 * Where `value` first nests deeper than `max` levels (counting `value` as level 1): the path suffix of its top-level
 * element (`.extension`, `[0]`), `''` for `value` itself, or undefined when it does not. Iterative: any depth is safe.
 */
export function tooDeepElement(value: unknown, max: number): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  if (max < 1) return '';
  const isArray = Array.isArray(value);
  const entries = isArray ? value.entries() : Object.entries(value);
  for (const [key, child] of entries) {
    if (typeof child !== 'object' || child === null) continue;
    // Depth-first with an explicit stack of [value, level]; level 2 is a child of the root.
    const stack: unknown[] = [child];
    const levels: number[] = [2];
    while (stack.length > 0) {
      const v = stack.pop() as object;
      const level = levels.pop() as number;
      if (level > max) return isArray ? `[${key}]` : `.${String(key)}`;
      if (Array.isArray(v)) {
        for (const c of v as unknown[]) {
          if (typeof c === 'object' && c !== null) {
            stack.push(c);
            levels.push(level + 1);
          }
        }
      } else {
        for (const k in v) {
          const c = (v as Record<string, unknown>)[k];
          if (typeof c === 'object' && c !== null) {
            stack.push(c);
            levels.push(level + 1);
          }
        }
      }
    }
  }
  return undefined;
}

/**
 * Throws 400 (`structure`) when `value` nests deeper than `max` levels; `root` names it in the expression (e.g.
 * `Patient`, so that the expression reads `Patient.extension`).
 */
export function assertDepth(value: unknown, max: number, root: string, code = 'validation.too-deep'): void {
  const element = tooDeepElement(value, max);
  if (element === undefined) return;
  throw new FhirError(
    'structure',
    `${root}${element} nests deeper than ${max} levels of JSON objects and arrays`,
    code,
    { expression: [`${root}${element}`] },
  );
}
