// The ViewDefinition tasks of the FHIRPath worker (csv/fhirpath-worker.ts): check a view, and run it over a page of
// stored resources, off the event loop under the pool's deadline. A view is compiled once per worker and reused while
// the same definition keeps coming (one request or export sends many pages).
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#processing-algorithm
import { parseJson } from '../json/parse.js';
import type { ViewColumnInfo } from './columns.js';
import { decimalTexts } from './decimal-text.js';
import { compileView, type CompiledView, type Row } from './compile.js';
import { viewTooCostly } from './view-definition.js';

/**
 * Cells (rows × columns) one task may send back (issue 25 point 7): the rows are copied to the server's event loop
 * in one piece, so a batch is kept small enough to copy in a few milliseconds. A batch of several resources past it
 * fails with `views.batch-too-large`, and the caller (views/batches.ts) runs it again in halves; one resource alone
 * is bounded by MAX_ROWS_PER_RESOURCE instead.
 */
export const MAX_BATCH_CELLS = 200_000;

const MAX_CACHED = 20;
/** The code of the error that asks the caller to send smaller batches. */
export const BATCH_TOO_LARGE = 'views.batch-too-large';
const cache = new Map<string, CompiledView>();

function compiled(view: unknown): CompiledView {
  const key = JSON.stringify(view);
  let c = cache.get(key);
  if (!c) {
    c = compileView(view);
    if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value as string);
    cache.set(key, c);
  }
  return c;
}

/** Compiles the view (every check of compileView); its columns. */
export function checkView(view: unknown): ViewColumnInfo[] {
  return compiled(view).columns;
}

/** The rows of each resource (stored JSON text), in order, and the written texts of their decimal cells. */
export function viewRows(
  view: unknown,
  jsons: readonly string[],
): { rows: Row[]; texts: [number, string, string][] } {
  const c = compiled(view);
  const rows: Row[] = [];
  const maxRows = Math.max(1, Math.floor(MAX_BATCH_CELLS / Math.max(1, c.columns.length)));
  for (const json of jsons) {
    for (const row of c.rows(parseJson(json))) rows.push(row);
    if (rows.length > maxRows && jsons.length > 1)
      throw viewTooCostly(
        `A batch of ${jsons.length} resources gives more than ${MAX_BATCH_CELLS} cells`,
        BATCH_TOO_LARGE,
      );
  }
  return { rows, texts: decimalTexts(rows) };
}
