// What a user is granted at the authorize endpoint for the scopes a SMART app asks for.
import { describe, expect, it } from 'vitest';
import type { Actor } from '../fhir/access.js';
import { OAuthError } from './oauth-error.js';
import { grantUserScope, patientContext } from './smart-user-scopes.js';

const member: Actor = { projectId: 'p', projectAdmin: false, superAdmin: false };
const patient = { actor: member, profile: 'Patient/pat-1' };
const practitioner = { actor: member, profile: 'Practitioner/doc-1' };

describe('grantUserScope', () => {
  it.each([
    [
      patient,
      'openid fhirUser launch/patient patient/*.rs offline_access',
      'openid fhirUser launch/patient patient/*.rs offline_access',
    ],
    [patient, 'patient/*.read patient/Observation.write', 'patient/*.read patient/Observation.write'],
    [practitioner, 'openid fhirUser launch/patient user/*.rs', 'openid fhirUser user/*.rs'],
    [practitioner, 'user/*.cruds user/ClientApplication.rs bogus launch system/*.rs', 'user/*.cruds'],
    [
      { ...practitioner, actor: { ...member, projectAdmin: true } },
      'user/ClientApplication.rs',
      'user/ClientApplication.rs',
    ],
    [practitioner, 'openid fhirUser', 'openid fhirUser'],
    [
      { ...practitioner, launch: { patient: 'pat-9', encounter: 'enc-1', ehr: true } },
      'launch launch/patient launch/encounter patient/*.rs',
      'launch launch/patient launch/encounter patient/*.rs',
    ],
    [
      { ...practitioner, launch: { patient: 'pat-9', ehr: false } },
      'launch launch/patient launch/encounter patient/*.rs',
      'launch/patient patient/*.rs',
    ],
  ])('%o asks %s', (who, asked, granted) => expect(grantUserScope(who, asked)).toBe(granted));

  it('refuses when only unsupported resource scopes are asked (never an unlimited token)', () => {
    expect(() => grantUserScope(practitioner, 'user/Observation.rs?category=laboratory openid')).toThrow(
      OAuthError,
    );
  });

  it('refuses patient scopes without a patient in context', () => {
    expect(() => grantUserScope(practitioner, 'launch/patient patient/*.rs')).toThrow(/patient in context/);
  });

  it('finds the patient in context only for Patient profiles', () => {
    expect(patientContext('Patient/pat-1')).toBe('pat-1');
    expect(patientContext('Practitioner/doc-1')).toBeUndefined();
  });
});
