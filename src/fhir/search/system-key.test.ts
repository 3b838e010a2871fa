// The stored form of code system URIs (system-key.ts): short for well-known prefixes, and one-to-one, so that equal
// and unequal systems compare as they did.
import { describe, expect, it } from 'vitest';
import { SYSTEM_PREFIXES, systemKey } from './system-key.js';

const SAMPLES = [
  'http://loinc.org',
  'http://loinc.org/x',
  'http://snomed.info/sct',
  'http://terminology.hl7.org/CodeSystem/v3-ActCode',
  'http://terminology.hl7.org/ValueSet/x',
  'http://hl7.org/fhir/sid/us-npi',
  'http://hl7.org/fhir/administrative-gender',
  'https://smarthealthit.org/tags',
  'http://example.org',
  'urn:oid:2.16.840.1.113883.4.3.25',
  'urn:ietf:bcp:47',
  'urn:iso:std:iso:4217',
  'urn:uuid:1234',
  'phone',
  'http://',
  'https://',
  '',
  '\u0004',
  '\u0004x',
  '\u001f\u0004',
  '\u001f',
  'é',
  'http://unitsofmeasure.org',
];

describe('systemKey', () => {
  it('shortens the well-known prefixes to one character', () => {
    expect(systemKey('http://loinc.org')).toBe('\u0004');
    expect(systemKey('http://terminology.hl7.org/CodeSystem/v3-ActCode')).toBe('\u0001v3-ActCode');
    expect(systemKey('http://hl7.org/fhir/sid/cvx')).toBe('\u0002cvx');
    expect(systemKey('https://smarthealthit.org/tags')).toBe('\u000bsmarthealthit.org/tags');
    expect(systemKey('phone')).toBe('phone');
    expect(systemKey(null)).toBeNull();
    for (const p of SYSTEM_PREFIXES) expect(systemKey(p).length).toBe(1);
  });

  it('gives different systems different keys (texts that start with a control character are escaped)', () => {
    const keys = new Map<string, string>();
    for (const s of SAMPLES) {
      const k = systemKey(s);
      expect(keys.get(k), `${JSON.stringify(s)} and ${JSON.stringify(keys.get(k))}`).toBeUndefined();
      keys.set(k, s);
    }
    expect(systemKey('\u0004')).toBe('\u001f\u0004');
    expect(keys.size).toBe(SAMPLES.length);
  });

  it('lists a longer prefix before a shorter one it starts with', () => {
    SYSTEM_PREFIXES.forEach((p, i) => {
      for (const q of SYSTEM_PREFIXES.slice(0, i)) expect(p.startsWith(q), `${p} after ${q}`).toBe(false);
    });
    expect(SYSTEM_PREFIXES.length).toBeLessThan(31);
  });
});
