// The CSV builder's requests ($csv and the CSV bulk export) and its RFC 4180 reader.
import { describe, expect, it } from 'vitest';
import { csvExportPath, csvPath, parseCsv } from './csv.js';

describe('csv requests', () => {
  it('puts columns in one _fields list and filters beside it for $csv', () => {
    const path = csvPath(
      'Patient',
      ['id', ' name ', '', "telecom.where(system='phone').value"],
      [
        { param: 'gender', value: 'female' },
        { param: 'family', value: '' },
      ],
    );
    const [base, query] = path.split('?') as [string, string];
    expect(base).toBe('Patient/$csv');
    const q = new URLSearchParams(query);
    expect(q.get('_fields')).toBe("id,name,telecom.where(system='phone').value");
    expect(q.get('gender')).toBe('female');
    expect(q.has('family')).toBe(false);
  });

  it('puts filters into _typeFilter for the CSV bulk export', () => {
    const q = new URLSearchParams(
      csvExportPath(
        'Observation',
        ['id', 'code'],
        [{ param: 'code', value: 'http://loinc.org|1234-5' }],
      ).split('?')[1],
    );
    expect(q.get('_type')).toBe('Observation');
    expect(q.get('_outputFormat')).toBe('text/csv');
    expect(q.get('_fields')).toBe('id,code');
    expect(q.get('_typeFilter')).toBe('Observation?code=http%3A%2F%2Floinc.org%7C1234-5');
    expect(new URLSearchParams(csvExportPath('Patient', ['id'], []).split('?')[1]).has('_typeFilter')).toBe(
      false,
    );
  });
});

describe('parseCsv', () => {
  it('reads quoted cells, doubled quotes, commas and line breaks inside quotes, CRLF, and drops the BOM', () => {
    const text = '\uFEFFid,name,address\r\n1,"Lee, Ann","1 Main St\nApt 2"\r\n2,"say ""hi""",\r\n';
    expect(parseCsv(text)).toEqual([
      ['id', 'name', 'address'],
      ['1', 'Lee, Ann', '1 Main St\nApt 2'],
      ['2', 'say "hi"', ''],
    ]);
  });

  it('reads a last row without a line end, and nothing from an empty text', () => {
    expect(parseCsv('a,b\n1,2')).toEqual([
      ['a', 'b'],
      ['1', '2'],
    ]);
    expect(parseCsv('')).toEqual([]);
  });
});
