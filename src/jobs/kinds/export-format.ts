// How exported rows become file text (https://hl7.org/fhir/uv/bulkdata/export.html): NDJSON lines as stored, or cut
// down by `_elements` (src/fhir/search/elements.ts); or the CSV rows of $csv (src/fhir/csv/table.ts) after a BOM and
// header row at the start of each file.
import type { FhirpathPool } from '../../fhir/csv/fhirpath-pool.js';
import { csvTable, type CellFailure } from '../../fhir/csv/table.js';
import { outcome, type OperationOutcome } from '../../fhir/outcome.js';
import { applyElements } from '../../fhir/search/elements.js';
import type { ExportParams } from './export.js';
import { elementsOf } from './export-query.js';
import { concatUtf8 } from '../../storage/files.js';

export type Row = { rid: number; json: string };

/** How rows become file text. */
export interface FileFormat {
  ext: 'ndjson' | 'csv';
  /** Written when a file begins (CSV: BOM and header row), so that a type without rows has a file too. */
  head?: string;
  /** CSV: top-level properties left in storage (see SearchRequest.omit). */
  omit?: readonly string[];
  /**
   * The text of `rows` of `type` as UTF-8 bytes (joined into one string, a page would be megabytes on V8's
   * large-object space, which only a full collection frees); a resource that cannot be written is left out and reported to `fail`. */
  text(type: string, rows: readonly Row[], fail: (o: OperationOutcome) => void): Promise<Buffer>;
  failures(): { count: number; first: CellFailure } | undefined;
}

function ndjson(p: ExportParams): FileFormat {
  return {
    ext: 'ndjson',
    text: async (type, rows, fail) => {
      const elements = elementsOf(p, type);
      if (!elements)
        return concatUtf8(
          rows.map((r) => r.json),
          true,
        );
      const lines: string[] = [];
      for (const r of rows) {
        try {
          lines.push(applyElements(r.json, elements));
        } catch (err) {
          fail(
            outcome(
              'error',
              'exception',
              `${type} (rid ${r.rid}) was not exported: ${(err as Error).message}`,
            ),
          );
        }
      }
      return concatUtf8(lines, true);
    },
    failures: () => undefined,
  };
}

/** CSV: FHIRPath beyond the fast path runs in the worker pool; a page beyond its time limit fails the job. */
export async function fileFormat(p: ExportParams, fhirpath: () => FhirpathPool): Promise<FileFormat> {
  if (p.format !== 'csv') return ndjson(p);
  const table = await csvTable(p.types[0] as string, p.fields ?? '', fhirpath());
  return {
    ext: 'csv',
    head: table.head,
    ...(table.omit ? { omit: table.omit } : {}),
    text: async (_type, rows) => Buffer.from(await table.rows(rows.map((r) => r.json)), 'utf8'),
    failures: table.failures,
  };
}
