// A ViewDefinition compiled once into the function that turns one resource into its rows, following the
// specification's processing algorithm (forEach, forEachOrNull, repeat, nested select, unionAll, where, %rowIndex).
// Pure: no I/O; the FHIRPath pool runs it in a worker with a deadline (csv/fhirpath-worker.ts).
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#processing-algorithm
import { decimalTextOf, settleDecimals } from './decimal-text.js';
import { rawNumberText } from '../json/raw-numbers.js';
import { constantLiteral } from './constants.js';
import { selectColumns, viewColumns, type ViewColumnInfo } from './columns.js';
import {
  compileExpression,
  engineOptions,
  jsonValue,
  type Env,
  type Evaluator,
  type ExpressionContext,
} from './expressions.js';
import { viewFunctions, type NumberText } from './functions.js';
import { readViewDefinition, viewError, viewTooCostly, type ViewSelect } from './view-definition.js';

/** One output row: column name → JSON value (null when empty; an array for `collection: true`). */
export type Row = Record<string, unknown>;

export interface CompiledView {
  /** The resource type the view reads; other resources give no rows. */
  resource: string;
  name?: string;
  /** The columns in output order. */
  columns: ViewColumnInfo[];
  /** The rows of one resource (parsed JSON); throws a 422 FhirError when the view cannot process it. */
  rows(resource: unknown): Row[];
}

export interface CompileOptions {
  /**
   * The written text of a number (`1.0`): decimal boundaries use its precision. Default: the text Cinder's JSON
   * parser recorded (src/fhir/json), so resources parsed with parseJson need nothing more.
   */
  numberText?: NumberText;
}

const MAX_REPEAT_DEPTH = 200;

/**
 * Rows one resource may give (issue 25 point 7). Sibling selects multiply their rows (nine `forEach: 'name'` over
 * a Patient of two names give 512 rows, of four given names 262,144), so the product is checked before it is built:
 * a view past it fails in milliseconds with 422 too-costly naming the limit, instead of filling the worker's heap
 * or the answer.
 */
export const MAX_ROWS_PER_RESOURCE = 10_000;

function tooManyRows(element: string): never {
  throw viewTooCostly(
    `The ViewDefinition is too costly: it gives more than ${MAX_ROWS_PER_RESOURCE} rows for one resource (${element}); ` +
      'narrow its forEach, select and unionAll',
    'views.too-many-rows',
    element,
  );
}

interface Column {
  name: string;
  element: string;
  path: Evaluator;
  collection: boolean;
  rowIndex: boolean;
}

interface Select {
  iterate?: { kind: 'forEach' | 'forEachOrNull' | 'repeat'; element: string; paths: Evaluator[] };
  columns: Column[];
  selects: Select[];
  unionAll: Select[];
  /** All columns this select gives (for the row of nulls of an empty forEachOrNull). */
  names: string[];
  /** Those whose path is `%rowIndex`, which the row of nulls sets to 0. */
  rowIndexNames: string[];
}

function compileSelect(s: ViewSelect, element: string, ctx: ExpressionContext): Select {
  const columns: Column[] = (s.column ?? []).map((c, i) => {
    const at = `${element}.column[${i}]`;
    const path = compileExpression(c.path, `${at}.path`, ctx);
    return {
      name: c.name,
      element: at,
      path,
      collection: c.collection === true,
      rowIndex: c.path.trim() === '%rowIndex',
    };
  });
  const sel: Select = {
    columns,
    selects: (s.select ?? []).map((x, i) => compileSelect(x, `${element}.select[${i}]`, ctx)),
    unionAll: (s.unionAll ?? []).map((x, i) => compileSelect(x, `${element}.unionAll[${i}]`, ctx)),
    names: selectColumns(s, element).map((c) => c.name),
    rowIndexNames: [],
  };
  sel.rowIndexNames = [
    ...columns.filter((c) => c.rowIndex).map((c) => c.name),
    ...[...sel.selects, ...sel.unionAll].flatMap((x) => x.rowIndexNames),
  ];
  if (s.forEach !== undefined)
    sel.iterate = {
      kind: 'forEach',
      element: `${element}.forEach`,
      paths: [compileExpression(s.forEach, `${element}.forEach`, ctx)],
    };
  else if (s.forEachOrNull !== undefined) {
    const at = `${element}.forEachOrNull`;
    sel.iterate = {
      kind: 'forEachOrNull',
      element: at,
      paths: [compileExpression(s.forEachOrNull, at, ctx)],
    };
  } else if (s.repeat !== undefined) {
    const at = `${element}.repeat`;
    sel.iterate = {
      kind: 'repeat',
      element: at,
      paths: s.repeat.map((p, i) => compileExpression(p, `${at}[${i}]`, ctx)),
    };
  }
  return sel;
}

