// cells.ts is pure: every formatting rule of API.md §6, CSV-injection escaping and RFC 4180 quoting.
import { describe, expect, it } from 'vitest';
import { csvField, csvRecord, escapeInjection, formatValue, guessType, quoteField } from './cells.js';

const cell = (type: string | undefined, value: unknown): string => formatValue({ type, value });

describe('formatValue', () => {
  it('HumanName: prefix, given, family, suffix; text when it has no parts', () => {
    expect(cell('HumanName', { family: 'Chalmers', given: ['Peter', 'James'] })).toBe('Peter James Chalmers');
    expect(
      cell('HumanName', { prefix: ['Dr.', 'Prof.'], given: ['Ann'], family: 'Lee', suffix: ['PhD', 'MD'] }),
    ).toBe('Dr. Prof. Ann Lee PhD MD');
    expect(cell('HumanName', { family: 'Solo' })).toBe('Solo');
    expect(cell('HumanName', { given: ['Only'], text: 'ignored' })).toBe('Only');
    expect(cell('HumanName', { text: 'Jim Chalmers' })).toBe('Jim Chalmers');
    expect(cell('HumanName', { use: 'official' })).toBe('');
    expect(cell('HumanName', { given: ['', 'A'], family: '' })).toBe('A');
  });

  it('Address: lines, city, state postalCode, country; parts left out; text when none', () => {
    expect(
      cell('Address', {
        line: ['1 Main St', 'Apt 2'],
        city: 'Springfield',
        state: 'IL',
        postalCode: '62701',
        country: 'USA',
      }),
    ).toBe('1 Main St, Apt 2, Springfield, IL 62701, USA');
    expect(cell('Address', { city: 'Paris', country: 'France' })).toBe('Paris, France');
    expect(cell('Address', { line: ['x'], postalCode: '12345' })).toBe('x, 12345');
    expect(cell('Address', { state: 'IL' })).toBe('IL');
    expect(cell('Address', { text: '221B Baker Street', use: 'home' })).toBe('221B Baker Street');
    expect(cell('Address', { use: 'home' })).toBe('');
  });

  it('ContactPoint and Identifier: value', () => {
    expect(cell('ContactPoint', { system: 'phone', value: '555-0100' })).toBe('555-0100');
    expect(cell('ContactPoint', { system: 'phone' })).toBe('');
    expect(cell('Identifier', { system: 'urn:x', value: 'MRN-1' })).toBe('MRN-1');
  });

  it('Reference: display, else reference', () => {
    expect(cell('Reference', { reference: 'Patient/1', display: 'Pat' })).toBe('Pat');
    expect(cell('Reference', { reference: 'Patient/1' })).toBe('Patient/1');
    expect(cell('Reference', {})).toBe('');
  });

  it('CodeableConcept: text, else the first coding display, else its code', () => {
    const coding = [
      { system: 's', code: 'c1', display: 'One' },
      { code: 'c2', display: 'Two' },
    ];
    expect(cell('CodeableConcept', { text: 'Text', coding })).toBe('Text');
    expect(cell('CodeableConcept', { coding })).toBe('One');
    expect(cell('CodeableConcept', { coding: [{ system: 's', code: 'c1' }, { display: 'Two' }] })).toBe('c1');
    expect(cell('CodeableConcept', { coding: [] })).toBe('');
  });

  it('Coding: display, else code', () => {
    expect(cell('Coding', { code: 'M', display: 'Married' })).toBe('Married');
    expect(cell('Coding', { system: 's', code: 'M' })).toBe('M');
  });

  it('Quantity and its kinds: value unit (unit, else code)', () => {
    expect(cell('Quantity', { value: 72.5, unit: 'kg', code: 'kg' })).toBe('72.5 kg');
    expect(cell('Quantity', { value: 3, code: 'mg' })).toBe('3 mg');
    expect(cell('Quantity', { value: 3 })).toBe('3');
    expect(cell('Age', { value: 42, unit: 'a' })).toBe('42 a');
    expect(cell('Duration', { value: 5, code: 'min' })).toBe('5 min');
  });

  it('Period: start/end', () => {
    expect(cell('Period', { start: '2020-01-01', end: '2020-12-31' })).toBe('2020-01-01/2020-12-31');
    expect(cell('Period', { start: '2020-01-01' })).toBe('2020-01-01/');
    expect(cell('Period', { end: '2020-12-31' })).toBe('/2020-12-31');
    expect(cell('Period', {})).toBe('');
  });

  it('primitives as they are; no value and other complex types empty', () => {
    expect(cell('string', 'héllo wörld ✓')).toBe('héllo wörld ✓');
    expect(cell('date', '1970-01-01')).toBe('1970-01-01');
    expect(cell('decimal', 1.5)).toBe('1.5');
    expect(cell('integer', -3)).toBe('-3');
    expect(cell('boolean', true)).toBe('true');
    expect(cell('boolean', false)).toBe('false');
    expect(formatValue(undefined)).toBe('');
    expect(cell('Meta', { lastUpdated: '2020' })).toBe('');
    expect(cell('Money', { value: 1, currency: 'EUR' })).toBe('');
    expect(cell('Patient', { resourceType: 'Patient' })).toBe('');
    expect(cell('BackboneElement', { name: { family: 'x' } })).toBe('');
  });

  it('values the engine could not type: by shape', () => {
    expect(cell(undefined, { reference: 'User/1', display: 'U' })).toBe('U');
    expect(cell('Object', { family: 'F', given: ['G'] })).toBe('G F');
    expect(cell(undefined, { coding: [{ code: 'x' }] })).toBe('x');
    expect(cell(undefined, { city: 'Rome' })).toBe('Rome');
    expect(cell(undefined, { value: 2, unit: 'h' })).toBe('2 h');
    expect(cell(undefined, { system: 'phone', value: '1' })).toBe('1');
    expect(cell(undefined, { code: 'c' })).toBe('c');
    expect(cell(undefined, { start: 'a' })).toBe('a/');
    expect(guessType({ url: 'x' })).toBeUndefined();
    expect(cell(undefined, { url: 'x' })).toBe('');
  });
});

