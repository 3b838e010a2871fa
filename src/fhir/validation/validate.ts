// Structural validation of FHIR R4 resources in JSON form (https://hl7.org/fhir/R4/json.html):
// known elements, choice types, cardinality, required elements, primitive types and formats, nested resources.
// Not checked: invariants (FHIRPath constraints), terminology bindings, profiles, reference targets.
import { definitions, type Definitions, type JsonChild, type StructureNode } from '../definitions/index.js';
import { FhirError, type IssueCode, type OperationOutcomeIssue } from '../outcome.js';
import { describeJson as describe, primitiveChecks, type PrimitiveCheck } from './primitives.js';

interface Ctx {
  defs: Definitions;
  checks: Map<string, PrimitiveCheck>;
  issues: OperationOutcomeIssue[];
}

function issue(ctx: Ctx, code: IssueCode, text: string, expression: string): void {
  ctx.issues.push({ severity: 'error', code, details: { text }, expression: [expression] });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Validates a resource; returns its issues (empty when valid). Expressions are FHIRPath-like paths with array
 * indices from the root resource, e.g. `Patient.name[0].given[1]`, `Bundle.entry[2].resource.status`.
 */
export function validateResource(resource: unknown): OperationOutcomeIssue[] {
  const ctx: Ctx = { defs: definitions(), checks: primitiveChecks(), issues: [] };
  validateNestedResource(ctx, resource, undefined, 'Resource');
  return ctx.issues;
}

/** Throws a FhirError (`invalid`, code `validation.failed`) carrying every issue when the resource is invalid. */
export function assertValid(resource: unknown): void {
  const issues = validateResource(resource);
  const first = issues[0];
  if (!first) return;
  const text = first.details?.text ?? 'Invalid resource';
  const message = issues.length > 1 ? `${text} (and ${issues.length - 1} more)` : text;
  throw new FhirError('invalid', message, 'validation.failed', { issues });
}

/**
 * A resource at the root (`path` undefined) or nested (contained, Bundle.entry.resource, …). `expected` is
 * `Resource` (any type) or a specific resource type (e.g. Bundle.entry.response.outcome: OperationOutcome).
 */
function validateNestedResource(ctx: Ctx, value: unknown, path: string | undefined, expected: string): void {
  if (!isObject(value)) {
    issue(ctx, 'structure', 'A resource must be a JSON object', path ?? 'Resource');
    return;
  }
  const type = value.resourceType;
  const at = path === undefined ? 'resourceType' : `${path}.resourceType`;
  if (type === undefined) {
    issue(ctx, 'required', 'Missing resourceType', at);
    return;
  }
  if (typeof type !== 'string' || !ctx.defs.resourceTypeSet.has(type)) {
    issue(
      ctx,
      'value',
      `Unknown resource type: ${typeof type === 'string' ? type : JSON.stringify(type)}`,
      at,
    );
    return;
  }
  if (expected !== 'Resource' && type !== expected) {
    issue(ctx, 'value', `Expected a ${expected} resource, got ${type}`, at);
    return;
  }
  const node = ctx.defs.nodes.get(type) as StructureNode;
  validateObject(ctx, node, value, path ?? type);
}

/** The members of an object (resource, datatype or backbone element) described by `node`. */
function validateObject(ctx: Ctx, node: StructureNode, obj: Record<string, unknown>, path: string): void {
  let count = 0;
  // Choice elements seen in this object: element path → JSON name (allocated only when a choice appears).
  let choices: Map<string, string> | undefined;
  for (const key in obj) {
    count++;
    const value = obj[key];
    // `_name`: the id/extension part of the primitive `name` (https://hl7.org/fhir/R4/json.html#primitive).
    const isSibling = key.charCodeAt(0) === 95; /* _ */
    const name = isSibling ? key.slice(1) : key;
    const child = node.json.get(name);
    if (!child || (isSibling && child.kind !== 'primitive')) {
      if (key === 'resourceType' && node.isResource) continue;
      issue(ctx, 'structure', `Unknown element '${key}'`, `${path}.${key}`);
      continue;
    }
    if (child.element.isChoice) {
      choices ??= new Map();
      const prev = choices.get(child.element.path);
      if (prev !== undefined && prev !== name) {
        issue(
          ctx,
          'structure',
          `Only one of '${prev}' and '${name}' may be present (${child.element.name}[x])`,
          `${path}.${key}`,
        );
      } else choices.set(child.element.path, name);
    }
    if (isSibling) validatePrimitiveSibling(ctx, child, obj, key, name, value, `${path}.${key}`);
    else validateMember(ctx, child, obj, key, value, `${path}.${key}`);
  }
  if (count === 0) {
    issue(ctx, 'structure', 'Empty object is not allowed', path);
  }
  for (const req of node.required) {
    let present = false;
    for (const name of req.names) {
      if (obj[name] !== undefined || obj[`_${name}`] !== undefined) {
        present = true;
        break;
      }
    }
    if (!present) {
      issue(
        ctx,
        'required',
        `Missing required element '${req.element.name}${req.element.isChoice ? '[x]' : ''}'`,
        `${path}.${req.element.name}${req.element.isChoice ? '[x]' : ''}`,
      );
    }
  }
}

/** One JSON property: cardinality (array or not), then each value. */
function validateMember(
  ctx: Ctx,
  child: JsonChild,
  obj: Record<string, unknown>,
  key: string,
  value: unknown,
  path: string,
): void {
  const max = child.element.max;
  if (Array.isArray(value)) {
    if (max === 1) {
      issue(ctx, 'structure', `Element '${key}' must not be an array (max cardinality 1)`, path);
      return;
    }
    if (value.length === 0) {
      issue(ctx, 'structure', 'Empty array is not allowed', path);
      return;
    }
    if (value.length > max) {
      issue(ctx, 'structure', `Element '${key}' has ${value.length} values, at most ${max} allowed`, path);
    }
    let siblings: unknown;
    for (let i = 0; i < value.length; i++) {
      const item = value[i];
      const itemPath = `${path}[${i}]`;
      if (item === null) {
        // In a primitive array, null is the placeholder for an entry that only has an extension (`_key[i]`).
        if (child.kind === 'primitive') {
          siblings ??= obj[`_${key}`] ?? null;
          if (Array.isArray(siblings) && isObject(siblings[i])) continue;
        }
        issue(ctx, 'structure', 'Null values are not allowed', itemPath);
        continue;
      }
      validateValue(ctx, child, item, itemPath);
    }
    return;
  }
  if (max > 1) {
    issue(
      ctx,
      'structure',
      `Element '${key}' must be an array (max cardinality ${max === Infinity ? '*' : max})`,
      path,
    );
  }
  if (value === null) {
    issue(ctx, 'structure', 'Null values are not allowed', path);
    return;
  }
  validateValue(ctx, child, value, path);
}

/** One value (not an array) of a property. */
function validateValue(ctx: Ctx, child: JsonChild, value: unknown, path: string): void {
  switch (child.kind) {
    case 'primitive': {
      const check = ctx.checks.get(child.type);
      const problem = check ? check(value) : undefined;
      if (problem !== undefined) issue(ctx, 'value', problem, path);
      return;
    }
    case 'complex':
      if (!isObject(value)) {
        issue(ctx, 'structure', `Expected an object (${child.type}), got ${describe(value)}`, path);
        return;
      }
      validateObject(ctx, child.node as StructureNode, value, path);
      return;
    case 'resource':
      validateNestedResource(ctx, value, path, child.type);
      return;
    default:
      return;
  }
}

/**
 * `_key`: the id/extension part of a primitive `key` (https://hl7.org/fhir/R4/json.html#primitive). Checked
 * loosely: an object with only `id` and `extension` (or, for a repeating element, an array of those or null).
 */
function validatePrimitiveSibling(
  ctx: Ctx,
  child: JsonChild,
  obj: Record<string, unknown>,
  key: string,
  name: string,
  value: unknown,
  at: string,
): void {
  if (child.element.max > 1) {
    if (!Array.isArray(value)) {
      issue(ctx, 'structure', `Element '${key}' must be an array`, at);
      return;
    }
    const values = obj[name];
    if (values !== undefined && (!Array.isArray(values) || values.length !== value.length)) {
      issue(ctx, 'structure', `Element '${key}' must have as many entries as '${name}'`, at);
    }
    if (value.length === 0) {
      issue(ctx, 'structure', 'Empty array is not allowed', at);
      return;
    }
    let nonNull = 0;
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === null) continue; // no id/extension for the value at this index
      nonNull++;
      validateElementPart(ctx, item, `${at}[${i}]`);
    }
    if (nonNull === 0) issue(ctx, 'structure', `Element '${key}' has only null entries`, at);
    return;
  }
  if (Array.isArray(value)) {
    issue(ctx, 'structure', `Element '${key}' must not be an array (max cardinality 1)`, at);
    return;
  }
  validateElementPart(ctx, value, at);
}

const ELEMENT_NODE = 'Element';

/** `{ id?, extension? }` of a primitive value. */
function validateElementPart(ctx: Ctx, value: unknown, path: string): void {
  if (!isObject(value)) {
    issue(ctx, 'structure', `Expected an object with id/extension, got ${describe(value)}`, path);
    return;
  }
  const node = ctx.defs.nodes.get(ELEMENT_NODE);
  if (node) validateObject(ctx, node, value, path);
}
