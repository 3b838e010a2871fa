// One search value against one index value, in memory, as src/fhir/search/sql.ts compares them in SQL (valueCondition,
// rangeCondition, pointCondition, numberCondition), so that a match answers what a search would. https://hl7.org/fhir/R4/search.html
import { normaliseString, uriAncestors, uriBelow, type IndexValue } from '../search/normalise.js';
import type { FilterValue, Modifier, Prefix } from '../search/request.js';

/** Whether one index value (a row of the sp_* tables) meets a search value. */
export type ValueTest = (v: IndexValue) => boolean;

// ---- instants ------------------------------------------------------------------------------------------------

/** A search range bound (ISO text, or PostgreSQL's `infinity`/`-infinity`) in epoch milliseconds. */
export function instantMs(iso: string): number {
  if (iso === 'infinity') return Infinity;
  if (iso === '-infinity') return -Infinity;
  return Date.parse(iso);
}

/** rangeCondition of sql.ts: an index range [low, high) against a search range [vl, vh). */
function inRange(prefix: Prefix, low: number, high: number, vl: number, vh: number): boolean {
  switch (prefix) {
    case 'eq':
      return low >= vl && high <= vh;
    case 'ne':
      return low < vl || high > vh;
    case 'gt':
      return high > vh;
    case 'lt':
      return low < vl;
    case 'ge':
      return high > vh || (low >= vl && high <= vh);
    case 'le':
      return low < vl || (low >= vl && high <= vh);
    case 'sa':
      return low >= vh;
    case 'eb':
      return high <= vl;
    case 'ap':
      return low < vh && high > vl;
  }
}

/** pointCondition of sql.ts: one instant t (the `_lastUpdated` column) against a search range [vl, vh). */
export function atPoint(prefix: Prefix, t: number, vl: number, vh: number): boolean {
  switch (prefix) {
    case 'eq':
    case 'ap':
      return t >= vl && t < vh;
    case 'ne':
      return t < vl || t >= vh;
    case 'gt':
    case 'sa':
      return t >= vh;
    case 'lt':
    case 'eb':
      return t < vl;
    case 'ge':
      return t >= vl;
    case 'le':
      return t < vh;
  }
}

// ---- decimals (PostgreSQL numeric: exact) ---------------------------------------------------------------------

interface Dec {
  int: bigint;
  scale: number;
}

