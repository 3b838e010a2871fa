// Kick-off header and parameter rules of the bulk export (https://hl7.org/fhir/uv/bulkdata/export.html, STU2).
import { describe, expect, it } from 'vitest';
import {
  assertAccept,
  elementsParam,
  handling,
  KickOffNotes,
  since,
  typeFilters,
  warnUnknown,
} from './export-params.js';

const admin = { projectId: 'p', projectAdmin: true, superAdmin: false };
const member = { projectId: 'p', projectAdmin: false, superAdmin: false };

describe('bulk export kick-off parameters', () => {
  it('accepts FHIR JSON (or a range including it) and nothing else; the header is required', () => {
    for (const missing of [undefined, '', ' '])
      expect(() => assertAccept(missing)).toThrow(/needs the header/);
    for (const ok of ['application/fhir+json', '*/*', 'application/*', 'text/html, */*;q=0.1'])
      expect(() => assertAccept(ok)).not.toThrow();
    for (const bad of ['application/fhir+xml', 'text/csv', 'application/fhir+json;q=0', 'application/json'])
      expect(() => assertAccept(bad)).toThrow(/Unsupported Accept/);
  });

  it('reads Prefer: handling among other preferences', () => {
    expect(handling('respond-async, handling=strict')).toBe('strict');
    expect(handling('handling=lenient; respond-async')).toBe('lenient');
    expect(handling('respond-async')).toBeUndefined();
    expect(handling(undefined)).toBeUndefined();
  });

  it('warns about unknown parameters, or refuses them under handling=strict', () => {
    const lenient = new KickOffNotes(undefined);
    warnUnknown({ _type: ['Patient'], _until: ['x'], _fields: ['id'] }, false, lenient);
    expect(lenient.warnings).toEqual([
      'Unknown parameter _until was ignored',
      '_fields applies to _outputFormat=text/csv only and was ignored',
    ]);
    expect(() => warnUnknown({ _until: ['x'] }, false, new KickOffNotes('strict'))).toThrow(
      /handling=strict/,
    );
  });

  it('refuses a _since in the future', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(since(['2025-12-31'], now)).toBe('2025-12-31T00:00:00.000Z');
    expect(() => since(['2026-01-02'], now)).toThrow(/in the future/);
    expect(() => since(['yesterday'], now)).toThrow(/Invalid _since/);
  });

  it('splits _typeFilter values before each Type? only, and checks each query', () => {
    expect(
      typeFilters(['Observation?code=a,b,Patient?gender=male', 'Observation?status=final'], admin),
    ).toEqual({
      Observation: ['code=a,b', 'status=final'],
      Patient: ['gender=male'],
    });
    expect(() => typeFilters(['Observation?_include=Observation:subject'], admin)).toThrow(
      /result parameter/,
    );
    expect(() => typeFilters(['Observation?'], admin)).toThrow(/no criteria/);
    expect(() => typeFilters(['AsyncJob?status=accepted'], member)).toThrow(/may not read/);
    expect(() =>
      typeFilters(['RequestGroup?instantiates-canonical:AsyncJob.status=completed'], member),
    ).toThrow(/Forbidden/);
  });

  it('reads _elements as bare and Type.element names of root elements', () => {
    expect(elementsParam(['id,Patient.name', 'status'])).toEqual({
      all: ['id', 'status'],
      byType: { Patient: ['name'] },
    });
    expect(elementsParam(undefined)).toBeUndefined();
    expect(() => elementsParam(['Patient.name.given'])).toThrow(/Invalid _elements/);
    expect(() => elementsParam(['Nope.name'])).toThrow(/Unknown resource type/);
  });
});
