// The ViewDefinition of SQL on FHIR v2 as Cinder reads it, and the structural check that turns untrusted JSON into it:
// each structure error names the element (`ViewDefinition.select[0].forEach`) and is a 422 processing FhirError.
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html
import { isResourceType } from '../definitions/index.js';
import { FhirError } from '../outcome.js';

export interface ViewColumn {
  name: string;
  path: string;
  type?: string;
  collection?: boolean;
  description?: string;
  tag?: { name: string; value: string }[];
}

export interface ViewSelect {
  column?: ViewColumn[];
  select?: ViewSelect[];
  unionAll?: ViewSelect[];
  forEach?: string;
  forEachOrNull?: string;
  repeat?: string[];
}

/** One `constant`: its name and its `value[x]` (the type is the suffix, e.g. `Date` for `valueDate`). */
export interface ViewConstant {
  name: string;
  type: string;
  value: string | number | boolean;
}

export interface ViewDefinition {
  resource: string;
  name?: string;
  constant: ViewConstant[];
  select: ViewSelect[];
  where: { path: string; description?: string }[];
}

/** A ViewDefinition that cannot be processed (API.md §7: 422 processing); `code` is unique to the throw site. */
export function viewError(message: string, code: string, element?: string): FhirError {
  return new FhirError('processing', message, code, {
    status: 422,
    ...(element ? { expression: [element] } : {}),
  });
}

/**
 * A view too costly to run (issue 25 point 7): 422 too-costly naming the limit, never a 500 or a stall. `code` is
 * unique to the throw site.
 */
export function viewTooCostly(message: string, code: string, element?: string): FhirError {
  return new FhirError('too-costly', message, code, {
    status: 422,
    ...(element ? { expression: [element] } : {}),
  });
}

/**
 * Select and unionAll entries one view may hold, and how deep they may nest. Each entry is a factor of the rows a
 * resource gives (siblings multiply, unionAll branches add), so a view's cost is bounded at validation; real views
 * hold a handful (the specification's examples at most a dozen).
 */
export const MAX_VIEW_SELECTS = 100;
export const MAX_VIEW_NESTING = 10;

type Json = Record<string, unknown>;

const SQL_NAME = /^[A-Za-z][A-Za-z0-9_]*$/;
const BACKBONE = ['id', 'extension', 'modifierExtension'];
const SELECT_KEYS = new Set([
  ...BACKBONE,
  'column',
  'select',
  'unionAll',
  'forEach',
  'forEachOrNull',
  'repeat',
]);
const COLUMN_KEYS = new Set([
  ...BACKBONE,
  'name',
  'path',
  'type',
  'collection',
  'description',
  'tag',
  'tags',
]);
const WHERE_KEYS = new Set([...BACKBONE, 'path', 'description']);

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function invalid(element: string, why: string): FhirError {
  return viewError(`Invalid ViewDefinition: ${element} ${why}`, 'views.invalid-structure', element);
}

function objectAt(v: unknown, element: string): Json {
  if (!isObject(v)) throw invalid(element, 'must be an object');
  return v;
}

function stringAt(o: Json, key: string, element: string, required: boolean): string | undefined {
  const v = o[key];
  if (v === undefined) {
    if (required) throw invalid(`${element}.${key}`, 'is required');
    return undefined;
  }
  if (typeof v !== 'string' || v.trim() === '')
    throw invalid(`${element}.${key}`, 'must be a non-empty string');
  return v;
}

function arrayAt(o: Json, key: string, element: string, required = false): unknown[] | undefined {
  const v = o[key];
  if (v === undefined) {
    if (required) throw invalid(`${element}.${key}`, 'is required');
    return undefined;
  }
  if (!Array.isArray(v) || (required && v.length === 0))
    throw invalid(`${element}.${key}`, required ? 'must be a non-empty array' : 'must be an array');
  return v;
}

function onlyKeys(o: Json, allowed: Set<string>, element: string): void {
  for (const k of Object.keys(o))
    if (!allowed.has(k)) throw invalid(`${element}.${k}`, 'is not a known element');
}

function sqlName(o: Json, key: string, element: string): string {
  const name = stringAt(o, key, element, true) as string;
  if (!SQL_NAME.test(name))
    throw invalid(
      `${element}.${key}`,
      `"${name.slice(0, 64)}" must match ^[A-Za-z][A-Za-z0-9_]*$ (sql-name)`,
    );
  return name;
}

function readColumn(v: unknown, element: string): ViewColumn {
  const o = objectAt(v, element);
  onlyKeys(o, COLUMN_KEYS, element);
  const col: ViewColumn = {
    name: sqlName(o, 'name', element),
    path: stringAt(o, 'path', element, true) as string,
  };
  const type = stringAt(o, 'type', element, false);
  if (type !== undefined) col.type = type;
  if (o.collection !== undefined) {
    if (typeof o.collection !== 'boolean') throw invalid(`${element}.collection`, 'must be a boolean');
    col.collection = o.collection;
  }
  if (o.description !== undefined) {
    if (typeof o.description !== 'string') throw invalid(`${element}.description`, 'must be a string');
    col.description = o.description;
  }
  const tagKey = o.tag !== undefined ? 'tag' : 'tags';
  const tags = arrayAt(o, tagKey, element);
  if (tags) {
    col.tag = tags.map((t, i) => {
      const at = `${element}.${tagKey}[${i}]`;
      const tag = objectAt(t, at);
      return { name: stringAt(tag, 'name', at, true) as string, value: String(tag.value ?? '') };
    });
  }
  return col;
}

