// Where a FHIRPath result sits in a resource's JSON (holder object, property, list index) and which element definition
// governs it, for FHIRPath Patch (https://hl7.org/fhir/R4/fhirpatch.html). Built on the ResourceNode chain that HL7's
// fhirpath engine returns with `resolveInternalTypes: false` (parentResNode, propName, index); the chain is walked
// again from the resource's root, so only elements of this very resource are ever changed.
import { structureNode, type JsonChild, type StructureNode } from '../definitions/index.js';
import { FhirError } from '../outcome.js';

/** The parts of fhirpath's ResourceNode this module reads. */
export interface FpNode {
  data?: unknown;
  parentResNode?: FpNode | null;
  propName?: string | null;
  index?: number | null;
}

export type JsonObject = Record<string, unknown>;

/** An element: `holder[key]`, or `holder[key][index]` in a list. */
export interface Slot {
  holder: JsonObject;
  key: string;
  index: number | null;
  /** The structure that defines `key` (undefined when unknown, e.g. inside an `Any`). */
  struct: StructureNode | undefined;
  /** How `key` is defined in `struct`. */
  child: JsonChild | undefined;
}

/** What holds an element's children: an object (with its structure), or a primitive (its `_key` companion does). */
export type Position =
  { kind: 'object'; obj: JsonObject; struct: StructureNode | undefined } | { kind: 'primitive'; slot: Slot };

export interface Located {
  /** null: the resource itself. */
  slot: Slot | null;
  at: Position;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

export const isResNode = (v: unknown): v is FpNode =>
  typeof v === 'object' && v !== null && 'parentResNode' in v && 'data' in v;

const notElement = (path: string): FhirError =>
  new FhirError(
    'processing',
    `FHIRPath Patch: ${path} does not select an element of the resource`,
    'fhirpatch.not-element',
    { status: 422 },
  );

export const capitalize = (s: string): string => s.charAt(0).toUpperCase() + s.slice(1);

/** The JSON property of element `name` in `obj`: itself, or the choice variant present (`value` → `valueQuantity`). */
function actualKey(obj: JsonObject, struct: StructureNode | undefined, name: string): string | undefined {
  if (Object.hasOwn(obj, name)) return name;
  const el = struct?.elements.get(name);
  if (el?.isChoice) return el.types.map((t) => name + capitalize(t)).find((k) => Object.hasOwn(obj, k));
  if (!struct) return Object.keys(obj).find((k) => k.startsWith(name) && /^[A-Z]/.test(k.slice(name.length)));
  return undefined;
}

/** The structure of an object found under `child` (a datatype, a backbone element, or a nested resource). */
export function structureOf(child: JsonChild | undefined, value: JsonObject): StructureNode | undefined {
  if (!child) return undefined;
  if (child.kind === 'resource' && typeof value.resourceType === 'string')
    return structureNode(value.resourceType);
  return child.node;
}

/**
 * The companion object of a primitive (`_birthDate`, or `_given[i]`), where its `id` and `extension` live; created
 * (lists padded with null to the values' length) when `create` is set.
 */
export function companion(slot: Slot, create: boolean): JsonObject | undefined {
  const ck = `_${slot.key}`;
  const { holder } = slot;
  if (slot.index === null) {
    if (!isObject(holder[ck])) {
      if (!create) return undefined;
      holder[ck] = {};
    }
    return holder[ck] as JsonObject;
  }
  let list = holder[ck];
  if (!Array.isArray(list)) {
    if (!create) return undefined;
    list = holder[ck] = [];
  }
  const arr = list as unknown[];
  const values = holder[slot.key];
  const length = Array.isArray(values) ? values.length : 0;
  while (arr.length < length) arr.push(null);
  if (!isObject(arr[slot.index])) {
    if (!create) return undefined;
    arr[slot.index] = {};
  }
  return arr[slot.index] as JsonObject;
}

/** The object that holds children at `at` (for a primitive, its companion), with its structure. */
export function container(
  at: Position,
  create: boolean,
): { obj: JsonObject; struct: StructureNode | undefined } | undefined {
  if (at.kind === 'object') return { obj: at.obj, struct: at.struct };
  const obj = companion(at.slot, create);
  return obj ? { obj, struct: structureNode('Element') } : undefined;
}

/** The value at a slot. */
export function slotValue(slot: Slot): unknown {
  const v = slot.holder[slot.key];
  return slot.index === null ? v : Array.isArray(v) ? v[slot.index] : undefined;
}

/** Finds the element a fhirpath result node stands for, walking its chain again from the root `resource`. */
export function locate(resource: JsonObject, node: unknown, path: string): Located {
  if (!isResNode(node)) throw notElement(path);
  const chain: FpNode[] = [];
  for (let n: FpNode | null | undefined = node; n; n = n.parentResNode) {
    chain.push(n);
    if (chain.length > 1000) throw notElement(path);
  }
  const root = chain.pop() as FpNode;
  if (root.data !== resource) throw notElement(path);
  let at: Position = {
    kind: 'object',
    obj: resource,
    struct: structureNode(String(resource.resourceType)),
  };
  let slot: Slot | null = null;
  for (const n of chain.reverse()) {
    const here = container(at, false);
    if (!here || typeof n.propName !== 'string') throw notElement(path);
    const key = actualKey(here.obj, here.struct, n.propName);
    if (key === undefined) throw notElement(path);
    const index = typeof n.index === 'number' ? n.index : null;
    const raw = here.obj[key];
    if ((index === null) === Array.isArray(raw)) throw notElement(path);
    slot = { holder: here.obj, key, index, struct: here.struct, child: here.struct?.json.get(key) };
    const value = slotValue(slot);
    if (value === undefined) throw notElement(path);
    if (isObject(value)) {
      // The engine's node must be this very object: nothing outside the resource is ever changed.
      if (n.data !== value) throw notElement(path);
      at = { kind: 'object', obj: value, struct: structureOf(slot.child, value) };
    } else {
      at = { kind: 'primitive', slot };
    }
  }
  return { slot, at };
}
