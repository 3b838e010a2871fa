// What the CSV builder sends and shows: the `$csv` and CSV bulk export query strings (API.md §6, docs/api-tour.md "CSV
// export"), and an RFC 4180 reader for the preview table.

export interface Filter {
  param: string;
  value: string;
}

/** `_fields` is one comma-separated list; empty entries are left out. */
export function fieldsParam(columns: readonly string[]): string {
  return columns
    .map((c) => c.trim())
    .filter((c) => c !== '')
    .join(',');
}

/** The search part of the request: each filter with a parameter and a value. */
export function filterParams(filters: readonly Filter[]): URLSearchParams {
  const q = new URLSearchParams();
  for (const f of filters) if (f.param.trim() && f.value.trim()) q.append(f.param.trim(), f.value.trim());
  return q;
}

/** `{Type}/$csv?_fields=…&filters` relative to the FHIR base. */
export function csvPath(type: string, columns: readonly string[], filters: readonly Filter[]): string {
  const q = new URLSearchParams({ _fields: fieldsParam(columns) });
  for (const [k, v] of filterParams(filters)) q.append(k, v);
  return `${type}/$csv?${q.toString()}`;
}

/**
 * The CSV bulk export of the same columns and filters: `$export?_type=T&_outputFormat=text/csv&_fields=…`, the
 * filters as one `_typeFilter` (search parameters go there, not beside `_fields`).
 */
export function csvExportPath(type: string, columns: readonly string[], filters: readonly Filter[]): string {
  const q = new URLSearchParams({ _type: type, _outputFormat: 'text/csv', _fields: fieldsParam(columns) });
  const search = filterParams(filters).toString();
  if (search) q.set('_typeFilter', `${type}?${search}`);
  return `$export?${q.toString()}`;
}

/** RFC 4180 rows of a CSV text (a leading BOM dropped; CRLF or LF line ends; quoted cells with doubled quotes). */
export function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  for (; i < text.length; i++) {
    const ch = text[i] as string;
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') {
          cell += '"';
          i++;
        } else quoted = false;
      } else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') {
      row.push(cell);
      cell = '';
    } else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i++;
      row.push(cell);
      rows.push(row);
      row = [];
      cell = '';
    } else cell += ch;
  }
  if (cell !== '' || row.length) {
    row.push(cell);
    rows.push(row);
  }
  return rows;
}