/** Evaluates, turning an engine failure on this resource into a 422 naming the element. */
function run(path: Evaluator, focus: unknown, env: Env, element: string): unknown[] {
  try {
    return path(focus, env);
  } catch (err) {
    const why = String((err as Error)?.message ?? err)
      .split('\n')[0]
      ?.slice(0, 200);
    throw viewError(`The FHIRPath of ${element} failed: ${why}`, 'views.fhirpath-failed', element);
  }
}

/**
 * Every row of the Cartesian product of the parts, each row the union of one partial row from each part; at most
 * MAX_ROWS_PER_RESOURCE, checked before each product is built.
 */
function cartesian(parts: Row[][], element: string): Row[] {
  let rows: Row[] = [{}];
  for (const part of parts) {
    if (rows.length * part.length > MAX_ROWS_PER_RESOURCE) tooManyRows(element);
    const next: Row[] = [];
    for (const r of rows) for (const p of part) next.push({ ...r, ...p });
    rows = next;
    if (rows.length === 0) break;
  }
  return rows;
}

/** A cell's value: its JSON, or a decimal's written text (settled into the row by settleDecimals). */
const cellValue = (item: unknown): unknown => decimalTextOf(item) ?? jsonValue(item);

function cell(col: Column, focus: unknown, env: Env): unknown {
  const items = run(col.path, focus, env, `${col.element}.path`);
  if (col.collection) return items.map(cellValue);
  if (items.length === 0) return null;
  if (items.length > 1)
    throw viewError(
      `Column ${col.name} has ${items.length} values where one is expected; set collection: true (${col.element})`,
      'views.multiple-values',
      col.element,
    );
  return cellValue(items[0]);
}

/** The JSON a node stands for: a fhirpath ResourceNode's data, or the resource object itself at the root. */
function dataOf(node: unknown): unknown {
  const data = (node as { data?: unknown } | null)?.data;
  return typeof data === 'object' && data !== null ? data : node;
}

/** The foci of a select (repeat: every node reached by its paths, depth first), or undefined when it does not iterate. */
function fociOf(sel: Select, node: unknown, env: Env): unknown[] | undefined {
  const it = sel.iterate;
  if (!it) return undefined;
  if (it.kind !== 'repeat') return run(it.paths[0] as Evaluator, node, env, it.element);
  const out: unknown[] = [];
  // A path that leads back to a node already reached (`repeat: ['$this']`) would never end: such nodes are not
  // walked again, and a walk deeper than any resource nests is refused.
  const seen = new Set<unknown>([dataOf(node)]);
  const traverse = (n: unknown, depth: number): void => {
    if (depth > MAX_REPEAT_DEPTH)
      throw viewError(
        `${it.element} goes deeper than ${MAX_REPEAT_DEPTH} levels`,
        'views.repeat-too-deep',
        it.element,
      );
    for (const p of it.paths)
      for (const child of run(p, n, env, it.element)) {
        const data = dataOf(child);
        if (typeof data === 'object' && data !== null) {
          if (seen.has(data)) continue;
          seen.add(data);
        }
        out.push(child);
        traverse(child, depth + 1);
      }
  };
  traverse(node, 0);
  return out;
}

