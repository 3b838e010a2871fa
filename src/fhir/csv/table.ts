// A CSV table of one resource type (API.md §6): the BOM and header row, then one row per resource, shared by the
// synchronous $csv operation (src/fhir/operations/csv.ts) and the CSV bulk export (src/jobs/kinds/export.ts).
import { isResourceType, structureNode } from '../definitions/index.js';
import { parseJson } from '../json/parse.js';
import { FhirError } from '../outcome.js';
import { csvField, csvRecord, formatValue } from './cells.js';
import { compileField, splitFields, type CompiledField } from './fields.js';
import type { CellResult, FhirpathPool } from './fhirpath-pool.js';

/** Rows of one synchronous $csv answer (seed §8); larger exports use `$export?_outputFormat=text/csv`. */
export const CSV_MAX_ROWS = 1000;

export const CSV_CONTENT_TYPE = 'text/csv; charset=utf-8';

const BOM = '\uFEFF';

/** Service types whose rows hold secrets or login state: never exported as CSV (API.md §6). */
const EXCLUDED = new Set(['User', 'ClientApplication', 'Login']);

/** Every R4 resource type, and Project, ProjectMembership and AsyncJob. */
export function isCsvType(type: string): boolean {
  return isResourceType(type) && !EXCLUDED.has(type);
}

export function assertCsvType(type: string): void {
  if (!isCsvType(type)) throw new FhirError('invalid', 'Unsupported resource type', 'csv.unsupported-type');
}

/** The `_fields` text (several `_fields` parameters are one comma list); 400 when it is missing or blank. */
export function fieldsParam(values: string | readonly string[] | undefined): string {
  const text = [values ?? []]
    .flat()
    .filter((v) => v.trim() !== '')
    .join(',');
  if (text === '') throw new FhirError('invalid', 'Missing _fields parameter', 'csv.missing-fields');
  return text;
}

/** A FHIRPath that failed on one resource: that cell is left empty. */
export interface CellFailure {
  entry: string;
  resource: string;
  message: string;
}

export interface CsvTable {
  /** The BOM and the header row (the trimmed entries, escaped like any cell). */
  readonly head: string;
  /** Top-level properties of the type that no column reads (storage may leave them out), or undefined. */
  readonly omit: readonly string[] | undefined;
  /**
   * The rows of resources, from their stored JSON text. Fast path columns run here; the others in the FHIRPath
   * pool, which fails the call with a 422 too-costly FhirError beyond its time or memory limit.
   */
  rows(jsons: readonly string[]): Promise<string>;
  /** How many cells failed so far, and the first failure (for one log line per request or job). */
  failures(): { count: number; first: CellFailure } | undefined;
}

/**
 * The type's top-level JSON properties (and their `_` extension siblings) that no column reads, when every column
 * reads known ones; `id` is kept for the log of failures. Properties the model does not know are never omitted.
 */
function unread(resourceType: string, columns: readonly CompiledField[]): string[] | undefined {
  const node = structureNode(resourceType);
  if (!node || !columns.every((c) => c.keys)) return undefined;
  const read = new Set(['id', ...columns.flatMap((c) => c.keys ?? [])]);
  return ['resourceType', ...node.json.keys()].flatMap((k) => [k, `_${k}`]).filter((k) => !read.has(k));
}

/**
 * Compiles `_fields` for `resourceType` (once per request or job step): 400 for an entry that does not parse or
 * names an unknown function (entries beyond the fast path are checked by the FHIRPath pool, off the event loop).
 */
export async function csvTable(
  resourceType: string,
  fields: string,
  fhirpath: FhirpathPool,
): Promise<CsvTable> {
  const columns: CompiledField[] = splitFields(fields).map((entry) => compileField(resourceType, entry));
  const slow = columns.flatMap((c) => (c.slow ? [c.slow] : []));
  await fhirpath.check(resourceType, slow);
  let count = 0;
  let first: CellFailure | undefined;
  const failed = (entry: string, resource: Record<string, unknown>, message: string): string => {
    count++;
    first ??= { entry, resource: `${resourceType}/${String(resource.id)}`, message };
    return '';
  };
  const cell = (c: CompiledField, resource: Record<string, unknown>, slowCell: CellResult): string => {
    if (!c.evaluate) {
      if (slowCell && 'error' in slowCell) return failed(c.entry, resource, slowCell.error);
      return formatValue(slowCell);
    }
    try {
      return formatValue(c.evaluate(resource));
    } catch (err) {
      return failed(c.entry, resource, (err as Error).message);
    }
  };
  return {
    head: BOM + csvRecord(columns.map((c) => c.entry)),
    omit: unread(resourceType, columns),
    async rows(jsons) {
      const slowCells = await fhirpath.rows(resourceType, slow, jsons);
      let text = '';
      for (let r = 0; r < jsons.length; r++) {
        const resource = parseJson(jsons[r] as string) as Record<string, unknown>;
        const cells = slowCells[r] ?? [];
        let s = 0;
        let line = '';
        for (let i = 0; i < columns.length; i++) {
          const c = columns[i] as CompiledField;
          if (i > 0) line += ',';
          line += csvField(cell(c, resource, c.evaluate ? undefined : cells[s++]));
        }
        text += line + '\r\n';
      }
      return text;
    },
    failures: () => (first ? { count, first } : undefined),
  };
}
