// The writers of a view's rows: CSV (RFC 4180, values unchanged, header optional, collections as JSON text), NDJSON
// and a JSON array, keys in column order (API.md §7).
import { describe, expect, it } from 'vitest';
import type { ViewColumnInfo } from './columns.js';
import { cellText, rowsToCsv, rowsToJson, rowsToNdjson } from './output.js';

const columns: ViewColumnInfo[] = [
  { name: 'id', collection: false },
  { name: 'note', collection: false },
  { name: 'given', collection: true },
  { name: 'n', collection: false },
  { name: 'ok', collection: false },
];
const rows = [
  { note: '=SUM(A1:A2)', id: 'p1', given: ['Ann', 'Marie'], n: 1.5, ok: true },
  { id: 'p2', note: 'say "hi", then\nleave', given: [], n: null, ok: false },
];

describe('view rows as CSV', () => {
  it('keeps values unchanged (no formula escape), quotes per RFC 4180, writes collections as JSON', () => {
    expect(rowsToCsv(columns, rows)).toBe(
      'id,note,given,n,ok\r\n' +
        'p1,=SUM(A1:A2),"[""Ann"",""Marie""]",1.5,true\r\n' +
        'p2,"say ""hi"", then\nleave",[],,false\r\n',
    );
  });

  it('leaves the header out when asked', () => {
    expect(rowsToCsv(columns, rows.slice(0, 1), { header: false })).toBe(
      'p1,=SUM(A1:A2),"[""Ann"",""Marie""]",1.5,true\r\n',
    );
    expect(rowsToCsv(columns, [], { header: false })).toBe('');
  });

  it('cell texts: null empty, strings as they are, objects as JSON', () => {
    expect(cellText(null)).toBe('');
    expect(cellText('-1')).toBe('-1');
    expect(cellText(0)).toBe('0');
    expect(cellText({ family: 'Lee' })).toBe('{"family":"Lee"}');
  });
});

describe('view rows as NDJSON and JSON', () => {
  it('one object a line, keys in column order, missing cells null', () => {
    expect(rowsToNdjson(columns, [{ id: 'p3' }, rows[0] as Record<string, unknown>])).toBe(
      '{"id":"p3","note":null,"given":null,"n":null,"ok":null}\n' +
        '{"id":"p1","note":"=SUM(A1:A2)","given":["Ann","Marie"],"n":1.5,"ok":true}\n',
    );
    expect(rowsToNdjson(columns, [])).toBe('');
  });

  it('a JSON array of row objects', () => {
    expect(JSON.parse(rowsToJson(columns, rows))).toEqual([
      { id: 'p1', note: '=SUM(A1:A2)', given: ['Ann', 'Marie'], n: 1.5, ok: true },
      { id: 'p2', note: 'say "hi", then\nleave', given: [], n: null, ok: false },
    ]);
    expect(Object.keys((JSON.parse(rowsToJson(columns, rows)) as object[])[0] as object)).toEqual(
      columns.map((c) => c.name),
    );
    expect(rowsToJson(columns, [])).toBe('[]');
  });
});