/** Counts the select and unionAll entries read so far (MAX_VIEW_SELECTS). */
interface Budget {
  selects: number;
}

function readSelect(v: unknown, element: string, budget: Budget, depth: number): ViewSelect {
  if (++budget.selects > MAX_VIEW_SELECTS)
    throw viewTooCostly(
      `The ViewDefinition is too costly: it may hold at most ${MAX_VIEW_SELECTS} select and unionAll entries in all`,
      'views.too-many-selects',
      element,
    );
  if (depth > MAX_VIEW_NESTING)
    throw viewTooCostly(
      `The ViewDefinition is too costly: its selects may not be nested deeper than ${MAX_VIEW_NESTING} levels`,
      'views.too-deep',
      element,
    );
  const o = objectAt(v, element);
  onlyKeys(o, SELECT_KEYS, element);
  const sel: ViewSelect = {};
  const column = arrayAt(o, 'column', element);
  if (column) sel.column = column.map((c, i) => readColumn(c, `${element}.column[${i}]`));
  const select = arrayAt(o, 'select', element);
  if (select) sel.select = select.map((s, i) => readSelect(s, `${element}.select[${i}]`, budget, depth + 1));
  const unionAll = arrayAt(o, 'unionAll', element);
  if (unionAll)
    sel.unionAll = unionAll.map((s, i) => readSelect(s, `${element}.unionAll[${i}]`, budget, depth + 1));
  const forEach = stringAt(o, 'forEach', element, false);
  const forEachOrNull = stringAt(o, 'forEachOrNull', element, false);
  const repeat = arrayAt(o, 'repeat', element);
  if (forEach !== undefined) sel.forEach = forEach;
  if (forEachOrNull !== undefined) sel.forEachOrNull = forEachOrNull;
  if (repeat) {
    if (repeat.length === 0) throw invalid(`${element}.repeat`, 'must hold at least one FHIRPath');
    sel.repeat = repeat.map((r, i) => {
      if (typeof r !== 'string' || r.trim() === '')
        throw invalid(`${element}.repeat[${i}]`, 'must be a non-empty string');
      return r;
    });
  }
  if ([forEach, forEachOrNull, repeat].filter((x) => x !== undefined).length > 1)
    throw invalid(element, 'may have only one of forEach, forEachOrNull and repeat (sql-expressions)');
  if (!sel.column && !sel.select && !sel.unionAll)
    throw invalid(element, 'needs a column, select or unionAll');
  return sel;
}

const CONSTANT_TYPES = new Set(
  'Base64Binary Boolean Canonical Code Date DateTime Decimal Id Instant Integer Integer64 Oid String PositiveInt Time UnsignedInt Uri Url Uuid'.split(
    ' ',
  ),
);

function readConstant(v: unknown, element: string): ViewConstant {
  const o = objectAt(v, element);
  const name = sqlName(o, 'name', element);
  const values = Object.keys(o).filter((k) => k.startsWith('value'));
  if (values.length !== 1) throw invalid(element, `needs exactly one value[x], found ${values.length}`);
  for (const k of Object.keys(o))
    if (k !== 'name' && k !== values[0] && !BACKBONE.includes(k))
      throw invalid(`${element}.${k}`, 'is not a known element');
  const key = values[0] as string;
  const type = key.slice('value'.length);
  if (!CONSTANT_TYPES.has(type)) throw invalid(`${element}.${key}`, 'is not an allowed constant type');
  const value = o[key];
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
    throw invalid(`${element}.${key}`, 'must be a primitive value');
  return { name, type, value };
}

function readWhere(v: unknown, element: string): { path: string; description?: string } {
  const o = objectAt(v, element);
  onlyKeys(o, WHERE_KEYS, element);
  const path = stringAt(o, 'path', element, true) as string;
  return typeof o.description === 'string' ? { path, description: o.description } : { path };
}

/** Checks the structure of an untrusted ViewDefinition (not its FHIRPath: compile does that) and returns it typed. */
export function readViewDefinition(input: unknown): ViewDefinition {
  const o = objectAt(input, 'ViewDefinition');
  if (o.resourceType !== undefined && o.resourceType !== 'ViewDefinition')
    throw invalid('ViewDefinition.resourceType', 'must be ViewDefinition');
  const resource = stringAt(o, 'resource', 'ViewDefinition', true) as string;
  if (!isResourceType(resource))
    throw invalid('ViewDefinition.resource', `"${resource.slice(0, 64)}" is not a resource type`);
  const name = o.name === undefined ? undefined : sqlName(o, 'name', 'ViewDefinition');
  const constants = (arrayAt(o, 'constant', 'ViewDefinition') ?? []).map((c, i) =>
    readConstant(c, `ViewDefinition.constant[${i}]`),
  );
  const seen = new Set<string>();
  constants.forEach((c, i) => {
    if (seen.has(c.name)) throw invalid(`ViewDefinition.constant[${i}].name`, `"${c.name}" is defined twice`);
    seen.add(c.name);
  });
  const budget: Budget = { selects: 0 };
  const select = (arrayAt(o, 'select', 'ViewDefinition', true) as unknown[]).map((s, i) =>
    readSelect(s, `ViewDefinition.select[${i}]`, budget, 1),
  );
  const where = (arrayAt(o, 'where', 'ViewDefinition') ?? []).map((w, i) =>
    readWhere(w, `ViewDefinition.where[${i}]`),
  );
  return { resource, ...(name ? { name } : {}), constant: constants, select, where };
}
