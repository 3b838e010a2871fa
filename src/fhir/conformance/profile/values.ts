// How instance values are read for profile validation: the items an element names in a JSON object (arrays, choice
// types, primitives' `_name` extensions), and fixed (equal) and pattern (contained) comparisons.
// https://hl7.org/fhir/R4/json.html and https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.pattern_x_
export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One value of an element in an instance. */
export interface Item {
  /** The value (a primitive, or an object; undefined when only `_name` is there). */
  value: unknown;
  /** The primitive's `_name` part (id, extensions). */
  extra?: Json;
  /** The JSON key it was found under (`valueQuantity`, `given`). */
  key: string;
  /** The FHIR type for a choice (`Quantity`); undefined otherwise. */
  type?: string;
  /** The FHIRPath-like expression of the item, with its index. */
  path: string;
}

/** The type a choice key names (`valueQuantity` of `value[x]` → `Quantity`, `valueString` → `string`). */
export function choiceType(prefix: string, key: string): string | undefined {
  if (key.length <= prefix.length || !key.startsWith(prefix)) return undefined;
  const rest = key.slice(prefix.length);
  const first = rest.charAt(0);
  if (first < 'A' || first > 'Z') return undefined;
  // Primitive types are lower case in FHIR (`valueString` → string); complex types keep their name.
  const lower = first.toLowerCase() + rest.slice(1);
  return PRIMITIVES.has(lower) ? lower : rest;
}

const PRIMITIVES = new Set([
  'base64Binary',
  'boolean',
  'canonical',
  'code',
  'date',
  'dateTime',
  'decimal',
  'id',
  'instant',
  'integer',
  'markdown',
  'oid',
  'positiveInt',
  'string',
  'time',
  'unsignedInt',
  'uri',
  'url',
  'uuid',
  'xhtml',
]);

function push(out: Item[], key: string, path: string, value: unknown, extra: unknown, type?: string): void {
  const n = Math.max(Array.isArray(value) ? value.length : 0, Array.isArray(extra) ? extra.length : 0);
  const many = Array.isArray(value) || Array.isArray(extra);
  if (!many) {
    if (value === undefined && extra === undefined) return;
    out.push({
      value,
      key,
      path: `${path}.${key}`,
      ...(isObject(extra) ? { extra } : {}),
      ...(type ? { type } : {}),
    });
    return;
  }
  for (let i = 0; i < n; i++) {
    const v = Array.isArray(value) ? (value[i] as unknown) : undefined;
    const x = Array.isArray(extra) ? (extra[i] as unknown) : undefined;
    if ((v === undefined || v === null) && !isObject(x)) continue;
    out.push({
      value: v ?? undefined,
      key,
      path: `${path}.${key}[${i}]`,
      ...(isObject(x) ? { extra: x } : {}),
      ...(type ? { type } : {}),
    });
  }
}

/** The items of element `name` (`given`, `value[x]`) in `obj`, found at `path`. */
export function itemsOf(obj: Json, name: string, path: string): Item[] {
  const out: Item[] = [];
  if (!name.endsWith('[x]')) {
    push(out, name, path, obj[name], obj[`_${name}`]);
    return out;
  }
  const prefix = name.slice(0, -3);
  for (const key of Object.keys(obj)) {
    if (key.startsWith('_')) continue;
    const type = choiceType(prefix, key);
    if (type) push(out, key, path, obj[key], obj[`_${key}`], type);
  }
  for (const key of Object.keys(obj)) {
    if (!key.startsWith('_') || obj[key.slice(1)] !== undefined) continue;
    const type = choiceType(prefix, key.slice(1));
    if (type) push(out, key.slice(1), path, undefined, obj[key], type);
  }
  return out;
}

/** Exact equality of JSON values (a fixed[x] value, https://hl7.org/fhir/R4/elementdefinition.html#fixed). */
export function equalJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || typeof a !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((x, i) => equalJson(x, bb[i]));
  }
  const ka = Object.keys(a).filter((k) => (a as Json)[k] !== undefined);
  const kb = Object.keys(b as Json).filter((k) => (b as Json)[k] !== undefined);
  return ka.length === kb.length && ka.every((k) => equalJson((a as Json)[k], (b as Json)[k]));
}

/**
 * Whether `value` contains `pattern` (https://hl7.org/fhir/R4/elementdefinition-definitions.html#ElementDefinition.pattern_x_):
 * primitives are equal, every property of an object pattern is contained, and every item of an array pattern is
 * contained by some item of the value.
 */
export function containsPattern(value: unknown, pattern: unknown): boolean {
  if (Array.isArray(pattern)) {
    const list = Array.isArray(value) ? value : value === undefined ? [] : [value];
    return pattern.every((p) => list.some((v) => containsPattern(v, p)));
  }
  if (isObject(pattern)) {
    if (!isObject(value)) return false;
    return Object.keys(pattern).every((k) => containsPattern(value[k], pattern[k]));
  }
  return value === pattern;
}

/** The FHIR type of an item: its choice type, a resource's type, or the element's single declared type. */
export function typeOfItem(item: Item, declared: readonly { code: string }[]): string | undefined {
  if (item.type) return item.type;
  if (isObject(item.value) && typeof item.value.resourceType === 'string') return item.value.resourceType;
  if (declared.length === 1) return declared[0]?.code;
  // A snapshot element always has its type; without one, the shape tells the coded types bindings apply to.
  if (declared.length > 0) return undefined;
  if (typeof item.value === 'string') return 'code';
  if (isObject(item.value)) {
    if (Array.isArray(item.value.coding) || typeof item.value.text === 'string') return 'CodeableConcept';
    if (typeof item.value.code === 'string') return 'Coding';
  }
  return undefined;
}
