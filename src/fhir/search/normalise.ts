// Index values per search parameter type, as https://hl7.org/fhir/R4/search.html defines what each FHIR data type
// contributes to a string, token, reference, date, number, quantity or uri parameter.
import { rawNumberText } from '../json/raw-numbers.js';
import { isResourceType } from './model.js';

export type IndexValue =
  | { t: 'string'; norm: string; exact: string }
  | { t: 'token'; system: string | null; value: string | null; text: string | null }
  | { t: 'reference'; targetType: string | null; targetId: string | null; ref: string }
  /** [low, high) in epoch milliseconds, ±Infinity when open-ended. */
  | { t: 'date'; low: number; high: number }
  | { t: 'number'; value: string }
  | { t: 'quantity'; value: string; system: string | null; code: string | null; unit: string | null }
  | { t: 'uri'; value: string }
  /**
   * An identifier (sp_identifier, migration 017): of an Identifier with one type coding (`:of-type`), or of a
   * Reference's `identifier` (reference `:identifier`, no type).
   */
  | {
      t: 'identifier';
      system: string | null;
      value: string;
      typeSystem: string | null;
      typeCode: string | null;
    };

/** Longest normalised string kept in an index (btree entries have a size limit); queries truncate alike. */
export const MAX_NORM = 255;

/** Longest token, uri or reference text kept in an index key; queries truncate alike (a btree row must stay < 2.7 kB). */
export const MAX_KEY = 256;

export function indexKey(s: string): string {
  return s.length > MAX_KEY ? s.slice(0, MAX_KEY) : s;
}

const ASCII = /^[\x20-\x7e]*$/;
const MARKS = /\p{M}/gu;

/** Case- and accent-insensitive form used for string prefix matching: `Zoë` → `zoe`. */
export function normaliseString(s: string): string {
  const n = ASCII.test(s) ? s.toLowerCase() : s.normalize('NFD').replace(MARKS, '').toLowerCase();
  return n.length > MAX_NORM ? n.slice(0, MAX_NORM) : n;
}

const REF = /^(?:.*\/)?([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/** `Patient/1`, `https://x/fhir/Patient/1/_history/2` → {type: 'Patient', id: '1'}; anything else undefined. */
export function referenceParts(ref: string): { type: string; id: string } | undefined {
  const bar = ref.indexOf('|');
  const m = REF.exec(bar >= 0 ? ref.slice(0, bar) : ref);
  if (!m || !isResourceType(m[1] as string)) return undefined;
  return { type: m[1] as string, id: m[2] as string };
}

/** Relative `Type/id` where the reference has that shape (absolute URLs reduced to it), else the text as is. */
export function normaliseReference(ref: string, typeHint?: unknown): IndexValue | undefined {
  if (ref.length === 0 || ref.startsWith('#')) return undefined;
  const parts = referenceParts(ref);
  if (parts)
    return { t: 'reference', targetType: parts.type, targetId: parts.id, ref: `${parts.type}/${parts.id}` };
  const hint = typeof typeHint === 'string' && isResourceType(typeHint) ? typeHint : null;
  return { t: 'reference', targetType: hint, targetId: null, ref: indexKey(ref) };
}

// ---- dates -------------------------------------------------------------------------------------------------

const DATE =
  /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:\d{2})?)?)?)?$/;

/** Date.UTC for any year (Date.UTC maps 0-99 to 1900-1999): computed 2000 years later, as the calendar repeats every 400. */
function utc(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0): Date {
  const date = new Date(Date.UTC(y + 2000, mo, d, h, mi, s, ms));
  date.setUTCFullYear(date.getUTCFullYear() - 2000);
  return date;
}

/** ISO text PostgreSQL reads; past year 9999 (the end of 9999-12-31, or a time zone shift) is open-ended. */
function iso(ms: number): string {
  if (ms >= MAX_MS) return 'infinity';
  if (ms < MIN_MS) return '-infinity';
  return new Date(ms).toISOString();
}

const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999) + 1;
const MIN_MS = utc(1, 0, 1).getTime();

/**
 * The range a date, dateTime or instant covers at its precision, as [low, high) ISO instants:
 * `2020` → [2020-01-01T00:00:00.000Z, 2021-01-01T00:00:00.000Z). Times without a zone are read as UTC.
 */
export function dateRange(s: string): { low: string; high: string } | undefined {
  const r = dateRangeMs(s);
  return r && { low: iso(r.low), high: iso(r.high) };
}

