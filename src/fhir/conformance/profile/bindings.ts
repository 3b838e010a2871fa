// Terminology bindings (https://hl7.org/fhir/R4/terminologies.html#strength): a `required` binding's code must be
// in the value set (error), an `extensible` one should be (warning); `preferred` and `example` are not checked. A
// value set the server cannot expand is a warning naming it (API.md §9).
import type { OperationOutcomeIssue } from '../../outcome.js';
import type { At, Coding, Terminology, ValidateCodeResult } from '../model.js';
import { isObject } from './values.js';
import type { PendingBinding } from './walk.js';

const MAX_CODINGS = 1_000;

/** The codings a bound value carries, by its type; undefined for types bindings do not apply to. */
function codingsOf(type: string, value: unknown): Coding[] | undefined {
  const coding = (v: unknown): Coding | undefined => {
    if (!isObject(v)) return undefined;
    const c: Coding = {};
    if (typeof v.system === 'string') c.system = v.system;
    if (typeof v.version === 'string') c.version = v.version;
    if (typeof v.code === 'string') c.code = v.code;
    return c.code === undefined ? undefined : c;
  };
  switch (type) {
    case 'code':
    case 'string':
    case 'uri':
      return typeof value === 'string' ? [{ code: value }] : undefined;
    case 'Coding':
    case 'Quantity':
      return [coding(value)].filter((c): c is Coding => c !== undefined);
    case 'CodeableConcept': {
      const list = isObject(value) && Array.isArray(value.coding) ? (value.coding as unknown[]) : [];
      return list.map(coding).filter((c): c is Coding => c !== undefined);
    }
    default:
      return undefined;
  }
}

/** A CodeableConcept with only text under a required binding: no code of the value set (when the server knows it). */
async function noCoding(
  terminology: Terminology,
  at: At,
  b: PendingBinding,
  issues: OperationOutcomeIssue[],
  unexpandable: Set<string>,
): Promise<void> {
  // A value set too large to expand is still known: having no coding at all cannot be in it.
  const known = await terminology.expand(at, b.valueSet, { count: 0 }).then(
    (e) => e !== undefined,
    () => true,
  );
  if (!known) {
    if (!unexpandable.has(b.valueSet)) {
      unexpandable.add(b.valueSet);
      issues.push(unchecked(b));
    }
    return;
  }
  issues.push({
    severity: 'error',
    code: 'value',
    details: { text: `${b.path}: no coding from the value set ${b.valueSet} (required binding)` },
    expression: [b.path],
  });
}

const unchecked = (b: PendingBinding): OperationOutcomeIssue => ({
  severity: 'warning',
  code: 'not-supported',
  details: {
    text: `${b.path}: the required binding to value set ${b.valueSet} was not checked: the server cannot expand it`,
  },
  expression: [b.path],
});

const show = (c: Coding): string => (c.system ? `${c.system}#${c.code ?? ''}` : (c.code ?? ''));

/**
 * The answers already asked of the terminology under one `At`: a write makes one `At` for all its versions
 * (write-rules.ts), so a transaction of 100 Patients asks about each (value set, code) once, not once per Patient.
 */
const answers = new WeakMap<At, Map<string, Promise<ValidateCodeResult | undefined>>>();
function askedFor(at: At): Map<string, Promise<ValidateCodeResult | undefined>> {
  let m = answers.get(at);
  if (!m) answers.set(at, (m = new Map()));
  return m;
}

/** Checks the bindings the walk collected; pushes their issues. */
export async function checkBindings(
  terminology: Terminology,
  at: At,
  pending: readonly PendingBinding[],
  issues: OperationOutcomeIssue[],
): Promise<void> {
  const asked = askedFor(at);
  const unexpandable = new Set<string>();
  let budget = MAX_CODINGS;
  for (const b of pending) {
    const codings = codingsOf(b.type, b.value);
    if (!codings) continue;
    budget -= Math.max(1, codings.length);
    if (budget < 0) break;
    if (codings.length === 0) {
      if (b.strength === 'required' && b.type === 'CodeableConcept')
        await noCoding(terminology, at, b, issues, unexpandable);
      continue;
    }
    // One after another: `at.db` may be a write's transaction, a single connection that takes one query at a time.
    const results: Awaited<ReturnType<Terminology['validateCode']>>[] = [];
    for (const c of codings) {
      const key = `${b.valueSet}\n${c.system ?? ''}\n${c.version ?? ''}\n${c.code ?? ''}`;
      let p = asked.get(key);
      if (!p) asked.set(key, (p = terminology.validateCode(at, b.valueSet, c).catch(() => undefined)));
      results.push(await p);
    }
    if (results.some((r) => r?.result === true)) continue;
    if (results.some((r) => r === undefined)) {
      if (b.strength === 'required' && !unexpandable.has(b.valueSet)) {
        unexpandable.add(b.valueSet);
        issues.push(unchecked(b));
      }
      continue;
    }
    const required = b.strength === 'required';
    issues.push({
      severity: required ? 'error' : 'warning',
      code: 'value',
      details: {
        text: `${b.path}: ${codings.map(show).join(', ')} is not in the value set ${b.valueSet} (${b.strength} binding)`,
      },
      expression: [b.path],
    });
  }
}
