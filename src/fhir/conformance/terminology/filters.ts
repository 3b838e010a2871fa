// ValueSet.compose.include.filter over a compiled code system (https://hl7.org/fhir/R4/valueset-definitions.html
// #ValueSet.compose.include.filter, operators https://hl7.org/fhir/R4/valueset-filter-operator.html): `is-a`,
// `descendent-of`, `is-not-a`, `generalizes` on the hierarchy, `=`, `in`, `not-in`, `regex` and `exists` on a
// property (`code`/`concept` is the code itself, `display` the display, any other a concept property).
import { FhirError } from '../../outcome.js';
import type { CodeSystemIndex, Concept } from './code-system-index.js';
import { compileRegexFilter } from './regex-guard.js';

export interface Filter {
  property: string;
  op: string;
  value: string;
}

/** The text values of a property of a concept (`code`, `display`, or the concept property's values). */
function valuesOf(c: Concept, property: string): string[] {
  if (property === 'code' || property === 'concept') return [c.code];
  if (property === 'display') return c.display !== undefined ? [c.display] : [];
  const out: string[] = [];
  for (const p of c.properties) {
    if (p.code !== property) continue;
    const v = p.value as { code?: unknown } | string | number | boolean;
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out.push(String(v));
    else if (v && typeof v === 'object' && typeof v.code === 'string') out.push(v.code);
  }
  return out;
}

const unsupported = (f: Filter): FhirError =>
  new FhirError(
    'not-supported',
    `The filter operator ${f.op.slice(0, 32)} is not supported (is-a, descendent-of, is-not-a, generalizes, =, in, not-in, regex, exists)`,
    'terminology.filter-op',
    { status: 422 },
  );

/** Milliseconds one `regex` filter may take over a whole code system. */
export const REGEX_BUDGET_MS = 2000;
const regexTooCostly = (): FhirError =>
  new FhirError(
    'too-costly',
    `The regex filter took more than ${REGEX_BUDGET_MS} ms`,
    'terminology.regex-budget',
  );

/** Concepts passing `test`, in code system order. */
const where = (cs: CodeSystemIndex, test: (c: Concept, i: number) => boolean): number[] => {
  const out: number[] = [];
  cs.concepts.forEach((c, i) => {
    if (test(c, i)) out.push(i);
  });
  return out;
};

function hierarchy(cs: CodeSystemIndex, f: Filter): number[] {
  const at = cs.find(f.value);
  if (f.op === 'is-not-a') {
    if (at === undefined) return cs.concepts.map((_, i) => i);
    const out = new Set([at, ...cs.descendants(at)]);
    return where(cs, (_, i) => !out.has(i));
  }
  if (at === undefined) return [];
  if (f.op === 'is-a') return [at, ...cs.descendants(at)];
  if (f.op === 'descendent-of') return [...cs.descendants(at)];
  return [at, ...cs.ancestors(at)]; // generalizes
}

/** The concepts of `cs` a filter selects (positions in cs.concepts). */
export function applyFilter(cs: CodeSystemIndex, f: Filter): number[] {
  switch (f.op) {
    case 'is-a':
    case 'descendent-of':
    case 'is-not-a':
    case 'generalizes':
      return hierarchy(cs, f);
    case '=':
      return where(cs, (c) => valuesOf(c, f.property).includes(f.value));
    case 'in':
    case 'not-in': {
      const list = new Set(f.value.split(',').map((v) => v.trim()));
      const hit = (c: Concept): boolean => valuesOf(c, f.property).some((v) => list.has(v));
      return where(cs, (c) => hit(c) === (f.op === 'in'));
    }
    case 'regex': {
      const test = compileRegexFilter(f.value);
      // Each match is bounded (regex-guard.ts); the whole filter gets a time budget too, checked every 256 concepts.
      const started = Date.now();
      return where(cs, (c, i) => {
        if ((i & 255) === 0 && Date.now() - started > REGEX_BUDGET_MS) throw regexTooCostly();
        return valuesOf(c, f.property).some(test);
      });
    }
    case 'exists': {
      const want = f.value !== 'false';
      return where(cs, (c) => valuesOf(c, f.property).length > 0 === want);
    }
    default:
      throw unsupported(f);
  }
}
