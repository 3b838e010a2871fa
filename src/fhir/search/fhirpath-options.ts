// The options of every evaluation with HL7's fhirpath engine (search indexing, `$csv` `_fields`), and how its
// results' types are named. https://hl7.org/fhirpath/ and https://hl7.org/fhir/R4/fhirpath.html
import { referenceParts } from './normalise.js';

// `resolve()` without a server: a Reference resolves to a stub of the type its reference names, which is what
// `.where(resolve() is Patient)` needs (https://hl7.org/fhir/R4/search.html#reference).
interface ResNode {
  data?: { reference?: unknown };
  constructor: { makeResNode(...args: unknown[]): unknown };
}
const resolveStub = {
  internalStructures: true,
  fn(this: unknown, inputs: ResNode[]): unknown[] {
    const out: unknown[] = [];
    for (const n of inputs) {
      const ref = n?.data?.reference;
      const parts = typeof ref === 'string' ? referenceParts(ref) : undefined;
      if (parts) {
        const stub = { resourceType: parts.type, id: parts.id };
        out.push(n.constructor.makeResNode(this, stub, null, parts.type, null, parts.type));
      }
    }
    return out;
  },
  arity: { 0: [] },
};

/**
 * `trace()` (https://hl7.org/fhirpath/#tracename-string-projection-expression-collection): fhirpath writes traced
 * values with console.log unless given a function, which let a `_fields` expression write resource data and its
 * own text as raw lines to the server's output (log forging, issue 12). Traces are dropped: nothing a request
 * supplies reaches the output except inside structured log lines. test/api/security-dos.test.ts guards it.
 */
export const discardTrace = (): void => undefined;

/** Options of every fhirpath evaluation on stored resources: typed results, and `resolve()` without a server. */
export const FHIRPATH_OPTIONS = {
  resolveInternalTypes: false,
  userInvocationTable: { resolve: resolveStub },
  traceFn: discardTrace,
} as const;

/** fhirpath's type name (`FHIR.HumanName`, `System.String`) → the FHIR type name (`HumanName`, `string`). */
export function systemTypeName(t: string | undefined): string {
  if (!t) return 'Object';
  const dot = t.indexOf('.');
  const name = dot >= 0 ? t.slice(dot + 1) : t;
  if (t.startsWith('System.')) {
    if (name === 'String') return 'string';
    if (name === 'Object' || name === 'Quantity') return name;
    return name.charAt(0).toLowerCase() + name.slice(1);
  }
  return name;
}

/**
 * R4 writes `(Observation.component.value as Quantity)`, but FHIRPath's `as` yields nothing (or fails) on more than
 * one value, so a resource with two components would index none. R5 rewrote these expressions with `ofType`,
 * which is what they mean; we evaluate them that way.
 */
export function withOfType(expression: string): string {
  return expression.replace(/\(([^()]+) as ([A-Za-z]+)\)/g, '($1.ofType($2))');
}
