// Which reference values are searches, and when two searches are the same one (conditional-references.ts).
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { criteriaKey, hasConditionalReference, referenceSearch } from './conditional-references.js';

const BASE = 'http://cinder.test/fhir/R4';
const search = (ref: string) => referenceSearch(ref, BASE, 'Observation.subject');

describe('referenceSearch', () => {
  it('leaves references that are not searches alone', () => {
    for (const ref of [
      'Patient/123',
      '#contained',
      '#a?b=1',
      'urn:uuid:6f1c7d1e-0000-4000-8000-000000000001',
      'http://elsewhere.example/fhir/Patient?identifier=x',
      `${BASE}/Patient/1`,
    ])
      expect(search(ref), ref).toBeUndefined();
  });

  it('reads relative and own-base searches alike, whatever the order and encoding of the parameters', () => {
    const a = search('Patient?identifier=http://h.org/mrn|1&family=Doe');
    const b = search(`${BASE}/Patient?family=Doe&identifier=${encodeURIComponent('http://h.org/mrn|1')}`);
    expect(a?.type).toBe('Patient');
    expect(a?.key).toBe(b?.key);
    expect(a?.key).not.toBe(search('Patient?identifier=http://h.org/mrn|2&family=Doe')?.key);
    expect(a?.key).toBe(criteriaKey('Patient', 'family=Doe&identifier=http://h.org/mrn|1'));
    expect(a?.key).toBe(criteriaKey('Patient', 'Patient?family=Doe&identifier=http://h.org/mrn|1'));
  });

  it('refuses malformed searches with a 400 naming where the reference is', () => {
    for (const ref of [
      'Patient?',
      '?x=1',
      'patient?name=x',
      'Patient/1?x=1',
      'Patient?_count=1&name=x',
      'Patient?_include:iterate=x',
    ]) {
      let err: unknown;
      try {
        search(ref);
      } catch (e) {
        err = e;
      }
      expect(err, ref).toBeInstanceOf(FhirError);
      expect((err as FhirError).status, ref).toBe(400);
      expect((err as FhirError).issues[0]?.expression).toEqual(['Observation.subject']);
    }
    expect(() => search(`Patient?name=${'x'.repeat(5000)}`)).toThrow(/longer than 4096/);
  });

  it('finds searches anywhere in a resource', () => {
    expect(
      hasConditionalReference({ resourceType: 'Observation', subject: { reference: 'Patient/1' } }, BASE),
    ).toBe(false);
    expect(
      hasConditionalReference(
        {
          resourceType: 'Observation',
          extension: [{ url: 'x', valueReference: { reference: 'Patient?name=x' } }],
        },
        BASE,
      ),
    ).toBe(true);
    expect(hasConditionalReference({ resourceType: 'Observation', subject: { reference: '?x' } }, BASE)).toBe(
      true,
    );
  });
});