describe('escaping and quoting', () => {
  it('a leading =, +, -, @, tab or CR gets a leading quote', () => {
    for (const s of ['=1+1', '+1', '-3', '@SUM(A1)', '\tx', '\rx']) expect(escapeInjection(s)).toBe(`'${s}`);
    for (const s of ['1-1', "'=1", ' =1', 'a=b', '']) expect(escapeInjection(s)).toBe(s);
  });

  it('RFC 4180: comma, double quote, CR or LF → quoted, quotes doubled', () => {
    expect(quoteField('a,b')).toBe('"a,b"');
    expect(quoteField('say "hi"')).toBe('"say ""hi"""');
    expect(quoteField('line1\nline2')).toBe('"line1\nline2"');
    expect(quoteField('a\rb')).toBe('"a\rb"');
    expect(quoteField("plain 'single' ;")).toBe("plain 'single' ;");
  });

  it('escapes before quoting, and records end with CRLF', () => {
    expect(csvField('=HYPERLINK("x")')).toBe('"\'=HYPERLINK(""x"")"');
    expect(csvField('\rx')).toBe('"\'\rx"');
    expect(csvField('-1')).toBe("'-1");
    expect(csvRecord(['a', 'b,c', ''])).toBe('a,"b,c",\r\n');
  });

  it('a view record (escapeFormulas: false) keeps values unchanged, RFC 4180 quoting only (API.md §7)', () => {
    expect(csvRecord(['=1+1', '-1', '@x,y', 'a"b'], { escapeFormulas: false })).toBe(
      '=1+1,-1,"@x,y","a""b"\r\n',
    );
    expect(csvRecord(['=1+1'], { escapeFormulas: true })).toBe("'=1+1\r\n");
  });
});
