// The ViewDefinition tasks of the FHIRPath worker (csv/fhirpath-worker.ts): check a view, and run it over a page of
// stored resources, off the event loop under the pool's deadline. A view is compiled once per worker and reused while
// the same definition keeps coming (one request or export sends many pages).
// https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html#processing-algorithm
import { parseJson } from '../json/parse.js';
import type { ViewColumnInfo } from './columns.js';
import { decimalTexts } from './decimal-text.js';
import { compileView, type CompiledView, type Row } from './compile.js';

const MAX_CACHED = 20;
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
  for (const json of jsons) for (const row of c.rows(parseJson(json))) rows.push(row);
  return { rows, texts: decimalTexts(rows) };
}
