// The columns of a view in the specification's order (a select's own columns, then its nested selects' depth-first,
// then its unionAll's), with names unique across the view and every unionAll branch giving the same columns.
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#column-ordering and #validate-columns-entry-point
import { viewError, type ViewColumn, type ViewSelect } from './view-definition.js';

/** What a reader of the rows needs to know about a column. */
export interface ViewColumnInfo {
  name: string;
  /** The column's declared FHIR type (`string`, `integer`, ...), when the view gives one. */
  type?: string;
  /** Cells are arrays (`collection: true`). */
  collection: boolean;
  description?: string;
  tag?: { name: string; value: string }[];
}

function info(c: ViewColumn): ViewColumnInfo {
  return {
    name: c.name,
    ...(c.type !== undefined ? { type: c.type } : {}),
    collection: c.collection === true,
    ...(c.description !== undefined ? { description: c.description } : {}),
    ...(c.tag ? { tag: c.tag } : {}),
  };
}

const describe = (cols: ViewColumnInfo[]): string => `(${cols.map((c) => c.name).join(', ')})`;

function sameColumns(a: ViewColumnInfo[], b: ViewColumnInfo[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((c, i) => {
    const d = b[i] as ViewColumnInfo;
    if (c.name !== d.name || c.collection !== d.collection) return false;
    return c.type === undefined || d.type === undefined || c.type === d.type;
  });
}

/** ValidateColumns(S, C): the columns `s` adds to those in `seen` (which it extends); throws on a duplicate or mismatch. */
function columnsOf(s: ViewSelect, element: string, seen: Set<string>): ViewColumnInfo[] {
  const out: ViewColumnInfo[] = [];
  const add = (c: ViewColumnInfo, at: string): void => {
    if (seen.has(c.name))
      throw viewError(`Column ${c.name} is defined twice (${at})`, 'views.duplicate-column', at);
    seen.add(c.name);
    out.push(c);
  };
  (s.column ?? []).forEach((c, i) => add(info(c), `${element}.column[${i}]`));
  (s.select ?? []).forEach((sel, i) => out.push(...columnsOf(sel, `${element}.select[${i}]`, seen)));
  const branches = s.unionAll ?? [];
  if (branches.length > 0) {
    const before = new Set(seen);
    const first = columnsOf(branches[0] as ViewSelect, `${element}.unionAll[0]`, seen);
    branches.slice(1).forEach((b, i) => {
      const at = `${element}.unionAll[${i + 1}]`;
      const cols = columnsOf(b, at, new Set(before));
      if (!sameColumns(first, cols))
        throw viewError(
          `The unionAll branches of ${element} give different columns: ${describe(first)} and ${describe(cols)} (${at})`,
          'views.union-mismatch',
          at,
        );
    });
    out.push(...first);
  }
  return out;
}

/** The columns of a select structure and all it holds, in output order; throws a 422 on duplicates or mismatches. */
export function selectColumns(
  s: ViewSelect,
  element: string,
  seen: Set<string> = new Set(),
): ViewColumnInfo[] {
  return columnsOf(s, element, seen);
}

/** The columns of the whole view, in output order. */
export function viewColumns(select: readonly ViewSelect[]): ViewColumnInfo[] {
  const seen = new Set<string>();
  return select.flatMap((s, i) => columnsOf(s, `ViewDefinition.select[${i}]`, seen));
}
