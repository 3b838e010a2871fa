// Binary securityContext rule of the access module: role × scopes × referenced type (HTTP cases: test/api/binary-access).
import { describe, expect, it } from 'vitest';
import { assertLaunch, assertSecurityContextRead, patientReach, scopeReach, type Actor } from './access.js';
import { FhirError } from './outcome.js';

const member: Actor = { projectId: 'p', projectAdmin: false, superAdmin: false };
const admin: Actor = { ...member, projectAdmin: true };
const binaryOnly: Actor = { ...member, scopes: [{ type: 'Binary', permissions: 'rs' }] };
const withPatient: Actor = {
  ...binaryOnly,
  scopes: [...(binaryOnly.scopes ?? []), { type: 'Patient', permissions: 'r' }],
};

describe('assertSecurityContextRead', () => {
  it.each([
    [member, undefined, true],
    [member, { reference: 'Patient/1' }, true],
    [member, { reference: 'ClientApplication/c' }, false],
    [admin, { reference: 'ClientApplication/c' }, true],
    [binaryOnly, { reference: 'Patient/1' }, false],
    [binaryOnly, { reference: 'http://other.example/fhir/Patient/1/_history/2' }, false],
    // Fail closed (issue 25 point 4): what does not resolve to Type/id is for administrators reading every type.
    [binaryOnly, { reference: '#contained' }, false],
    [binaryOnly, { display: 'no reference' }, false],
    [member, { reference: 'ClientApplication?_id=c' }, false],
    [member, { reference: 'clientApplication/c' }, false],
    [withPatient, { reference: 'Patient/1' }, true],
  ] as const)('%j reading under %j: %s', (actor, context, allowed) => {
    const run = (): void => assertSecurityContextRead(actor, context);
    if (allowed) expect(run).not.toThrow();
    else expect(run).toThrow(FhirError);
  });
});

describe('assertLaunch (SMART EHR launch, API.md §11)', () => {
  const superAdmin: Actor = { ...member, superAdmin: true };
  const userReader: Actor = { ...member, scopes: [{ type: '*', permissions: 'rs' }] };
  const patientScoped: Actor = {
    ...member,
    patient: 'p1',
    scopes: [{ type: '*', permissions: 'rs', patient: true }],
  };
  it.each([
    [admin, 'ClientApplication/c', true],
    [superAdmin, 'Practitioner/1', true],
    [member, 'Practitioner/1', true],
    [userReader, 'Practitioner/1', true],
    [member, 'Patient/1', false],
    [member, 'ClientApplication/c', false],
    [member, 'RelatedPerson/1', false],
    [member, undefined, false],
    [{ ...admin, scopes: [{ type: 'Observation', permissions: 'rs' }] }, 'ClientApplication/c', false],
    [{ ...patientScoped, projectAdmin: true }, 'Practitioner/1', false],
  ] as const)('%j as %s: %s', (actor, profile, allowed) => {
    const run = (): void => assertLaunch(actor, profile);
    if (allowed) expect(run).not.toThrow();
    else expect(run).toThrow(FhirError);
  });
});

describe('scopeReach and patientReach', () => {
  const patientOnly: Actor = {
    ...member,
    patient: 'me',
    scopes: [{ type: '*', permissions: 'rs', patient: true }],
  };
  it.each([
    [member, 'Observation', 'r', 'all'],
    [patientOnly, 'Observation', 'r', 'patient'],
    [patientOnly, 'Patient', 's', 'patient'],
    [patientOnly, 'Observation', 'c', 'none'],
    // Never in a Patient compartment: a patient/ scope reaches none of it.
    [patientOnly, 'Practitioner', 'r', 'none'],
    [patientOnly, 'Medication', 's', 'none'],
    // Without a patient in context, patient/ scopes permit nothing.
    [{ ...patientOnly, patient: undefined }, 'Observation', 'r', 'none'],
    // A user/ scope of the same type reads it whole.
    [
      { ...patientOnly, scopes: [...(patientOnly.scopes ?? []), { type: 'Observation', permissions: 'r' }] },
      'Observation',
      'r',
      'all',
    ],
  ] as const)('%j %s.%s → %s', (actor, type, letter, reach) => {
    expect(scopeReach(actor, type, letter)).toBe(reach);
  });

  it('narrows reads to the patient, except the types user/ scopes read whole', () => {
    expect(patientReach(member)).toBeUndefined();
    expect(patientReach(patientOnly)).toEqual({ id: 'me', unlimited: [] });
    const mixed: Actor = {
      ...patientOnly,
      scopes: [
        ...(patientOnly.scopes ?? []),
        { type: 'Practitioner', permissions: 'rs' },
        { type: 'Group', permissions: 'c' },
      ],
    };
    expect(patientReach(mixed)).toEqual({ id: 'me', unlimited: ['Practitioner'] });
    const wide: Actor = {
      ...patientOnly,
      scopes: [...(patientOnly.scopes ?? []), { type: '*', permissions: 's' }],
    };
    expect(patientReach(wide)).toBeUndefined();
  });
});
