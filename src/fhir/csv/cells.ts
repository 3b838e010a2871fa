// The text of one $csv cell (API.md §6, seed §4.4): a value's FHIR type decides its text, then CSV-injection
// escaping, then RFC 4180 quoting (https://www.rfc-editor.org/rfc/rfc4180). Pure functions, shared by the
// synchronous $csv operation and the CSV bulk export.
import { numberText, setRawNumber } from '../json/raw-numbers.js';
import { isTypeOf } from '../search/model.js';

/** A value found by a `_fields` entry: its FHIR type name (`HumanName`, `string`, ...) when known. */
export interface CellValue {
  /** `undefined` (or `Object`) when the engine does not know it: the value's shape decides (see guessType). */
  type: string | undefined;
  value: unknown;
  /**
   * The text a decimal was written with (`1.50`), when it differs from its JS form: of the value when it is a
   * number, of its `value` element when it is an object (a Quantity). Values found in-process carry their texts
   * themselves (src/fhir/json/raw-numbers.ts); the FHIRPath worker's values lose them on the way, hence this field.
   */
  raw?: string;
}

type Json = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const strs = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string' && x !== '') : [];
const joinDefined = (parts: (string | undefined)[], sep: string): string =>
  parts.filter((p): p is string => p !== undefined && p !== '').join(sep);

/** Prefix, given, family, suffix joined by single spaces; `text` when the name has none of them. */
export function humanName(n: Json): string {
  const parts = [...strs(n.prefix), ...strs(n.given), ...(str(n.family) ? [n.family as string] : [])];
  parts.push(...strs(n.suffix));
  return parts.length > 0 ? parts.join(' ') : (str(n.text) ?? '');
}

/** Lines, city, `state postalCode`, country joined by `, `; `text` when the address has none of them. */
export function address(a: Json): string {
  const parts = [
    ...strs(a.line),
    str(a.city),
    joinDefined([str(a.state), str(a.postalCode)], ' '),
    str(a.country),
  ];
  const text = joinDefined(parts, ', ');
  return text !== '' ? text : (str(a.text) ?? '');
}

/** `display`, else `code`. */
export function coding(c: Json): string {
  return str(c.display) ?? str(c.code) ?? '';
}

/** `text`, else the first coding's `display`, else its `code`. */
export function codeableConcept(cc: Json): string {
  if (str(cc.text)) return cc.text as string;
  const first = Array.isArray(cc.coding) ? (cc.coding[0] as unknown) : undefined;
  return first && typeof first === 'object' ? coding(first as Json) : '';
}

/** `value unit` (unit, else code); either may be missing. */
export function quantity(q: Json): string {
  const value = numberText(q, 'value') ?? str(q.value);
  return joinDefined([value, str(q.unit) ?? str(q.code)], ' ');
}

/** `start/end`; a missing bound is left empty (`2020-01-01/`); a Period with neither is empty. */
export function period(p: Json): string {
  const start = str(p.start);
  const end = str(p.end);
  return start === undefined && end === undefined ? '' : `${start ?? ''}/${end ?? ''}`;
}

/** `display`, else `reference`. */
export function reference(r: Json): string {
  return str(r.display) ?? str(r.reference) ?? '';
}

const FORMATTERS: Record<string, (v: Json) => string> = {
  HumanName: humanName,
  Address: address,
  ContactPoint: (c) => str(c.value) ?? '',
  Reference: reference,
  CodeableConcept: codeableConcept,
  Coding: coding,
  Quantity: quantity,
  Identifier: (i) => str(i.value) ?? '',
  Period: period,
};

/**
 * The type of an object the engine could not type (e.g. elements of the service types that HL7's fhirpath model
 * does not know), from its shape. Identifier and ContactPoint both show `value`, so telling them apart is not needed.
 */
export function guessType(v: Json): string | undefined {
  if ('reference' in v) return 'Reference';
  if ('coding' in v) return 'CodeableConcept';
  if ('family' in v || 'given' in v || 'prefix' in v || 'suffix' in v) return 'HumanName';
  if ('line' in v || 'city' in v || 'state' in v || 'postalCode' in v || 'country' in v) return 'Address';
  if (typeof v.value === 'number') return 'Quantity';
  if (typeof v.value === 'string') return 'Identifier';
  if ('code' in v) return 'Coding';
  if ('start' in v || 'end' in v) return 'Period';
  return undefined;
}

function formatterOf(type: string): ((v: Json) => string) | undefined {
  const own = FORMATTERS[type];
  if (own) return own;
  // Age, Distance, Duration, Count, SimpleQuantity, MoneyQuantity are Quantities.
  return isTypeOf(type, 'Quantity') ? quantity : undefined;
}

/** A copy of `o` whose `value` number is written `text` (restores a text lost crossing the worker boundary). */
function withValueText(o: Json, text: string): Json {
  const copy = { ...o };
  setRawNumber(copy, 'value', text);
  return copy;
}

/** The text of a value before escaping: primitives as they are, the listed complex types, anything else empty. */
export function formatValue(v: CellValue | undefined): string {
  if (v === undefined || v.value === null || v.value === undefined) return '';
  const value = v.value;
  if (typeof value === 'string') return value;
  if (typeof value === 'number') return v.raw ?? String(value);
  if (typeof value === 'bigint') return String(value);
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value !== 'object' || Array.isArray(value)) return '';
  const type = v.type === undefined || v.type === 'Object' ? guessType(value as Json) : v.type;
  const format = type === undefined ? undefined : formatterOf(type);
  if (!format) return '';
  const json = value as Json;
  return format(v.raw !== undefined && typeof json.value === 'number' ? withValueText(json, v.raw) : json);
}

const INJECTION = /^[=+\-@\t\r]/;

/** A leading `'` before text that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR). */
export function escapeInjection(text: string): string {
  return INJECTION.test(text) ? `'${text}` : text;
}

const NEEDS_QUOTES = /[",\r\n]/;

/** RFC 4180: a field with a comma, double quote, CR or LF is quoted, its quotes doubled. */
export function quoteField(text: string): string {
  return NEEDS_QUOTES.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** The final CSV text of a cell (header cells included): escaped, then quoted. */
export function csvField(text: string): string {
  return quoteField(escapeInjection(text));
}

export interface CsvRecordOptions {
  /**
   * Escape text a spreadsheet would run as a formula (default true: `$csv`, API.md §6). A view's CSV is data for
   * programs and keeps its values unchanged (API.md §7): `false`, RFC 4180 quoting only.
   */
  escapeFormulas?: boolean;
}

/** One CSV record with its CRLF line break (RFC 4180 §2). */
export function csvRecord(texts: readonly string[], opts: CsvRecordOptions = {}): string {
  return texts.map(opts.escapeFormulas === false ? quoteField : csvField).join(',') + '\r\n';
}
