// The `value` of a FHIRPath Patch operation (https://hl7.org/fhir/R4/fhirpatch.html): a `value[x]` of a datatype, a
// `resource`, or, for anonymous (backbone) types, nested `part`s named after the element's children; turned into the
// JSON the element holds, checked against its definition.
import { typeKind, type ElementInfo, type JsonChild, type StructureNode } from '../definitions/index.js';
import { rawNumberText, setRawNumber } from '../json/raw-numbers.js';
import { FhirError } from '../outcome.js';
import { capitalize, type JsonObject } from './locate.js';

/** A value as sent: typed (`valueDate`, `resource`), or parts for an anonymous type. */
export type PatchValue =
  | { kind: 'typed'; type: string; json: unknown; ext?: JsonObject; text?: string }
  | { kind: 'parts'; parts: JsonObject[] };

/** JSON for one element: the value, its primitive companion (`_x`), and a number's written text. */
export interface Materialized {
  json: unknown;
  ext?: JsonObject;
  text?: string;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

export const patchError = (message: string, code: string, status = 400): FhirError =>
  new FhirError(status === 422 ? 'processing' : 'invalid', `FHIRPath Patch: ${message}`, code, { status });

/** The value a Parameters part carries (`value[x]`, `resource` or nested `part`s), or undefined when none. */
export function readValue(part: JsonObject, what: string): PatchValue | undefined {
  const keys = Object.keys(part).filter((k) => /^value[A-Z]/.test(k));
  if (keys.length > 1) throw patchError(`${what} has more than one value[x]`, 'fhirpatch.value-shape');
  const key = keys[0];
  if (key !== undefined) {
    const ext = part[`_${key}`];
    const text = typeof part[key] === 'number' ? rawNumberText(part, key) : undefined;
    return {
      kind: 'typed',
      type: decap(key.slice(5)),
      json: part[key],
      ...(isObject(ext) ? { ext } : {}),
      ...(text !== undefined ? { text } : {}),
    };
  }
  if (isObject(part.resource) && typeof part.resource.resourceType === 'string') {
    return { kind: 'typed', type: part.resource.resourceType, json: part.resource };
  }
  if (part.part !== undefined) {
    if (!Array.isArray(part.part) || !part.part.every(isObject))
      throw patchError(`${what}: part must be a list of objects`, 'fhirpatch.value-parts');
    return { kind: 'parts', parts: part.part };
  }
  return undefined;
}

/** `valueDate` → `date`, `valueCodeableConcept` → `CodeableConcept` (datatypes keep their capital). */
function decap(suffix: string): string {
  const lower = suffix.charAt(0).toLowerCase() + suffix.slice(1);
  return typeKind(lower) === 'primitive' ? lower : suffix;
}

const QUANTITIES = new Set([
  'Quantity',
  'Age',
  'Count',
  'Distance',
  'Duration',
  'SimpleQuantity',
  'MoneyQuantity',
]);

/** Whether a value of `type` may stand in an element of `types` (primitives are checked by validation later). */
function fits(type: string, types: readonly string[]): boolean {
  if (types.length === 0 || types.includes(type)) return true;
  const kind = typeKind(type);
  if (kind === 'primitive') return types.some((t) => typeKind(t) === 'primitive');
  if (kind === 'resource') return types.includes('Resource');
  return QUANTITIES.has(type) && types.some((t) => QUANTITIES.has(t));
}

/** The JSON property for `element` when it gets a value of `value`'s type (choice elements add the type). */
export function keyFor(element: ElementInfo, value: PatchValue, where: string): string {
  if (!element.isChoice) return element.name;
  if (value.kind !== 'typed' || !element.types.includes(value.type)) {
    throw patchError(
      `${where}: ${element.name}[x] takes one of ${element.types.join(', ')}, not ${value.kind === 'typed' ? value.type : 'parts'}`,
      'fhirpatch.choice-type',
      422,
    );
  }
  return element.name + capitalize(value.type);
}

/** The element named `name` in `struct` (by element name or JSON property name). */
export function elementNamed(struct: StructureNode | undefined, name: string, where: string): ElementInfo {
  const el = struct?.elements.get(name) ?? struct?.json.get(name)?.element;
  if (!el)
    throw patchError(`${where}: no element ${name.slice(0, 100)} here`, 'fhirpatch.unknown-element', 422);
  return el;
}

/** Turns a value into the JSON of an element defined by `child` (undefined: unknown, taken as it is). */
export function materialize(value: PatchValue, child: JsonChild | undefined, where: string): Materialized {
  if (value.kind === 'typed') {
    if (child && child.kind !== 'any' && !fits(value.type, child.element.types)) {
      throw patchError(
        `${where}: a ${value.type} does not fit ${child.element.path} (${child.element.types.join(', ')})`,
        'fhirpatch.type',
        422,
      );
    }
    return {
      json: value.json,
      ...(value.ext ? { ext: value.ext } : {}),
      ...(value.text !== undefined ? { text: value.text } : {}),
    };
  }
  const node = child?.node;
  if (!node) {
    throw patchError(`${where}: parts are only for elements with children`, 'fhirpatch.parts-target', 422);
  }
  return { json: fromParts(value.parts, node, where) };
}

/** An object of structure `node` from parts named after its elements. */
function fromParts(parts: JsonObject[], node: StructureNode, where: string): JsonObject {
  const obj: JsonObject = {};
  for (const part of parts) {
    const name = typeof part.name === 'string' ? part.name : '';
    const at = `${where}.${name.slice(0, 100)}`;
    const element = elementNamed(node, name, where);
    const value = readValue(part, at);
    if (!value) throw patchError(`${at} has no value`, 'fhirpatch.part-value');
    const key = keyFor(element, value, at);
    put(obj, key, element.max > 1, materialize(value, node.json.get(key), at), at);
  }
  return obj;
}

/** Sets (or, for a list, appends) a materialized value as `obj[key]`; a single element already there is refused. */
export function put(obj: JsonObject, key: string, list: boolean, m: Materialized, where: string): void {
  if (!list) {
    if (obj[key] !== undefined || obj[`_${key}`] !== undefined)
      throw patchError(`${where}: ${key} is already present`, 'fhirpatch.exists', 422);
    obj[key] = m.json;
    if (m.ext) obj[`_${key}`] = m.ext;
    if (m.text !== undefined) setRawNumber(obj, key, m.text);
    return;
  }
  const values = Array.isArray(obj[key]) ? (obj[key] as unknown[]) : (obj[key] = []);
  values.push(m.json);
  const exts = obj[`_${key}`];
  if (m.ext || Array.isArray(exts)) {
    const companions = Array.isArray(exts) ? exts : (obj[`_${key}`] = []);
    while (companions.length < values.length - 1) companions.push(null);
    companions[values.length - 1] = m.ext ?? null;
  }
  if (m.text !== undefined) setRawNumber(values, values.length - 1, m.text);
}