/** dateRange in epoch milliseconds (what the index stores). */
export function dateRangeMs(s: string): { low: number; high: number } | undefined {
  const m = DATE.exec(s);
  if (!m) return undefined;
  const y = Number(m[1]);
  if (y < 1) return undefined;
  const mo = m[2] ? Number(m[2]) - 1 : 0;
  const d = m[3] ? Number(m[3]) : 1;
  if (mo < 0 || mo > 11 || d < 1 || d > 31) return undefined;
  if (m[4] === undefined) {
    const low = utc(y, mo, d);
    if (low.getUTCDate() !== d) return undefined; // 2021-02-30
    const high = m[3] ? utc(y, mo, d + 1) : m[2] ? utc(y, mo + 1, 1) : utc(y + 1, 0, 1);
    return { low: low.getTime(), high: high.getTime() };
  }
  const h = Number(m[4]);
  const mi = Number(m[5]);
  const sec = m[6] ? Number(m[6]) : 0;
  if (h > 23 || mi > 59 || sec > 60) return undefined;
  const frac = m[7] ?? '';
  const ms = frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0;
  let offsetMin = 0;
  const tz = m[8];
  if (tz && tz !== 'Z') {
    const sign = tz.startsWith('-') ? -1 : 1;
    offsetMin = sign * (Number(tz.slice(1, 3)) * 60 + Number(tz.slice(4, 6)));
  }
  const low = utc(y, mo, d, h, mi - offsetMin, sec, ms).getTime();
  if (Number.isNaN(low)) return undefined;
  const step =
    m[6] === undefined
      ? 60_000
      : frac.length === 0
        ? 1000
        : frac.length === 1
          ? 100
          : frac.length === 2
            ? 10
            : 1;
  return { low, high: low + step };
}

// ---- decimals ----------------------------------------------------------------------------------------------

/** An exact decimal: int / 10^scale. */
interface Dec {
  int: bigint;
  scale: number;
}