/** The decimal forms the index writes (normalise.ts numberText) and the parser's decimalRange produces. */
const DECIMAL = /^([+-]?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;

function dec(s: string): Dec | undefined {
  const m = DECIMAL.exec(s.trim());
  if (!m) return undefined;
  const frac = m[3] ?? '';
  const exp = m[4] ? Number(m[4]) : 0;
  if (Math.abs(exp) > 1000) return undefined;
  return { int: BigInt(`${m[1]}${m[2]}${frac}`), scale: frac.length - exp };
}

function cmp(a: Dec, b: Dec): number {
  let x = a.int;
  let y = b.int;
  if (a.scale > b.scale) y *= 10n ** BigInt(a.scale - b.scale);
  else if (b.scale > a.scale) x *= 10n ** BigInt(b.scale - a.scale);
  return x < y ? -1 : x > y ? 1 : 0;
}

type NumberValue = Extract<FilterValue, { kind: 'number' }>;

/** numberCondition of sql.ts, with the search value's bounds parsed once. */
function numberTest(v: NumberValue): (x: Dec) => boolean {
  const d = (s: string): Dec => dec(s) as Dec; // the parser's decimalRange wrote them
  const [value, low, high, apLow, apHigh] = [d(v.value), d(v.low), d(v.high), d(v.apLow), d(v.apHigh)];
  switch (v.prefix) {
    case 'eq':
      return (x) => cmp(x, low) >= 0 && cmp(x, high) < 0;
    case 'ne':
      return (x) => cmp(x, low) < 0 || cmp(x, high) >= 0;
    case 'gt':
    case 'sa':
      return (x) => cmp(x, value) > 0;
    case 'lt':
    case 'eb':
      return (x) => cmp(x, value) < 0;
    case 'ge':
      return (x) => cmp(x, value) >= 0;
    case 'le':
      return (x) => cmp(x, value) <= 0;
    case 'ap':
      return (x) => cmp(x, apLow) >= 0 && cmp(x, apHigh) <= 0;
  }
}

function quantityTest(v: NumberValue): ValueTest {
  const test = numberTest(v);
  const { system, unit } = v;
  return (iv) => {
    if (iv.t !== 'number' && iv.t !== 'quantity') return false;
    if (system !== undefined && (iv.t !== 'quantity' || iv.system !== system)) return false;
    if (unit !== undefined) {
      if (iv.t !== 'quantity') return false;
      // With a system the unit is a code; without one, a code or a human unit (sql.ts).
      if (iv.code !== unit && (system !== undefined || iv.unit !== unit)) return false;
    }
    const x = dec(iv.value);
    return x !== undefined && test(x);
  };
}

// ---- per kind --------------------------------------------------------------------------------------------------

function stringTest(value: string, modifier: Modifier | undefined): ValueTest {
  const norm = normaliseString(value);
  if (modifier === 'exact') return (iv) => iv.t === 'string' && iv.norm === norm && iv.exact === value;
  if (modifier === 'contains') return (iv) => iv.t === 'string' && iv.norm.includes(norm);
  return (iv) => iv.t === 'string' && iv.norm.startsWith(norm);
}

function tokenTest(v: Extract<FilterValue, { kind: 'token' }>): ValueTest {
  // system '' = no system (`|code`, IS NULL), undefined = any; code undefined = any (`system|`).
  const system = v.system === '' ? null : v.system;
  const { code } = v;
  return (iv) =>
    iv.t === 'token' &&
    (system === undefined || iv.system === system) &&
    (code === undefined || iv.value === code);
}

function uriTest(value: string, modifier: Modifier | undefined): ValueTest {
  if (modifier === 'below') {
    const { equal, prefix } = uriBelow(value);
    return (iv) => iv.t === 'uri' && (equal.includes(iv.value) || iv.value.startsWith(prefix));
  }
  if (modifier === 'above') {
    const ancestors = new Set(uriAncestors(value));
    return (iv) => iv.t === 'uri' && ancestors.has(iv.value);
  }
  return (iv) => iv.t === 'uri' && iv.value === value;
}

/**
 * The test of one (non-composite) search value of a filter with `modifier`, built once: what valueCondition of sql.ts
 * asks of one index row.
 */
export function valueTest(v: FilterValue, modifier: Modifier | undefined): ValueTest {
  switch (v.kind) {
    case 'string':
      return stringTest(v.value, modifier);
    case 'token':
      return tokenTest(v);
    case 'text': {
      const prefix = normaliseString(v.value);
      return (iv) => iv.t === 'token' && iv.text !== null && iv.text.startsWith(prefix);
    }
    case 'reference': {
      const refs = new Set(v.refs);
      return (iv) => iv.t === 'reference' && refs.has(iv.ref);
    }
    case 'reference-id':
      return (iv) => iv.t === 'reference' && iv.targetId === v.id;
    case 'date': {
      const vl = instantMs(v.low);
      const vh = instantMs(v.high);
      return (iv) => iv.t === 'date' && inRange(v.prefix, iv.low, iv.high, vl, vh);
    }
    case 'number':
      return quantityTest(v);
    case 'uri':
      return uriTest(v.value, modifier);
    case 'composite':
      return () => false; // matched part by part (match-search.ts), as sql.ts's compositeCondition
    case 'value-set':
    case 'hierarchy':
    case 'codes':
    case 'of-type':
    case 'identifier':
    case 'fulltext':
      return () => false; // refused when criteria are compiled (match-search.ts)
  }
}
