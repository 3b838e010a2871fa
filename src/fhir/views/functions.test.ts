// The view functions (getResourceKey, getReferenceKey, join, lowBoundary/highBoundary) and the FHIRPath functions
// views rely on (ofType, extension, first, empty), plus constants as typed literals.
import { describe, expect, it } from 'vitest';
import { compileView, type Row } from './compile.js';
import { constantLiteral, substituteConstants } from './constants.js';
import { parseJson } from '../json/parse.js';
import { rawNumberText } from '../json/raw-numbers.js';

const one = (
  resource: Record<string, unknown>,
  path: string,
  extra: Record<string, unknown> = {},
): unknown => {
  const v = compileView({
    resource: resource.resourceType,
    select: [{ column: [{ name: 'v', path }] }],
    ...extra,
  });
  return (v.rows(resource)[0] as Row).v;
};

const patient = {
  resourceType: 'Patient',
  id: 'p1',
  birthDate: '1970-06',
  gender: 'female',
  name: [{ family: 'Lee', given: ['Ann', 'Marie'] }],
  generalPractitioner: [
    { reference: 'Practitioner/dr1' },
    { reference: 'https://other.example/fhir/Organization/o1' },
  ],
  link: [{ other: { reference: 'Patient/p1' } }],
  extension: [
    { url: 'http://example.org/race', extension: [{ url: 'ombCategory', valueCoding: { code: '2106-3' } }] },
    { url: 'http://example.org/nick', valueString: 'Annie' },
  ],
};

describe('view functions', () => {
  it('getResourceKey() is the id; getReferenceKey() the id of a reference, empty for another type', () => {
    expect(one(patient, 'getResourceKey()')).toBe('p1');
    expect(one(patient, 'getResourceKey() = link.other.getReferenceKey()')).toBe(true);
    expect(one(patient, 'getResourceKey() = link.other.getReferenceKey(Patient)')).toBe(true);
    expect(one(patient, 'link.other.getReferenceKey(Observation)')).toBe(null);
    expect(one(patient, 'generalPractitioner.getReferenceKey(Organization)')).toBe('o1');
    expect(one(patient, 'generalPractitioner.getReferenceKey(Practitioner)')).toBe('dr1');
    expect(one({ ...patient, link: [{ other: { reference: '#c1' } }] }, 'link.other.getReferenceKey()')).toBe(
      null,
    );
  });

  it('join([separator]): the empty collection gives the empty string', () => {
    expect(one(patient, "name.given.join(', ')")).toBe('Ann, Marie');
    expect(one(patient, 'name.given.join()')).toBe('AnnMarie');
    expect(one(patient, "telecom.value.join(',')")).toBe('');
  });

  it('ofType, extension(url), first, empty', () => {
    expect(one(patient, "extension('http://example.org/nick').value.ofType(string)")).toBe('Annie');
    expect(
      one(
        patient,
        "extension('http://example.org/race').extension('ombCategory').value.ofType(Coding).code.first()",
      ),
    ).toBe('2106-3');
    expect(one(patient, 'name.given.first()')).toBe('Ann');
    expect(one(patient, 'telecom.empty()')).toBe(true);
  });

  it('lowBoundary/highBoundary: dates, times, and DateTimes without timezone at +14:00 / -12:00', () => {
    expect(one(patient, 'birthDate.lowBoundary()')).toBe('1970-06-01');
    expect(one(patient, 'birthDate.highBoundary()')).toBe('1970-06-30');
    const obs = (value: Record<string, unknown>): Record<string, unknown> => ({
      resourceType: 'Observation',
      id: 'o',
      ...value,
    });
    expect(one(obs({ valueDateTime: '2010-10-10' }), 'value.ofType(dateTime).lowBoundary()')).toBe(
      '2010-10-10T00:00:00.000+14:00',
    );
    expect(one(obs({ valueDateTime: '2010-10-10' }), 'value.ofType(dateTime).highBoundary()')).toBe(
      '2010-10-10T23:59:59.999-12:00',
    );
    expect(one(obs({ valueDateTime: '2010-10-10T10:00:00Z' }), 'value.ofType(dateTime).lowBoundary()')).toBe(
      '2010-10-10T10:00:00.000Z',
    );
    expect(one(obs({ valueTime: '12:34:00' }), 'value.ofType(time).highBoundary()')).toBe('12:34:00.999');
    expect(one(obs({ valueQuantity: { value: 1.5 } }), 'value.ofType(Quantity).value.lowBoundary()')).toBe(
      1.45,
    );
  });

  it("a decimal's written precision counts when the caller keeps its text (numberText)", () => {
    const quantity = { value: 1 };
    const obs = { resourceType: 'Observation', id: 'o', status: 'final', valueQuantity: quantity };
    const view = {
      resource: 'Observation',
      select: [{ column: [{ name: 'low', path: 'value.ofType(Quantity).value.lowBoundary()' }] }],
    };
    expect(compileView(view).rows(obs)).toEqual([{ low: 0.5 }]);
    const numberText = (holder: object, key: string): string | undefined =>
      holder === quantity && key === 'value' ? '1.0' : undefined;
    expect(compileView(view, { numberText }).rows(obs)).toEqual([{ low: 0.95 }]);
  });

  it("decimal boundaries: the written precision (fn_boundary), exact text, a precision argument's digits", () => {
    const texts = (value: string, low: string, high: string): [string, string] => {
      const obs = parseJson(
        `{"resourceType":"Observation","id":"o","status":"final","code":{},"valueQuantity":{"value":${value}}}`,
      );
      const view = {
        resource: 'Observation',
        select: [
          {
            column: [
              { name: 'low', path: `value.ofType(Quantity).value.${low}` },
              { name: 'high', path: `value.ofType(Quantity).value.${high}` },
            ],
          },
        ],
      };
      const row = compileView(view).rows(obs)[0] as Row;
      return [rawNumberText(row, 'low') ?? String(row.low), rawNumberText(row, 'high') ?? String(row.high)];
    };
    expect(texts('1.0', 'lowBoundary()', 'highBoundary()')).toEqual(['0.95', '1.05']);
    expect(texts('1', 'lowBoundary()', 'highBoundary()')).toEqual(['0.5', '1.5']);
    expect(texts('1.50', 'lowBoundary()', 'highBoundary()')).toEqual(['1.495', '1.505']);
    expect(texts('-1.587', 'lowBoundary()', 'highBoundary()')).toEqual(['-1.5875', '-1.5865']);
    expect(texts('0.010', 'lowBoundary()', 'highBoundary()')).toEqual(['0.0095', '0.0105']);
    expect(texts('1E-7', 'lowBoundary()', 'highBoundary()')).toEqual(['0.00000005', '0.00000015']);
    expect(texts('12345678901234567890.12', 'lowBoundary()', 'highBoundary()')).toEqual([
      '12345678901234567890.115',
      '12345678901234567890.125',
    ]);
    // FHIRPath's examples: 1.587.lowBoundary(2) = 1.58, 1.587.highBoundary(6) = 1.587500; 0 gives an integer.
    expect(texts('1.587', 'lowBoundary(2)', 'highBoundary(6)')).toEqual(['1.58', '1.587500']);
    expect(texts('-1.587', 'lowBoundary(2)', 'highBoundary(0)')).toEqual(['-1.59', '-1']);
    expect(texts('-0.3', 'lowBoundary(1)', 'highBoundary(0)')).toEqual(['-0.4', '0']);
    // A negative precision, or one past a decimal's eight digits, gives no value.
    expect(texts('1.0', 'lowBoundary(-1)', 'highBoundary(9)')).toEqual(['null', 'null']);
  });
});