const DECIMAL = /^([+-]?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

function parseDec(s: string): Dec | undefined {
  const m = DECIMAL.exec(s.trim());
  if (!m) return undefined;
  const frac = m[3] ?? '';
  const exp = m[4] ? Number(m[4]) : 0;
  if (Math.abs(exp) > 1000) return undefined;
  const int = BigInt(`${m[1]}${m[2]}${frac}`);
  return { int, scale: frac.length - exp };
}

function decString({ int, scale }: Dec): string {
  if (scale <= 0) return (int * 10n ** BigInt(-scale)).toString();
  const neg = int < 0n;
  const digits = (neg ? -int : int).toString().padStart(scale + 1, '0');
  return `${neg ? '-' : ''}${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
}

/**
 * A search number with its implicit precision range (https://hl7.org/fhir/R4/search.html#number):
 * `100` → [99.5, 100.5); and the ±10% range used by `ap`.
 */
export function decimalRange(
  s: string,
): { value: string; low: string; high: string; apLow: string; apHigh: string } | undefined {
  const d = parseDec(s);
  if (!d) return undefined;
  const abs = d.int < 0n ? -d.int : d.int;
  return {
    value: decString(d),
    low: decString({ int: d.int * 10n - 5n, scale: d.scale + 1 }),
    high: decString({ int: d.int * 10n + 5n, scale: d.scale + 1 }),
    apLow: decString({ int: d.int * 10n - abs, scale: d.scale + 1 }),
    apHigh: decString({ int: d.int * 10n + abs, scale: d.scale + 1 }),
  };
}

/** A number's text for a numeric column: as written when known (`raw`: exact, `12345678901234567890.12`). */
function numberText(v: unknown, raw?: string): string | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return raw ?? String(v);
  if (typeof v === 'string' && DECIMAL.test(v)) return v;
  return undefined;
}

// ---- values per parameter type ------------------------------------------------------------------------------

type Obj = Record<string, unknown>;

const str = (v: unknown): string | undefined => (typeof v === 'string' && v.length > 0 ? v : undefined);
const strs = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];

/** The data type of a value whose type the fhirpath engine could not tell (service types). */
function sniff(type: string, v: unknown): string {
  if (type !== 'Object' && type !== '') return type;
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'boolean';
  if (typeof v === 'number') return 'decimal';
  const o = v as Obj;
  if ('reference' in o) return 'Reference';
  if ('coding' in o) return 'CodeableConcept';
  if ('family' in o || 'given' in o) return 'HumanName';
  if ('line' in o || 'city' in o || 'postalCode' in o) return 'Address';
  if ('start' in o || 'end' in o) return 'Period';
  if ('value' in o && typeof o.value === 'number') return 'Quantity';
  if ('system' in o && 'value' in o) return 'Identifier';
  if ('code' in o) return 'Coding';
  return type;
}

function stringValues(type: string, v: unknown, out: string[]): void {
  if (type === 'HumanName') {
    const n = v as Obj;
    const parts = [
      ...strs(n.prefix),
      ...strs(n.given),
      ...(str(n.family) ? [n.family as string] : []),
      ...strs(n.suffix),
    ];
    out.push(...parts);
    if (parts.length > 1) out.push(parts.join(' '));
    if (str(n.text)) out.push(n.text as string);
  } else if (type === 'Address') {
    const a = v as Obj;
    const parts = [
      ...strs(a.line),
      ...[a.city, a.district, a.state, a.postalCode, a.country].filter((x): x is string => !!str(x)),
    ];
    out.push(...parts);
    if (parts.length > 1) out.push(parts.join(' '));
    if (str(a.text)) out.push(a.text as string);
  } else if (typeof v === 'string') {
    out.push(v);
  } else if (typeof v === 'number' || typeof v === 'boolean') {
    out.push(String(v));
  } else if (type === 'CodeableConcept') {
    const cc = v as Obj;
    if (str(cc.text)) out.push(cc.text as string);
    for (const c of Array.isArray(cc.coding) ? (cc.coding as Obj[]) : [])
      if (str(c?.display)) out.push(c.display as string);
  } else if (type === 'Coding') {
    if (str((v as Obj).display)) out.push((v as Obj).display as string);
  }
}

function tokenValues(type: string, v: unknown, out: IndexValue[]): void {
  const tok = (system: unknown, value: unknown, text: unknown): void => {
    const s = str(system) ? indexKey(system as string) : null;
    const c = typeof value === 'string' && value.length > 0 ? indexKey(value) : null;
    const tx = str(text) ? normaliseString(text as string) : null;
    if (s !== null || c !== null || tx !== null) out.push({ t: 'token', system: s, value: c, text: tx });
  };
  if (typeof v === 'boolean' || typeof v === 'number') return tok(null, String(v), null);
  if (typeof v === 'string') return tok(null, v, null);
  const o = v as Obj;
  switch (type) {
    case 'CodeableConcept': {
      const codings = Array.isArray(o.coding) ? (o.coding as Obj[]) : [];
      for (const c of codings) if (c) tok(c.system, c.code, c.display);
      // The text gets its own row unless a coding's display already says the same (`:text` finds that one).
      if (str(o.text) && !codings.some((c) => c?.display === o.text)) tok(null, null, o.text);
      return;
    }
    case 'Coding':
      return tok(o.system, o.code, o.display);
    case 'Identifier':
      tok(o.system, o.value, (o.type as Obj | undefined)?.text);
      return identifierTypes(o, out);
    case 'ContactPoint':
      return tok(o.system, o.value, null);
    case 'Reference':
      // A logical reference's identifier (Composition.relatesTo.target) – searched as a token.
      if (o.identifier) tokenValues('Identifier', o.identifier, out);
      return;
  }
}

/** One `identifier` row per type coding of an identifier with a value (`:of-type`, https://hl7.org/fhir/R4/search.html#token). */
function identifierTypes(o: Obj, out: IndexValue[]): void {
  const value = str(o.value);
  const type = o.type as Obj | undefined;
  if (!value || !type || !Array.isArray(type.coding)) return;
  for (const c of type.coding as Obj[]) {
    if (!c || !str(c.code)) continue;
    out.push({
      t: 'identifier',
      system: str(o.system) ? indexKey(o.system as string) : null,
      value: indexKey(value),
      typeSystem: str(c.system) ? indexKey(c.system as string) : null,
      typeCode: indexKey(c.code as string),
    });
  }
}

/** A Reference's `identifier` as an `identifier` row (reference `:identifier`, https://hl7.org/fhir/R4/search.html#reference). */
function referenceIdentifier(o: Obj, out: IndexValue[]): void {
  const id = o.identifier as Obj | undefined;
  const value = id && typeof id === 'object' ? str(id.value) : undefined;
  if (!value) return;
  const system = str((id as Obj).system);
  out.push({
    t: 'identifier',
    system: system ? indexKey(system) : null,
    value: indexKey(value),
    typeSystem: null,
    typeCode: null,
  });
}

/** Where a URI's path has a hierarchy: after `scheme://authority` (a URN has none). */
function pathStart(uri: string): number | undefined {
  const m = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/.exec(uri);
  return m ? m[0].length : undefined;
}

/**
 * The URIs that `uri:above=<value>` matches: the value and each of its prefixes that ends at a path segment boundary,
 * with and without the `/` (`http://a.org/fhir/x` → itself, `http://a.org/fhir/`, `http://a.org/fhir`, `http://a.org/`,
 * `http://a.org`). https://hl7.org/fhir/R4/search.html#uri
 */
export function uriAncestors(value: string): string[] {
  const out = new Set([value]);
  const start = pathStart(value);
  if (start === undefined) return [...out];
  for (let i = value.length - 1; i >= start; i--) {
    if (value[i] !== '/') continue;
    out.add(value.slice(0, i + 1));
    out.add(value.slice(0, i));
  }
  return [...out];
}

/**
 * What `uri:below=<value>` matches: the value itself (with or without a trailing `/`), and every URI that starts with
 * the value followed by `/` (a path segment boundary: `http://a.org/fhir` is not above `http://a.org/fhirx`).
 */
export function uriBelow(value: string): { equal: string[]; prefix: string } {
  const bare = value.endsWith('/') ? value.slice(0, -1) : value;
  return { equal: bare ? [bare] : [value], prefix: `${bare}/` };
}

function quantityValues(type: string, v: unknown, out: IndexValue[]): void {
  const o = v as Obj;
  if (type === 'Range') {
    if (o.low) quantityValues('Quantity', o.low, out);
    if (o.high) quantityValues('Quantity', o.high, out);
    return;
  }
  const value = numberText(o.value, rawNumberText(o, 'value'));
  if (value === undefined) return;
  if (type === 'Money') {
    out.push({
      t: 'quantity',
      value,
      system: 'urn:iso:std:iso:4217',
      code: str(o.currency) ?? null,
      unit: null,
    });
    return;
  }
  const unit = str(o.unit) ?? null;
  out.push({ t: 'quantity', value, system: str(o.system) ?? null, code: str(o.code) ?? unit, unit });
}

function dateValues(type: string, v: unknown, out: IndexValue[]): void {
  if (typeof v === 'string') {
    const r = dateRangeMs(v);
    if (r) out.push({ t: 'date', low: r.low, high: r.high });
    return;
  }
  const o = v as Obj;
  if (type === 'Period') {
    const start = typeof o.start === 'string' ? dateRangeMs(o.start) : undefined;
    const end = typeof o.end === 'string' ? dateRangeMs(o.end) : undefined;
    if (start || end) out.push({ t: 'date', low: start?.low ?? -Infinity, high: end?.high ?? Infinity });
  } else if (type === 'Timing') {
    for (const e of strs(o.event)) dateValues('dateTime', e, out);
  }
}

/** Index values of the typed values a parameter's expression selected. */
export function toIndexValues(
  paramType: string,
  found: readonly { type: string; value: unknown; raw?: string }[],
): IndexValue[] {
  const out: IndexValue[] = [];
  for (const { type: rawType, value: v, raw } of found) {
    if (v === null || v === undefined) continue;
    const type = sniff(rawType, v);
    switch (paramType) {
      case 'string': {
        const texts: string[] = [];
        stringValues(type, v, texts);
        for (const s of texts)
          if (s.length > 0) out.push({ t: 'string', norm: normaliseString(s), exact: s });
        break;
      }
      case 'token':
        tokenValues(type, v, out);
        break;
      case 'reference': {
        const o = v as Obj;
        let r: IndexValue | undefined;
        if (typeof v === 'string') r = normaliseReference(v);
        else if (typeof o.reference === 'string') r = normaliseReference(o.reference, o.type);
        else if (typeof o.resourceType === 'string' && typeof o.id === 'string') {
          r = normaliseReference(`${o.resourceType}/${o.id}`);
        }
        if (r) out.push(r);
        if (typeof v === 'object') referenceIdentifier(o, out);
        break;
      }
      case 'date':
        dateValues(type, v, out);
        break;
      case 'number': {
        const n =
          typeof v === 'object'
            ? numberText((v as Obj).value, rawNumberText(v as Obj, 'value'))
            : numberText(v, raw);
        if (n !== undefined) out.push({ t: 'number', value: n });
        break;
      }
      case 'quantity':
        if (typeof v === 'object') quantityValues(type, v, out);
        break;
      case 'uri':
        if (typeof v === 'string' && v.length > 0) out.push({ t: 'uri', value: indexKey(v) });
        break;
    }
  }
  return dedupe(out);
}

function dedupe(values: IndexValue[]): IndexValue[] {
  if (values.length < 2) return values;
  const seen = new Set<string>();
  return values.filter((v) => {
    const k = Object.values(v).join('\u0001');
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}
