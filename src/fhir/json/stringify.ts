// Value → JSON text, writing numbers with the text they were received with (raw-numbers.ts) while their value is
// unchanged. A value with no recorded text (nearly every resource) is written by JSON.stringify itself.
import { hasRawNumbers, rawNumberText } from './raw-numbers.js';

/** Texts of objects serialised by stringifyOnce, reused by later stringifyJson calls on the same object. */
const texts = new WeakMap<object, string>();

/**
 * stringifyJson of an object that will not change any more (a version just written), remembered so that serialising
 * the same object again (its answer) costs a lookup. Callers must not mutate the object afterwards.
 */
export function stringifyOnce(value: object): string {
  const text = stringifyJson(value);
  texts.set(value, text);
  return text;
}

/** JSON.stringify (no replacer, no indentation) that keeps recorded number texts. */
export function stringifyJson(value: unknown): string {
  if (typeof value === 'object' && value !== null) {
    const known = texts.get(value);
    if (known !== undefined) return known;
  }
  if (!hasRawNumbers(value)) return JSON.stringify(value);
  return write({ '': value }, '', value) as string;
}

/** JSON.stringify's SerializeJSONProperty for holder[key] = value; undefined when the property is left out. */
function write(holder: object, key: string, input: unknown): string | undefined {
  let value = input;
  if (
    value !== null &&
    typeof value === 'object' &&
    typeof (value as { toJSON?: unknown }).toJSON === 'function'
  )
    value = (value as { toJSON(k: string): unknown }).toJSON(key);
  if (value instanceof Number || value instanceof String || value instanceof Boolean) value = value.valueOf();
  if (typeof value === 'number')
    return (value === input && rawNumberText(holder, key)) || JSON.stringify(value);
  if (value === null || typeof value !== 'object') return JSON.stringify(value) as string | undefined;
  if (Array.isArray(value)) {
    const items = value.map((item: unknown, i) => write(value, String(i), item) ?? 'null');
    return `[${items.join(',')}]`;
  }
  const props: string[] = [];
  for (const k of Object.keys(value)) {
    const text = write(value, k, (value as Record<string, unknown>)[k]);
    if (text !== undefined) props.push(`${JSON.stringify(k)}:${text}`);
  }
  return `{${props.join(',')}}`;
}
