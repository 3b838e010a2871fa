// What a user signing in to a SMART app at the authorize endpoint is granted (SMART App Launch 2.x, "Scopes and
// Launch Context", https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html; RFC 6749 §3.3): the
// requested `user/` and `patient/` resource scopes within the membership's role, and the identity and launch scopes
// Cinder supports. Anything else asked for is left out of the grant; nothing is ever granted that was not asked.
import type { Actor } from '../fhir/access.js';
import { OAuthError } from './oauth-error.js';
import { formatScope, parseResourceScope, RESOURCE_LIKE, split, withinRole } from './smart-scopes.js';

/** Non-resource scopes a user login may be granted at the authorize endpoint. */
export const USER_SCOPES_SUPPORTED = [
  'openid',
  'fhirUser',
  'profile',
  'email',
  'offline_access',
  'launch',
  'launch/patient',
  'launch/encounter',
];

/** Examples of user and patient scopes (smart-configuration `scopes_supported`). */
export const USER_RESOURCE_SCOPES_SUPPORTED = [
  'user/*.rs',
  'user/*.cruds',
  'user/*.read',
  'user/*.write',
  'patient/*.rs',
  'patient/*.read',
  'patient/Observation.rs',
];

/** The profile a membership signs in as, e.g. `Patient/123`. */
export interface UserGrantInput {
  actor: Actor;
  profile: string;
  /**
   * The launch context of this sign-in (API.md §11): an EHR launch's patient and encounter (`ehr`), or the patient
   * chosen on the picker. Without it, the patient in context is the user's own Patient profile, if any.
   */
  launch?: { patient: string; encounter?: string; ehr: boolean };
}

/** The patient in context of a login, when there is one: the user's own Patient profile (standalone launch). */
export function patientContext(profile: string): string | undefined {
  const m = /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(profile);
  return m?.[1];
}

/** Whether a launch scope can be granted with the context at hand. */
function launchScopeHolds(text: string, input: UserGrantInput, hasPatient: boolean): boolean {
  if (text === 'launch') return input.launch?.ehr === true;
  if (text === 'launch/patient') return hasPatient;
  if (text === 'launch/encounter') return input.launch?.encounter !== undefined;
  return true;
}

/**
 * The granted `scope` for a requested one. `patient/` scopes and `launch/patient` need a patient in context: an EHR
 * launch's, the one picked (API.md §11), or a Patient user's own; without one they are left out, as are `launch`
 * without an EHR launch and `launch/encounter` without its encounter. Resource scopes asked for, none grantable:
 * `invalid_scope`, so that an app asking to be limited never leaves with a token carrying only its user's full rights.
 */
export function grantUserScope(input: UserGrantInput, requested: string): string {
  const hasPatient = input.launch !== undefined || patientContext(input.profile) !== undefined;
  const asked = split(requested);
  const granted: string[] = [];
  for (const text of asked) {
    if (USER_SCOPES_SUPPORTED.includes(text)) {
      if (launchScopeHolds(text, input, hasPatient)) granted.push(text);
      continue;
    }
    const parsed = parseResourceScope(text);
    if (!parsed || parsed.context === 'system') continue;
    if (parsed.context === 'patient' && !hasPatient) continue;
    const held = withinRole(input.actor, parsed);
    if (held.permissions !== '') granted.push(formatScope(held));
  }
  const unique = [...new Set(granted)];
  if (asked.some((s) => RESOURCE_LIKE.test(s)) && !unique.some((s) => RESOURCE_LIKE.test(s))) {
    throw new OAuthError(
      'invalid_scope',
      hasPatient
        ? 'None of the requested resource scopes can be granted to this user'
        : 'None of the requested resource scopes can be granted: patient scopes need a patient in context (launch or launch/patient)',
    );
  }
  return unique.join(' ');
}