describe('constants', () => {
  it('are typed literals: a date compares as a date, strings are escaped', () => {
    expect(constantLiteral({ name: 'd', type: 'Date', value: '1970-06' })).toBe('@1970-06');
    expect(constantLiteral({ name: 'd', type: 'DateTime', value: '2015' })).toBe('@2015T');
    expect(constantLiteral({ name: 'd', type: 'Instant', value: '2015-02-07T13:28:17.239+02:00' })).toBe(
      '@2015-02-07T13:28:17.239+02:00',
    );
    expect(constantLiteral({ name: 't', type: 'Time', value: '18:12:00' })).toBe('@T18:12:00');
    expect(constantLiteral({ name: 's', type: 'String', value: "it's \\ here" })).toBe("'it\\'s \\\\ here'");
    expect(constantLiteral({ name: 'n', type: 'Decimal', value: 1 })).toBe('1.0');
    expect(constantLiteral({ name: 'n', type: 'Integer', value: -2 })).toBe('(-2)');
    expect(constantLiteral({ name: 'b', type: 'Boolean', value: false })).toBe('false');
  });

  it('replace %name outside strings and comments only, leaving other variables', () => {
    const literals = new Map([['use', "'official'"]]);
    expect(substituteConstants("name.where(use = %use and '%use' != %`use`) // %use", literals)).toBe(
      "name.where(use = 'official' and '%use' != 'official') // %use",
    );
    expect(substituteConstants('%rowIndex + %resource.id.length()', literals)).toBe(
      '%rowIndex + %resource.id.length()',
    );
  });

  it('work in paths, forEach and where', () => {
    const constant = [
      { name: 'bd', valueDate: '1970-06' },
      { name: 'g', valueCode: 'female' },
      { name: 'i', valueInteger: 1 },
      { name: 'sep', valueString: ' & ' },
    ];
    expect(one(patient, 'birthDate = %bd', { constant })).toBe(true);
    expect(one(patient, 'name.given[%i]', { constant })).toBe('Marie');
    expect(one(patient, 'name.given.join(%sep)', { constant })).toBe('Ann & Marie');
    const v = compileView({
      resource: 'Patient',
      constant,
      where: [{ path: 'gender = %g' }],
      select: [{ column: [{ name: 'id', path: 'id' }] }],
    });
    expect(v.rows(patient)).toEqual([{ id: 'p1' }]);
    expect(v.rows({ ...patient, gender: 'male' })).toEqual([]);
  });
});
