// A CSV table of one resource type (API.md §6): the BOM and header row, then one row per resource, shared by the
// synchronous $csv operation (src/fhir/operations/csv.ts) and the CSV bulk export (src/jobs/kinds/export.ts).
import { isResourceType, structureNode } from '../definitions/index.js';
import { FhirError } from '../outcome.js';
import { csvField, csvRecord, formatValue } from './cells.js';
import { compileField, splitFields, type CompiledField } from './fields.js';

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
  /** The row of one resource, from its stored JSON text. */
  row(json: string): string;
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

/** Compiles `_fields` for `resourceType` (once per request or job step); 400 for an entry that does not parse. */
export function csvTable(resourceType: string, fields: string): CsvTable {
  const columns: CompiledField[] = splitFields(fields).map((entry) => compileField(resourceType, entry));
  let count = 0;
  let first: CellFailure | undefined;
  const cell = (c: CompiledField, resource: Record<string, unknown>): string => {
    try {
      return formatValue(c.evaluate(resource));
    } catch (err) {
      count++;
      first ??= {
        entry: c.entry,
        resource: `${resourceType}/${String(resource.id)}`,
        message: (err as Error).message,
      };
      return '';
    }
  };
  return {
    head: BOM + csvRecord(columns.map((c) => c.entry)),
    omit: unread(resourceType, columns),
    row(json) {
      const resource = JSON.parse(json) as Record<string, unknown>;
      let line = '';
      for (let i = 0; i < columns.length; i++) {
        if (i > 0) line += ',';
        line += csvField(cell(columns[i] as CompiledField, resource));
      }
      return line + '\r\n';
    },
    failures: () => (first ? { count, first } : undefined),
  };
}
