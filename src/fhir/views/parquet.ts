// A view's rows as an Apache Parquet file (the `parquet` `_format` of `$viewdefinition-export`, API.md §7), written by
// hyparquet-writer. Column types follow the view's declared FHIR types: boolean → BOOLEAN, the integer types → INT32,
// decimal → DOUBLE, a collection → JSON text; anything else (and an untyped column) → UTF-8 STRING, values unchanged.
// https://parquet.apache.org/docs/file-format/
import { parquetWriteBuffer } from 'hyparquet-writer';
import type { ViewColumnInfo } from './columns.js';
import type { Row } from './compile.js';

type BasicType = 'BOOLEAN' | 'INT32' | 'DOUBLE' | 'STRING' | 'JSON';

function parquetType(c: ViewColumnInfo): BasicType {
  if (c.collection) return 'JSON';
  switch (c.type) {
    case 'boolean':
      return 'BOOLEAN';
    case 'integer':
    case 'positiveInt':
    case 'unsignedInt':
      return 'INT32';
    case 'decimal':
      return 'DOUBLE';
    default:
      return 'STRING';
  }
}

/** The value as the column's Parquet type stores it (null stays null). */
function cell(type: BasicType, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  switch (type) {
    case 'BOOLEAN':
      return typeof v === 'boolean' ? v : v === 'true';
    case 'INT32':
    case 'DOUBLE':
      return typeof v === 'number' ? v : Number(v);
    case 'JSON':
      return v;
    default:
      return typeof v === 'string' ? v : JSON.stringify(v);
  }
}

/** The rows as the bytes of one Parquet file (one row group per 100,000 rows). */
export function rowsToParquet(columns: readonly ViewColumnInfo[], rows: readonly Row[]): Uint8Array {
  const columnData = columns.map((c) => {
    const type = parquetType(c);
    return { name: c.name, type, data: rows.map((r) => cell(type, r[c.name])) };
  });
  return new Uint8Array(parquetWriteBuffer({ columnData: columnData as never, rowGroupSize: 100_000 }));
}