/** Appends `more` to `rows` (no spread: a spread of 100,000 values overflows the stack), within the limit. */
function append(rows: Row[], more: readonly Row[], element: string): void {
  if (rows.length + more.length > MAX_ROWS_PER_RESOURCE) tooManyRows(element);
  for (const r of more) rows.push(r);
}

/** Process(S, N): the rows of a select on one node. */
function processSelect(sel: Select, node: unknown, env: Env, element: string): Row[] {
  const foci = fociOf(sel, node, env);
  const rows: Row[] = [];
  (foci ?? [node]).forEach((focus, i) => {
    // Only an iteration starts a new %rowIndex; a select without one (and a unionAll) inherits it.
    const e = foci ? { ...env, rowIndex: i } : env;
    const own: Row = {};
    for (const col of sel.columns) own[col.name] = cell(col, focus, e);
    const parts: Row[][] = [[own]];
    sel.selects.forEach((child, j) => parts.push(processSelect(child, focus, e, `${element}.select[${j}]`)));
    if (sel.unionAll.length > 0) {
      const union: Row[] = [];
      sel.unionAll.forEach((u, j) =>
        append(union, processSelect(u, focus, e, `${element}.unionAll[${j}]`), element),
      );
      parts.push(union);
    }
    append(rows, cartesian(parts, element), element);
  });
  if (foci?.length === 0 && sel.iterate?.kind === 'forEachOrNull') {
    const empty: Row = {};
    for (const name of sel.names) empty[name] = sel.rowIndexNames.includes(name) ? 0 : null;
    rows.push(empty);
  }
  return rows;
}

/** Whether a resource passes the view's `where`: each path must give true; empty is false; anything else is an error. */
function passes(where: { path: Evaluator; element: string }[], resource: unknown, env: Env): boolean {
  for (const w of where) {
    const items = run(w.path, resource, env, w.element).map(jsonValue);
    if (items.length === 0) return false;
    if (items.length > 1 || typeof items[0] !== 'boolean')
      throw viewError(
        `The where path ${w.element} must give a boolean, it gave ${items.length > 1 ? `${items.length} values` : typeof items[0]}`,
        'views.where-not-boolean',
        w.element,
      );
    if (!items[0]) return false;
  }
  return true;
}

/** Checks and compiles a ViewDefinition (untrusted JSON); throws a 422 processing FhirError naming what is wrong. */
export function compileView(input: unknown, opts: CompileOptions = {}): CompiledView {
  const view = readViewDefinition(input);
  const columns = viewColumns(view.select);
  const ctx: ExpressionContext = {
    literals: new Map(view.constant.map((c) => [c.name, constantLiteral(c)])),
    options: engineOptions(viewFunctions(opts.numberText ?? rawNumberText)),
  };
  const where = view.where.map((w, i) => {
    const element = `ViewDefinition.where[${i}].path`;
    return { element, path: compileExpression(w.path, element, ctx) };
  });
  const selects = view.select.map((s, i) => compileSelect(s, `ViewDefinition.select[${i}]`, ctx));
  const names = columns.map((c) => c.name);
  return {
    resource: view.resource,
    ...(view.name ? { name: view.name } : {}),
    columns,
    rows(resource) {
      const r = resource as { resourceType?: unknown } | null;
      if (r === null || typeof r !== 'object' || r.resourceType !== view.resource) return [];
      const env: Env = { rowIndex: 0, resource, rootResource: resource };
      if (!passes(where, resource, env)) return [];
      const rows = cartesian(
        selects.map((s, i) => processSelect(s, resource, env, `ViewDefinition.select[${i}]`)),
        'ViewDefinition.select',
      );
      // Rows keep the column order whatever order the parts were merged in.
      return rows.map((row) => settleDecimals(Object.fromEntries(names.map((n) => [n, row[n] ?? null]))));
    },
  };
}
