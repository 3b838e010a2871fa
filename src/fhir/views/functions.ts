// The FHIRPath functions a SQL on FHIR view runner adds to HL7's fhirpath engine: getResourceKey() and
// getReferenceKey([type]) (R4 mode: the resource id), and lowBoundary()/highBoundary() as the view tests expect them
// (a DateTime without a timezone takes +14:00 low and -12:00 high, https://hl7.org/fhirpath/#lowboundaryprecision-integer-decimal--date--datetime--time).
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#required-additional-functions
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { FHIRPATH_OPTIONS } from '../search/fhirpath-options.js';
import { referenceParts } from '../search/normalise.js';
import { setComputedText } from './decimal-text.js';

/** The text a number was written with (`1.0`), when the caller keeps it; decimals' boundaries depend on it. */
export type NumberText = (holder: object, key: string) => string | undefined;

interface Node {
  data?: unknown;
  parentResNode?: Node | null;
  propName?: string | null;
  fhirNodeDataType?: string | null;
}

type Evaluator = (data: unknown, env: Record<string, unknown>) => unknown[];

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** getResourceKey(): the id of each resource in the input (R4 mode: ids are the keys). */
function getResourceKey(inputs: unknown[]): string[] {
  const out: string[] = [];
  for (const r of inputs)
    if (isRecord(r) && typeof r.resourceType === 'string' && typeof r.id === 'string') out.push(r.id);
  return out;
}

/**
 * getReferenceKey([type]): the id part of each relative or absolute literal reference (`Patient/123` → `123`); empty
 * for references of another type than `type`, contained (`#x`) and logical references.
 */
function getReferenceKey(inputs: unknown[], type?: { name?: string }): string[] {
  const out: string[] = [];
  for (const r of inputs) {
    const ref = isRecord(r) ? r.reference : undefined;
    const parts = typeof ref === 'string' ? referenceParts(ref) : undefined;
    if (parts && (type?.name === undefined || type.name === parts.type)) out.push(parts.id);
  }
  return out;
}

/**
 * join([separator]): the strings of the input joined; the empty collection gives '' (fhirpath.json "string join"
 * expects it), where the engine gives the empty collection. https://hl7.org/fhirpath/#joinseparator-string-string
 */
function join(inputs: unknown[], separator?: unknown): string[] {
  const parts = inputs.map((v) => {
    if (typeof v !== 'string') throw new Error('join() expects strings');
    return v;
  });
  return [parts.join(typeof separator === 'string' ? separator : '')];
}

const TIMEZONE = /(Z|[+-]\d{2}:\d{2})$/;

/** lowBoundary/highBoundary by the engine, with the timezone rule and a decimal's written precision added. */
function boundary(kind: 'lowBoundary' | 'highBoundary', numberText?: NumberText) {
  const compile = (e: string): Evaluator =>
    fhirpath.compile(e, r4, FHIRPATH_OPTIONS as never) as unknown as Evaluator;
  const noPrecision = compile(`%v.${kind}()`);
  const withPrecision = compile(`%v.${kind}(%p)`);
  const offset = kind === 'lowBoundary' ? '+14:00' : '-12:00';
  return {
    internalStructures: true,
    arity: { 0: [], 1: ['Integer'] },
    fn(inputs: unknown[], precision?: unknown): unknown[] {
      const input = inputs.length === 1 ? writtenDecimal(inputs[0] as Node, numberText) : inputs;
      const result =
        precision === undefined
          ? noPrecision({}, { v: input })
          : withPrecision({}, { v: input, p: precision });
      return result.map((value) => {
        const types = fhirpath.types([value]);
        if (types[0] === 'System.Decimal' || types[0] === 'System.Integer')
          return exactDecimal(value, precision);
        if (types[0] !== 'System.DateTime') return value;
        const dt = value as {
          asStr: string;
          ctx: unknown;
          constructor: new (ctx: unknown, s: string) => unknown;
        };
        return TIMEZONE.test(dt.asStr) ? value : new dt.constructor(dt.ctx, dt.asStr + offset);
      });
    },
  };
}

/**
 * A decimal boundary with its exact text recorded for its cell: with a precision argument, that many digits after
 * the point (`1.587.highBoundary(6)` → `1.587500`, as FHIRPath writes it); without, the engine's eight digits
 * less trailing zeros (`1.0` → `0.95`, `1.50` → `1.495`), so a large value keeps every digit
 * (`12345678901234567890.12` → `12345678901234567890.115`) where a JS number would round it.
 */
function exactDecimal(value: unknown, precision: unknown): unknown {
  const text = isRecord(value) ? value.asStr : undefined;
  if (typeof text !== 'string' || !/^-?\d+(\.\d+)?$/.test(text)) return value;
  const trimmed = precision === undefined && text.includes('.') ? text.replace(/\.?0+$/, '') : text;
  setComputedText(value as object, /^-0(\.0+)?$/.test(trimmed) ? trimmed.slice(1) : trimmed);
  return value;
}

/** A FHIR decimal element as a decimal of its written precision (`1.0` → 0.95..1.05), when its text is known. */
function writtenDecimal(node: Node, numberText?: NumberText): unknown {
  if (!numberText || node?.fhirNodeDataType !== 'decimal' || !node.propName) return [node];
  const holder = node.parentResNode?.data;
  const text = isRecord(holder) ? numberText(holder, node.propName) : undefined;
  return text === undefined ? [node] : [fhirpath.FP_Decimal.getDecimal(text)];
}

/** The user invocation table of view evaluations (the `resolve()` stub of search kept). */
export function viewFunctions(numberText?: NumberText): Record<string, unknown> {
  return {
    ...FHIRPATH_OPTIONS.userInvocationTable,
    getResourceKey: { fn: getResourceKey, arity: { 0: [] } },
    getReferenceKey: { fn: getReferenceKey, arity: { 0: [], 1: ['TypeSpecifier'] } },
    join: { fn: join, arity: { 0: [], 1: ['String'] } },
    lowBoundary: boundary('lowBoundary', numberText),
    highBoundary: boundary('highBoundary', numberText),
  };
}
