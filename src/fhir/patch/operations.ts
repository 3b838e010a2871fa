// The operations of a FHIRPath Patch (https://hl7.org/fhir/R4/fhirpatch.html): a Parameters resource whose
// `parameter`s are named `operation`, read into typed operations (type, path, name, value, index, source,
// destination) before any of them runs; a malformed one is a 400.
import { FhirError } from '../outcome.js';
import type { JsonObject } from './locate.js';
import { patchError, readValue, type PatchValue } from './values.js';

/** Operations of one patch, and the length of one path: beyond them the patch is refused before anything runs. */
export const MAX_OPERATIONS = 1000;
export const MAX_PATH_LENGTH = 2000;

export const TYPES = ['add', 'insert', 'delete', 'replace', 'move'] as const;
export type OpType = (typeof TYPES)[number];
const PARTS = new Set(['type', 'path', 'name', 'value', 'index', 'source', 'destination']);

export interface Operation {
  type: OpType;
  path: string;
  name?: string;
  value?: PatchValue;
  index?: number;
  source?: number;
  destination?: number;
  /** `Parameters.parameter[i]`, for messages. */
  where: string;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);

export function readOperations(parameters: unknown): Operation[] {
  if (!isObject(parameters) || parameters.resourceType !== 'Parameters')
    throw patchError('the body must be a Parameters resource', 'fhirpatch.shape');
  const list = (parameters as JsonObject).parameter ?? [];
  if (!Array.isArray(list)) throw patchError('Parameters.parameter must be a list', 'fhirpatch.shape');
  if (list.length > MAX_OPERATIONS) {
    throw new FhirError(
      'too-long',
      `FHIRPath Patch: ${list.length} operations; at most ${MAX_OPERATIONS} are accepted`,
      'fhirpatch.too-many',
      { status: 413 },
    );
  }
  return list.map((p, i) => readOperation(p, `Parameters.parameter[${i}]`));
}

function readOperation(p: unknown, where: string): Operation {
  if (!isObject(p) || p.name !== 'operation')
    throw patchError(`${where} must be a parameter named operation`, 'fhirpatch.parameter-name');
  if (!Array.isArray(p.part) || !p.part.every(isObject))
    throw patchError(`${where} needs its parts`, 'fhirpatch.parts');
  const parts = new Map<string, JsonObject>();
  for (const part of p.part as JsonObject[]) {
    const name = typeof part.name === 'string' ? part.name : '';
    if (!PARTS.has(name))
      throw patchError(`${where} has an unknown part ${name.slice(0, 60)}`, 'fhirpatch.part-name');
    if (parts.has(name)) throw patchError(`${where} has part ${name} twice`, 'fhirpatch.part-twice');
    parts.set(name, part);
  }
  const typePart = parts.get('type');
  const type = typePart?.valueCode ?? typePart?.valueString;
  if (!TYPES.includes(type as OpType))
    throw patchError(`${where}: type must be one of ${TYPES.join(', ')}`, 'fhirpatch.op-type');
  const path = parts.get('path')?.valueString;
  if (typeof path !== 'string' || path.trim() === '')
    throw patchError(`${where} needs a path (valueString)`, 'fhirpatch.path');
  if (path.length > MAX_PATH_LENGTH)
    throw patchError(
      `${where}: the path is longer than ${MAX_PATH_LENGTH} characters`,
      'fhirpatch.path-length',
    );
  const op: Operation = { type: type as OpType, path, where };
  const name = parts.get('name');
  if (name) {
    if (typeof name.valueString !== 'string')
      throw patchError(`${where}: name must be a valueString`, 'fhirpatch.name');
    op.name = name.valueString;
  }
  const valuePart = parts.get('value');
  const value = valuePart && readValue(valuePart, `${where}.value`);
  if (value) op.value = value;
  for (const k of ['index', 'source', 'destination'] as const) {
    const part = parts.get(k);
    if (!part) continue;
    const n = part.valueInteger;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 0)
      throw patchError(`${where}: ${k} must be a valueInteger of 0 or more`, 'fhirpatch.integer');
    op[k] = n;
  }
  const needs: Record<OpType, (keyof Operation)[]> = {
    add: ['name', 'value'],
    insert: ['value', 'index'],
    delete: [],
    replace: ['value'],
    move: ['source', 'destination'],
  };
  for (const k of needs[op.type])
    if (op[k] === undefined) throw patchError(`${where}: ${op.type} needs a ${k}`, 'fhirpatch.missing-part');
  return op;
}
