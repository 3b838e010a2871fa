import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import { rowsToParquet, writeParquet } from './parquet.js';

describe('rowsToParquet', () => {
  it('writes typed columns that a Parquet reader reads back', async () => {
    const columns = [
      { name: 'id', type: 'id', collection: false },
      { name: 'active', type: 'boolean', collection: false },
      { name: 'n', type: 'integer', collection: false },
      { name: 'x', type: 'decimal', collection: false },
      { name: 'given', type: 'string', collection: true },
      { name: 'other', collection: false },
    ];
    const rows = [
      { id: 'a', active: true, n: 3, x: 1.5, given: ['Ann', 'Marie'], other: '=1+1' },
      { id: 'b', active: null, n: null, x: null, given: [], other: null },
    ];
    const bytes = rowsToParquet(columns, rows);
    expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe('PAR1');
    const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const back = await parquetReadObjects({ file: buffer });
    expect(back).toEqual([
      { id: 'a', active: true, n: 3, x: 1.5, given: ['Ann', 'Marie'], other: '=1+1' },
      { id: 'b', active: null, n: null, x: null, given: [], other: null },
    ]);
  });
});

describe('writeParquet', () => {
  it('writes one row group per group of rows, handing the bytes over as it goes', async () => {
    const columns = [
      { name: 'id', type: 'id', collection: false },
      { name: 'n', type: 'integer', collection: false },
    ];
    async function* groups() {
      for (let g = 0; g < 3; g++)
        yield Array.from({ length: 4 }, (_, i) => ({ id: `r${g}-${i}`, n: g * 4 + i }));
    }
    const parts: Uint8Array[] = [];
    expect(await writeParquet(columns, groups(), async (b) => void parts.push(b))).toBe(12);
    expect(parts.length).toBeGreaterThanOrEqual(4);
    const bytes = Buffer.concat(parts);
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    expect(parquetMetadata(file).row_groups.map((g) => Number(g.num_rows))).toEqual([4, 4, 4]);
    const back = (await parquetReadObjects({ file })) as { n: number }[];
    expect(back.map((r) => r.n)).toEqual(Array.from({ length: 12 }, (_, i) => i));
  });
});
