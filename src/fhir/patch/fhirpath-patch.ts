// FHIRPath Patch (https://hl7.org/fhir/R4/fhirpatch.html): applies the `add`, `insert`, `delete`, `replace` and `move`
// operations of a Parameters resource, in order, to a resource. Pure; the server runs it in the FHIRPath worker
// (csv/fhirpath-worker.ts), whose deadline bounds what a costly path can take.
import fhirpath from 'fhirpath';
import r4 from 'fhirpath/fhir-context/r4';
import { FhirError } from '../outcome.js';
import { FHIRPATH_OPTIONS } from '../search/fhirpath-options.js';
import { container, locate, type JsonObject, type Located, type Slot } from './locate.js';
import { elementNamed, keyFor, materialize, patchError, put, type PatchValue } from './values.js';
import { readOperations, type Operation, type OpType } from './operations.js';
import { setRawNumber } from '../json/raw-numbers.js';

export { MAX_OPERATIONS, MAX_PATH_LENGTH } from './operations.js';

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A PATCH body that is a FHIRPath Patch (a Parameters resource) rather than a JSON Patch (an array). */
export const isFhirpathPatch = (body: unknown): boolean =>
  isObject(body) && body.resourceType === 'Parameters';

/** Applies `parameters` to `resource` (changed in place and returned); throws a FhirError (400, 413, 422). */
export function applyFhirpathPatch(resource: JsonObject, parameters: unknown): JsonObject {
  for (const op of readOperations(parameters)) applyOperation(resource, op);
  prune(resource);
  return resource;
}

/**
 * fhirpath.js reads `div` and `mod` after a dot as the operators, so `Patient.text.div` (the Narrative's element, as
 * HL7's test cases write it) would not parse; there they can only be member names, and are quoted as identifiers
 * (`` Patient.text.`div` ``). String literals and quoted identifiers are left as they are.
 */
