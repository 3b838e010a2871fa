// Signing in at the authorize endpoint (RFC 6749 §4.1.2, SMART App Launch 2.x standalone launch,
// https://hl7.org/fhir/smart-app-launch/app-launch.html): the password check and login rules of POST /auth/login,
// a choice among the user's memberships in the application's project when there are several, then a login and a
// one-time code (authorization-code.ts) for the scope granted (smart-user-scopes.ts), sent to the redirect URI.
import { selectCurrent } from '../fhir/repository/store.js';
import { createAuthorizationCode, purgeExpiredCodes } from './authorization-code.js';
import { isConsoleClient } from './console-client.js';
import {
  endTransaction,
  errorRedirect,
  redirectTo,
  setTransactionMembership,
  setTransactionUser,
  type PendingAuthorization,
} from './authorize-request.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import { OAuthError } from './oauth-error.js';
import { checkPassword } from './password-login.js';
import {
  activeMembershipsOfUser,
  createLogin,
  loginWouldHold,
  type ActiveMembership,
  type NewLogin,
} from './principal.js';
import { findPatients, type PatientOption } from './patient-picker.js';
import { findLaunch, redeemLaunch, type LaunchContext } from './smart-launch.js';
import { grantUserScope, patientContext, type UserGrantInput } from './smart-user-scopes.js';

export interface MembershipOption {
  id: string;
  label: string;
}

export type AuthorizeStep =
  | { kind: 'redirect'; location: string }
  | { kind: 'choose'; options: MembershipOption[] }
  /** The patient picker of a standalone `launch/patient` (API.md §11): the patients found for `search`. */
  | { kind: 'pick'; patients: PatientOption[]; search: string; error?: string }
  | { kind: 'show'; message: string };

/**
 * The user's memberships a login through this application may use: only those of the application's project, except
 * for the admin console, which (like POST /auth/login) may sign a user in through any of their memberships.
 */
async function membershipsFor(
  deps: AuthDeps,
  p: PendingAuthorization,
  userId: string,
): Promise<ActiveMembership[]> {
  const client = await selectCurrent(deps.db, 'ClientApplication', p.clientId);
  if (!client || client.deleted) return [];
  if (await isConsoleClient(deps.db, p.clientId)) return activeMembershipsOfUser(deps.db, `User/${userId}`);
  return activeMembershipsOfUser(deps.db, `User/${userId}`, client.project_id);
}

function humanName(resource: Record<string, unknown>): string | undefined {
  const names = resource.name as { text?: string; given?: string[]; family?: string }[] | undefined;
  const n = Array.isArray(names) ? names[0] : undefined;
  if (!n) return undefined;
  return n.text ?? [...(n.given ?? []), n.family ?? ''].join(' ').trim();
}

/** Each membership as the chooser lists it: its project's name and the profile the user acts as. */
async function describe(deps: AuthDeps, memberships: ActiveMembership[]): Promise<MembershipOption[]> {
  const options: MembershipOption[] = [];
  for (const m of memberships) {
    const project = await selectCurrent(deps.db, 'Project', m.project_id);
    const projectName = project ? (JSON.parse(project.json) as { name?: string }).name : undefined;
    const [type, id] = m.profile.split('/') as [string, string];
    const profile = await selectCurrent(deps.db, type, id);
    const who = profile ? humanName(JSON.parse(profile.json) as Record<string, unknown>) : undefined;
    options.push({ id: m.id, label: `${projectName ?? m.project_id} — ${type}${who ? ` ${who}` : ''}` });
  }
  return options;
}

/** The password step. A wrong password throws FhirError `login.bad-credentials` (the caller counts it). */
export async function signIn(
  deps: AuthDeps,
  p: PendingAuthorization,
  email: string,
  password: string,
): Promise<AuthorizeStep> {
  const userId = await checkPassword(deps, email, password);
  const memberships = await membershipsFor(deps, p, userId);
  const only = memberships[0];
  if (!only) {
    await endTransaction(deps.db, deps, p);
    return errorRedirect(
      p,
      'access_denied',
      'The user has no active membership in the project of this application',
    );
  }
  if (memberships.length === 1) return issueCode(deps, p, userId, only);
  await setTransactionUser(deps.db, p, userId);
  return { kind: 'choose', options: await describe(deps, memberships) };
}

/** The chooser step: one of the signed-in user's memberships. */
export async function chooseMembership(
  deps: AuthDeps,
  p: PendingAuthorization,
  membershipId: string | undefined,
): Promise<AuthorizeStep> {
  if (p.userId === undefined) return { kind: 'show', message: 'Sign in first.' };
  const memberships = await membershipsFor(deps, p, p.userId);
  const chosen = memberships.find((m) => m.id === membershipId);
  if (!chosen) return { kind: 'choose', options: await describe(deps, memberships) };
  return issueCode(deps, p, p.userId, chosen);
}

/** The user declined (the Cancel button): `access_denied` to the client (RFC 6749 §4.1.2.1). */
export async function declineAuthorization(deps: AuthDeps, p: PendingAuthorization): Promise<AuthorizeStep> {
  await endTransaction(deps.db, deps, p);
  return errorRedirect(p, 'access_denied', 'The user declined to sign in');
}

/** Why an EHR launch cannot give its context to this sign-in; undefined when it can. */
function launchRefusal(
  launch: LaunchContext | undefined,
  userId: string,
  m: ActiveMembership,
): string | undefined {
  if (!launch) return 'The launch is unknown, expired, already used or not for this application';
  if (launch.projectId !== m.project_id) return 'The launch belongs to another project';
  if (launch.userId !== undefined && launch.userId !== userId)
    return 'The launch was started by another user';
  const own = patientContext(m.profile);
  if (own !== undefined && own !== launch.patient)
    return 'A Patient user may only launch with their own record';
  return undefined;
}

