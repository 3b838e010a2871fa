// Decimals keep the text they were written with (https://hl7.org/fhir/R4/datatypes.html#decimal: "the precision of
// the decimal value has significance"; "1.50" is not "1.5"). In memory every number stays a JS number, so
// validation, FHIRPath and indexing are unchanged; the text of a number whose JS form differs from it (`1.50`,
// `1.0e2`, `12345678901234567890.12`) is kept on the object or array that holds it, under a non-enumerable symbol
// that copies by spread and JSON.stringify ignore. json/stringify.ts writes that text back while the value is still
// the number it denotes, so a changed value is written as the new number.

/** holder[RAW_NUMBERS]: property name (or array index as text) → the number's text as sent. */
export const RAW_NUMBERS: unique symbol = Symbol('cinder.rawNumbers');

type RawMap = Record<string, string>;
type Holder = object & { [RAW_NUMBERS]?: RawMap };

function mapOf(holder: object): RawMap | undefined {
  return (holder as Holder)[RAW_NUMBERS];
}

/** Records `text` as the written form of holder[key] (a number equal to Number(text)). */
export function setRawNumber(holder: object, key: string | number, text: string): void {
  let map = mapOf(holder);
  if (!map) {
    map = Object.create(null) as RawMap;
    Object.defineProperty(holder, RAW_NUMBERS, {
      value: map,
      enumerable: false,
      writable: true,
      configurable: true,
    });
  }
  map[String(key)] = text;
}

export function deleteRawNumber(holder: object, key: string | number): void {
  const map = mapOf(holder);
  if (map) delete map[String(key)];
}

/** The text holder[key] was written with, while holder[key] is still the number that text denotes. */
export function rawNumberText(holder: object, key: string | number): string | undefined {
  const map = mapOf(holder);
  if (!map) return undefined;
  const text = map[String(key)];
  if (text === undefined) return undefined;
  const v = (holder as Record<string, unknown>)[key as string];
  return typeof v === 'number' && Object.is(v, Number(text)) ? text : undefined;
}

/** The text of holder[key] when it is a number: as written when known, else its JS form. */
export function numberText(holder: object, key: string | number): string | undefined {
  const v = (holder as Record<string, unknown>)[key as string];
  if (typeof v !== 'number' || !Number.isFinite(v)) return undefined;
  return rawNumberText(holder, key) ?? String(v);
}

export function hasOwnRawNumbers(holder: object): boolean {
  const map = mapOf(holder);
  if (!map) return false;
  for (const _ in map) return true;
  return false;
}

/** Gives `to` the recorded texts of `from` (for shallow copies such as `{ ...resource, meta }`). */
export function copyRawNumbers(from: object, to: object): void {
  const map = mapOf(from);
  if (!map) return;
  for (const [k, text] of Object.entries(map)) setRawNumber(to, k, text);
}

/** Whether any object or array inside `value` holds a recorded number text. */
export function hasRawNumbers(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (hasOwnRawNumbers(value)) return true;
  if (Array.isArray(value)) {
    for (const item of value)
      if (item !== null && typeof item === 'object' && hasRawNumbers(item)) return true;
    return false;
  }
  for (const k in value) {
    const item = (value as Record<string, unknown>)[k];
    if (item !== null && typeof item === 'object' && hasRawNumbers(item)) return true;
  }
  return false;
}