export function quoteOperatorNames(path: string): string {
  let out = '';
  for (let i = 0; i < path.length;) {
    const ch = path[i] as string;
    if (ch === "'" || ch === '`') {
      let j = i + 1;
      while (j < path.length && path[j] !== ch) j += path[j] === '\\' ? 2 : 1;
      out += path.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    const m = /^\.(div|mod)(?![A-Za-z0-9_])/.exec(path.slice(i, i + 5));
    if (m) {
      out += `.\`${m[1] as string}\``;
      i += m[0].length;
      continue;
    }
    out += ch;
    i += 1;
  }
  return out;
}

/** The results of the operation's path on the resource as it is now. */
function select(resource: JsonObject, op: Operation): unknown[] {
  try {
    const env = { resource, rootResource: resource };
    const path = quoteOperatorNames(op.path);
    return fhirpath.evaluate(resource, path, env, r4, FHIRPATH_OPTIONS as never) as unknown[];
  } catch (err) {
    const why = String((err as Error)?.message ?? err).split('\n')[0] ?? '';
    throw patchError(
      `${op.where}: the path ${op.path.slice(0, 200)} is not a FHIRPath expression that can be evaluated: ${why.slice(0, 200)}`,
      'fhirpatch.path-invalid',
    );
  }
}

const VERBS: Record<OpType, string> = {
  add: 'adding',
  insert: 'inserting',
  delete: 'deleting',
  replace: 'replacing',
  move: 'moving',
};
const noMatch = (op: Operation): FhirError =>
  patchError(
    `No content found at ${op.path.slice(0, 200)} when ${VERBS[op.type]}`,
    'fhirpatch.no-match',
    422,
  );

/** The one element the path selects (none is an error unless `optional`). */
function single(resource: JsonObject, op: Operation, optional = false): Located | undefined {
  const nodes = select(resource, op);
  if (nodes.length === 0) {
    if (optional) return undefined;
    throw noMatch(op);
  }
  if (nodes.length > 1)
    throw patchError(
      `${op.path.slice(0, 200)} selects ${nodes.length} elements; ${op.type} needs exactly one`,
      'fhirpatch.several',
      422,
    );
  return locate(resource, nodes[0], op.path);
}

/** The list the path selects items of (`Patient.identifier`): all results must be items of one list. */
function list(resource: JsonObject, op: Operation): { slot: Slot; items: unknown[] } {
  const nodes = select(resource, op);
  if (nodes.length === 0) throw noMatch(op);
  let first: Slot | undefined;
  for (const node of nodes) {
    const slot = locate(resource, node, op.path).slot;
    if (!slot || slot.index === null || (first && (slot.holder !== first.holder || slot.key !== first.key)))
      throw patchError(
        `${op.path.slice(0, 200)} does not select the items of one list`,
        'fhirpatch.not-list',
        422,
      );
    first ??= slot;
  }
  const slot = first as Slot;
  return { slot, items: slot.holder[slot.key] as unknown[] };
}

function applyOperation(resource: JsonObject, op: Operation): void {
  switch (op.type) {
    case 'add':
      return add(resource, op);
    case 'insert':
      return insert(resource, op);
    case 'delete':
      return remove(resource, op);
    case 'replace':
      return replace(resource, op);
    case 'move':
      return move(resource, op);
  }
}

function add(resource: JsonObject, op: Operation): void {
  const at = (single(resource, op) as Located).at;
  const c = container(at, true) as NonNullable<ReturnType<typeof container>>;
  const element = elementNamed(c.struct, op.name as string, op.where);
  const value = op.value as PatchValue;
  const key = keyFor(element, value, op.where);
  if (element.isChoice) {
    const taken = element.types.map((t) => element.name + t.charAt(0).toUpperCase() + t.slice(1));
    if (taken.some((k) => c.obj[k] !== undefined))
      throw patchError(`${op.where}: ${element.name}[x] is already present`, 'fhirpatch.exists', 422);
  }
  put(c.obj, key, element.max > 1, materialize(value, c.struct?.json.get(key), op.where), op.where);
}

function insert(resource: JsonObject, op: Operation): void {
  const { slot, items } = list(resource, op);
  const index = op.index as number;
  if (index > items.length)
    throw patchError(
      `${op.where}: index ${index} is beyond the list's ${items.length} items`,
      'fhirpatch.index',
      422,
    );
  const m = materialize(op.value as PatchValue, slot.child, op.where);
  items.splice(index, 0, m.json);
  const companions = slot.holder[`_${slot.key}`];
  if (Array.isArray(companions) || m.ext) {
    const list = Array.isArray(companions) ? companions : (slot.holder[`_${slot.key}`] = []);
    while (list.length < items.length - 1) list.push(null);
    list.splice(index, 0, m.ext ?? null);
  }
  if (m.text !== undefined) setRawNumber(items, index, m.text);
}

function remove(resource: JsonObject, op: Operation): void {
  const found = single(resource, op, true);
  if (!found) return; // "delete: the element (if found)"
  const slot = rootless(found, op);
  const ck = `_${slot.key}`;
  if (slot.index === null) {
    delete slot.holder[slot.key];
    delete slot.holder[ck];
    return;
  }
  (slot.holder[slot.key] as unknown[]).splice(slot.index, 1);
  const companions = slot.holder[ck];
  if (Array.isArray(companions)) companions.splice(slot.index, 1);
}

function replace(resource: JsonObject, op: Operation): void {
  const slot = rootless(single(resource, op) as Located, op);
  const value = op.value as PatchValue;
  const element = slot.child?.element;
  const ck = `_${slot.key}`;
  if (element?.isChoice && slot.index === null) {
    // A choice may change type: valueQuantity → valueString.
    const key = keyFor(element, value, op.where);
    const m = materialize(value, slot.struct?.json.get(key), op.where);
    delete slot.holder[slot.key];
    delete slot.holder[ck];
    put(slot.holder, key, false, m, op.where);
    return;
  }
  const m = materialize(value, slot.child, op.where);
  if (slot.index === null) {
    slot.holder[slot.key] = m.json;
    if (m.ext) slot.holder[ck] = m.ext;
    else delete slot.holder[ck];
    if (m.text !== undefined) setRawNumber(slot.holder, slot.key, m.text);
    return;
  }
  const items = slot.holder[slot.key] as unknown[];
  items[slot.index] = m.json;
  const companions = slot.holder[ck];
  if (Array.isArray(companions) || m.ext) {
    const list = Array.isArray(companions) ? companions : (slot.holder[ck] = []);
    while (list.length < items.length) list.push(null);
    list[slot.index] = m.ext ?? null;
  }
  if (m.text !== undefined) setRawNumber(items, slot.index, m.text);
}

function move(resource: JsonObject, op: Operation): void {
  const { slot, items } = list(resource, op);
  const from = op.source as number;
  const to = op.destination as number;
  if (from >= items.length || to >= items.length)
    throw patchError(
      `${op.where}: source and destination must be below the list's ${items.length} items`,
      'fhirpatch.index',
      422,
    );
  items.splice(to, 0, ...items.splice(from, 1));
  const companions = slot.holder[`_${slot.key}`];
  if (Array.isArray(companions)) {
    while (companions.length < items.length) companions.push(null);
    companions.splice(to, 0, ...companions.splice(from, 1));
  }
}

/** The slot of an element; the resource itself cannot be deleted or replaced. */
function rootless(found: Located, op: Operation): Slot {
  if (!found.slot)
    throw patchError(`${op.where}: ${op.type} cannot apply to the resource itself`, 'fhirpatch.root', 422);
  return found.slot;
}

/**
 * Removes what the operations left empty: an object or list without content, a primitive's companion list of only
 * nulls. (Deleting `contact[0].name.text` deletes the then empty `name`, as HL7's test cases expect.)
 */
function prune(obj: JsonObject): void {
  for (const key of Object.keys(obj)) {
    const v = obj[key];
    if (Array.isArray(v)) {
      const companion = key.startsWith('_');
      for (let i = v.length - 1; i >= 0; i--) {
        const item: unknown = v[i];
        if (!isObject(item)) continue;
        prune(item);
        if (Object.keys(item).length > 0) continue;
        if (companion) v[i] = null;
        else v.splice(i, 1);
      }
      if (v.length === 0 || (companion && v.every((x) => x === null))) delete obj[key];
    } else if (isObject(v)) {
      prune(v);
      if (Object.keys(v).length === 0) delete obj[key];
    }
  }
}
