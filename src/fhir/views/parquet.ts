// A view's rows as an Apache Parquet file (the `parquet` `_format` of `$viewdefinition-export`, API.md §7), written by
// hyparquet-writer: by writeParquet one row group at a time as the rows come (issue 25 point 7: a view of a million
// rows never has its rows, its columns or its file in memory at once), or whole by rowsToParquet. Column types follow the view's declared FHIR types: boolean → BOOLEAN, the integer types → INT32,
// decimal → DOUBLE, a collection → JSON text; anything else (and an untyped column) → UTF-8 STRING, values unchanged.
// https://parquet.apache.org/docs/file-format/
import { setImmediate as yieldLoop } from 'node:timers/promises';
import { ByteWriter, ParquetWriter, parquetWriteBuffer, schemaFromColumnData } from 'hyparquet-writer';
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

/** The columns of a group of rows, typed for Parquet. */
function columnData(columns: readonly ViewColumnInfo[], rows: readonly Row[]) {
  return columns.map((c) => {
    const type = parquetType(c);
    return { name: c.name, type, data: rows.map((r) => cell(type, r[c.name])) };
  });
}

/**
 * Writes a Parquet file from groups of rows, one row group per group, handing its bytes to `sink` as each group is
 * encoded (header and first group, then each group, then the page indexes and the footer) and yielding the event
 * loop between groups: what is held at a time is one group, its columns and its encoded bytes. Rows of JSON-typed
 * cells are as `cell` gives them.
 */
export async function writeParquet(
  columns: readonly ViewColumnInfo[],
  groups: AsyncIterable<readonly Row[]>,
  sink: (bytes: Uint8Array) => Promise<void>,
): Promise<number> {
  const schema = schemaFromColumnData({ columnData: columnData(columns, []) as never });
  const writer = new ByteWriter();
  const pq = new ParquetWriter({ writer, schema });
  // The bytes written since the last hand-over, and the writer's buffer emptied (its `offset` keeps counting the
  // file's bytes, which the footer's offsets are): the way hyparquet-writer's own file writer flushes.
  const drain = async (): Promise<void> => {
    if (writer.index === 0) return;
    const bytes = writer.getBytes().slice();
    writer.index = 0;
    await sink(bytes);
  };
  let rows = 0;
  for await (const group of groups) {
    if (group.length === 0) continue;
    // The schema was given; the columns carry no type of their own (hyparquet-writer refuses both).
    const data = columnData(columns, group).map(({ name, data }) => ({ name, data }));
    await pq.write({ columnData: data as never, rowGroupSize: group.length });
    rows += group.length;
    await drain();
    await yieldLoop();
  }
  await pq.finish();
  await drain();
  return rows;
}