/** A standalone launch asking `launch/patient` by a user who is not a Patient: the patient is picked first. */
const needsPicker = (p: PendingAuthorization, m: ActiveMembership): boolean =>
  p.launchHash === undefined &&
  p.scope.split(/\s+/).includes('launch/patient') &&
  patientContext(m.profile) === undefined;

/** The patient picker's post: a search (the list again), or a patient chosen among those the user may read. */
export async function pickPatient(
  deps: AuthDeps,
  p: PendingAuthorization,
  form: { search?: string; patient?: string },
): Promise<AuthorizeStep> {
  if (p.userId === undefined || p.membershipId === undefined)
    return { kind: 'show', message: 'Sign in first.' };
  const m = (await membershipsFor(deps, p, p.userId)).find((x) => x.id === p.membershipId);
  if (!m) {
    await endTransaction(deps.db, deps, p);
    return errorRedirect(p, 'access_denied', 'The project membership cannot be logged in through');
  }
  const search = (form.search ?? '').slice(0, 100);
  if (form.patient !== undefined && form.patient !== '') {
    const id = /^[A-Za-z0-9\-.]{1,64}$/.test(form.patient) ? form.patient : undefined;
    const found = id !== undefined ? await findPatients(deps, m, { id }) : [];
    if (found.length === 1) return issueCode(deps, p, p.userId, m, { patient: id });
    const patients = await findPatients(deps, m, { search });
    return { kind: 'pick', patients, search, error: 'Choose one of the patients listed.' };
  }
  return { kind: 'pick', patients: await findPatients(deps, m, { search }), search };
}

/**
 * The user is known and the membership chosen: a login, and a code for the app at its redirect URI. `patient` is the
 * one picked; `noPicker`: the caller cannot show the picker (the identity provider's callback has no form
 * transaction), so a `launch/patient` without a patient is left out of the grant instead.
 */
export async function issueCode(
  deps: AuthDeps,
  p: PendingAuthorization,
  userId: string,
  m: ActiveMembership,
  opts: { patient?: string; noPicker?: boolean } = {},
): Promise<AuthorizeStep> {
  const picked = opts.patient;
  let launch: LaunchContext | undefined;
  if (p.launchHash !== undefined) {
    launch = await findLaunch(deps.db, deps, p.launchHash, p.clientId);
    const refusal = launchRefusal(launch, userId, m);
    if (refusal !== undefined) {
      await endTransaction(deps.db, deps, p);
      return errorRedirect(p, 'invalid_request', refusal);
    }
  } else if (picked === undefined && !opts.noPicker && needsPicker(p, m)) {
    await setTransactionMembership(deps.db, p, userId, m.id);
    return { kind: 'pick', patients: await findPatients(deps, m, {}), search: '' };
  }
  const context: UserGrantInput['launch'] = launch
    ? { patient: launch.patient, ehr: true, ...(launch.encounter ? { encounter: launch.encounter } : {}) }
    : picked !== undefined
      ? { patient: picked, ehr: false }
      : undefined;
  let scope: string;
  try {
    const actor = { projectId: m.project_id, projectAdmin: m.admin, superAdmin: m.super_admin };
    scope = grantUserScope({ actor, profile: m.profile, ...(context ? { launch: context } : {}) }, p.scope);
  } catch (err) {
    if (!(err instanceof OAuthError)) throw err;
    await endTransaction(deps.db, deps, p);
    return errorRedirect(p, err.error, err.description);
  }
  const login: NewLogin = {
    id: deps.newId(),
    membershipId: m.id,
    projectId: m.project_id,
    profile: m.profile,
    userId,
    clientId: p.clientId,
    authMethod: 'password',
    ...(context ? { launchPatient: context.patient } : {}),
    ...(context?.encounter !== undefined ? { launchEncounter: context.encounter } : {}),
    ...(launch?.fhirContext !== undefined ? { launchFhirContext: launch.fhirContext } : {}),
  };
  const grant = { scope, authTime: nowSeconds(deps), ...(p.nonce !== undefined ? { nonce: p.nonce } : {}) };
  const code = await deps.db.transaction(async (tx) => {
    // Used up first: of two concurrent submits of one form, one gets a code.
    if (!(await endTransaction(tx, deps, p))) return 'used';
    // The launch too, in the same transaction: of two sign-ins presenting one launch, one gets its context.
    if (p.launchHash !== undefined && !(await redeemLaunch(tx, deps, p.launchHash, p.clientId)))
      return 'launch-used';
    const now = deps.clock();
    if (!(await loginWouldHold(tx, login, now))) return 'refused';
    await createLogin(tx, login, now);
    return createAuthorizationCode(tx, deps, login.id, p.codeChallenge, grant, {
      ...(p.redirectUriSent ? { redirectUri: p.redirectUri } : {}),
      viaAuthorize: true,
    });
  });
  if (code === 'used')
    return { kind: 'show', message: 'This sign-in was already completed. Start again from the application.' };
  if (code === 'refused')
    return errorRedirect(p, 'access_denied', 'The project membership cannot be logged in through');
  if (code === 'launch-used')
    return errorRedirect(p, 'invalid_request', 'The launch is expired or already used');
  await purgeExpiredCodes(deps.db, deps).catch(() => undefined);
  return { kind: 'redirect', location: redirectTo(p.redirectUri, { code, state: p.state }) };
}
