import { parquetReadObjects } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import { rowsToParquet } from './parquet.js';

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
