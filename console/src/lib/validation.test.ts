// The resources page's $validate helpers (validation.ts).
import { describe, expect, it } from 'vitest';
import type { Resource } from './fhir.js';
import { profileChoices, validateBody, validationRows } from './validation.js';

describe('console validation helpers', () => {
  it('sends the resource and, when chosen, the profile as Parameters', () => {
    const patient = { resourceType: 'Patient', id: 'p1' };
    expect(validateBody(patient, '  ')).toEqual({
      resourceType: 'Parameters',
      parameter: [{ name: 'resource', resource: patient }],
    });
    expect(validateBody(patient, 'http://example.org/p').parameter).toContainEqual({
      name: 'profile',
      valueUri: 'http://example.org/p',
    });
  });

  it('lists issues most severe first with their expressions, and nothing for another answer', () => {
    const rows = validationRows({
      resourceType: 'OperationOutcome',
      issue: [
        { severity: 'warning', code: 'not-found', details: { text: 'Unknown profile' } },
        { severity: 'error', code: 'required', diagnostics: 'Missing', expression: ['Patient.identifier'] },
        { severity: 'information', code: 'informational' },
      ],
    });
    expect(rows.map((r) => r.severity)).toEqual(['error', 'warning', 'information']);
    expect(rows[0]).toEqual({ severity: 'error', text: 'Missing', expression: 'Patient.identifier' });
    expect(rows[2]?.text).toBe('informational');
    expect(validationRows({ resourceType: 'Patient' })).toEqual([]);
    expect(validationRows(null)).toEqual([]);
  });

  it('offers the declared profiles first, then the base profile and the known ones, once each', () => {
    const r = {
      resourceType: 'Patient',
      meta: { profile: ['http://x/us-core-patient', 42] },
    } as unknown as Resource;
    expect(profileChoices(r, ['http://x/us-core-patient', 'http://x/other'])).toEqual([
      'http://x/us-core-patient',
      'http://hl7.org/fhir/StructureDefinition/Patient',
      'http://x/other',
    ]);
  });
});
