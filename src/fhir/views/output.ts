// A view's rows written in the `_format`s of $viewdefinition-run (API.md §7): CSV (RFC 4180, values unchanged, header
// row optional), NDJSON (one JSON object a line) and a JSON array. Pure; the writer is the one `$csv` uses.
// https://sql-on-fhir.org/ig/OperationDefinition-ViewDefinitionRun.html and https://www.rfc-editor.org/rfc/rfc4180
import { csvRecord } from '../csv/cells.js';
import { copyRawNumbers, rawNumberText } from '../json/raw-numbers.js';
import { stringifyJson } from '../json/stringify.js';
import type { ViewColumnInfo } from './columns.js';
import type { Row } from './compile.js';

/**
 * The CSV text of one cell: empty for null, strings as they are, numbers and booleans as JSON writes them, and a
 * collection (or an object, e.g. a HumanName column) as its JSON text, `["a","b"]`, so that nothing is lost.
 */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

/** The CSV header record: the column names. */
export function csvHeader(columns: readonly ViewColumnInfo[]): string {
  return csvRecord(
    columns.map((c) => c.name),
    { escapeFormulas: false },
  );
}

/** One row as a CSV record, cells in column order. */
export function csvRow(columns: readonly ViewColumnInfo[], row: Row): string {
  return csvRecord(
    columns.map((c) => rawNumberText(row, c.name) ?? cellText(row[c.name])),
    { escapeFormulas: false },
  );
}

/** The rows as CSV text; with `header` (default true) the column names first. Lines end with CRLF (RFC 4180 §2). */
export function rowsToCsv(
  columns: readonly ViewColumnInfo[],
  rows: readonly Row[],
  opts: { header?: boolean } = {},
): string {
  const out = opts.header === false ? [] : [csvHeader(columns)];
  for (const row of rows) out.push(csvRow(columns, row));
  return out.join('');
}

/** One row as an NDJSON line (with its `\n`), keys in column order. */
export function ndjsonLine(columns: readonly ViewColumnInfo[], row: Row): string {
  return stringifyJson(ordered(columns, row)) + '\n';
}

/** The rows as NDJSON text. */
export function rowsToNdjson(columns: readonly ViewColumnInfo[], rows: readonly Row[]): string {
  return rows.map((r) => ndjsonLine(columns, r)).join('');
}

/** The rows as a JSON array of row objects. */
export function rowsToJson(columns: readonly ViewColumnInfo[], rows: readonly Row[]): string {
  return stringifyJson(rows.map((r) => ordered(columns, r)));
}

/** The row with exactly the view's columns, in order, missing cells null. */
function ordered(columns: readonly ViewColumnInfo[], row: Row): Row {
  const out: Row = {};
  for (const c of columns) out[c.name] = row[c.name] ?? null;
  copyRawNumbers(row, out);
  return out;
}
