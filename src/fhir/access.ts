// The one place that decides who may do what (API.md §3). Every path that reads or writes resources —
// REST interactions, batch/transaction entries, operations — asks here.
import { isResourceType } from './definitions/index.js';
import { inPatientCompartment } from './definitions/patient-compartment.js';
import { isValidId } from './id.js';
import { FhirError } from './outcome.js';
import type { AccessScope } from './types.js';

export interface Actor {
  /** The project the caller's membership belongs to. */
  projectId: string;
  projectAdmin: boolean;
  superAdmin: boolean;
  /**
   * The SMART resource scopes the token was granted (src/auth/smart-scopes.ts). Absent: the token names none and is
   * limited only by the rules below (every token issued before scopes existed, password logins, external tokens).
   */
  scopes?: readonly ResourceScope[];
  /**
   * The patient in context (the id of the user's Patient profile): `patient/` scopes reach only resources in this
   * Patient's compartment. Without it, `patient/` scopes permit nothing.
   */
  patient?: string;
  /**
   * The caller's own ProjectMembership (the one its login goes through): a member reads that membership and no other
   * (canRead, AccessScope.membership).
   */
  membershipId?: string;
}

/**
 * One SMART App Launch 2.x resource scope (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html):
 * a resource type (or `*`) and the interactions it permits as v2 letters — c create, r read (read, vread, instance
 * history), u update (update, patch, update-as-create), d delete, s search (type search, type history).
 */
export interface ResourceScope {
  type: string;
  permissions: string;
  /** A `patient/` scope: it reaches only the patient-in-context's compartment (Actor.patient). */
  patient?: boolean;
}

/** What each request needs of a scope: its SMART v2 letter. */
export type ReadInteraction = 'read' | 'search';
export type WriteInteraction = 'create' | 'update' | 'delete';
const LETTER: Record<ReadInteraction | WriteInteraction, string> = {
  create: 'c',
  read: 'r',
  update: 'u',
  delete: 'd',
  search: 's',
};

const grants = (s: ResourceScope, resourceType: string, letters: string): boolean =>
  (s.type === '*' || s.type === resourceType) && [...letters].some((l) => s.permissions.includes(l));

/**
 * How far the actor's scopes let it apply one of `letters` to `resourceType`: `all` (no scopes, or a `system/` or
 * `user/` scope grants it), `patient` (only `patient/` scopes do: the resources of the patient-in-context's
 * compartment; types that are never in a Patient compartment get nothing), or `none`. Scopes narrow, never widen.
 */
export function scopeReach(actor: Actor, resourceType: string, letters: string): 'all' | 'patient' | 'none' {
  if (!actor.scopes) return 'all';
  if (actor.scopes.some((s) => !s.patient && grants(s, resourceType, letters))) return 'all';
  const patient =
    actor.patient !== undefined &&
    inPatientCompartment(resourceType) &&
    actor.scopes.some((s) => s.patient && grants(s, resourceType, letters));
  return patient ? 'patient' : 'none';
}

function scopesPermit(actor: Actor, resourceType: string, letters: string): boolean {
  return scopeReach(actor, resourceType, letters) !== 'none';
}

/**
 * The patient whose compartment bounds the rows the actor may read (AccessScope.patient): set when some type is
 * readable through `patient/` scopes only. `unlimited` lists the types a `system/` or `user/` scope reads whole.
 */
export function patientReach(actor: Actor): AccessScope['patient'] {
  const scopes = actor.scopes;
  if (!scopes || actor.patient === undefined || !scopes.some((s) => s.patient)) return undefined;
  const readers = scopes.filter((s) => !s.patient && /[rs]/.test(s.permissions));
  if (readers.some((s) => s.type === '*')) return undefined;
  return { id: actor.patient, unlimited: [...new Set(readers.map((s) => s.type))] };
}

/**
 * The patient whose compartment bounds a write (`interaction` create, update or delete) of `resourceType`, when only
 * `patient/` scopes permit it; undefined when a `system/` or `user/` scope (or no scope) permits it. Fails closed: a
 * write that no scope permits is a 403 here too, whoever forgot to ask assertWrite first.
 */
export function patientWriteReach(
  actor: Actor,
  resourceType: string,
  interaction: WriteInteraction,
): string | undefined {
  const reach = scopeReach(actor, resourceType, LETTER[interaction]);
  if (reach === 'none') throw scopeWriteRefused(resourceType, interaction);
  return reach === 'patient' ? actor.patient : undefined;
}

const scopeWriteRefused = (resourceType: string, interaction: WriteInteraction): FhirError =>
  new FhirError(
    'forbidden',
    `Forbidden: the token's scope does not permit ${interaction} of ${resourceType}`,
    'access.scope-write',
  );

/** Resource types that only project admins (and super administrators) may create or change. */
const ADMIN_WRITE = new Set(['ClientApplication', 'ProjectMembership', 'AsyncJob', 'SearchParameter']);
/**
 * Resource types that only project admins (and super administrators) may read. A member still reads its own
 * ProjectMembership (ownMembership), and searches AsyncJobs (the ones it started) and ProjectMemberships (its own).
 */
const ADMIN_READ = new Set(['ClientApplication', 'AsyncJob', 'Login', 'ProjectMembership', 'User']);
/** Resource types only super administrators may create or change. */
const SUPER_WRITE = new Set(['Project', 'User', 'Login']);

/**
 * Whether the actor may read `resourceType` — every instance, or with `id` that one instance (its own membership is
 * readable to a member who may read no other).
 */
export function canRead(
  actor: Actor,
  resourceType: string,
  interaction: ReadInteraction = 'read',
  id?: string,
): boolean {
  if (!scopesPermit(actor, resourceType, LETTER[interaction])) return false;
  if (actor.superAdmin) return true;
  if (ADMIN_READ.has(resourceType)) return actor.projectAdmin || ownMembership(actor, resourceType, id);
  return true;
}

/**
 * Who may start a SMART EHR launch (API.md §11, `ClientApplication/<id>/$launch`): a project admin (or super
 * administrator), or a Practitioner user of the project (`profile` is the caller's). A token limited by SMART scopes
 * also needs a `user/` or `system/` scope that reads Patient: the launch hands that patient on to another app.
 */
export function assertLaunch(actor: Actor, profile: string | undefined): void {
  if (!actor.superAdmin && !actor.projectAdmin && !/^Practitioner\//.test(profile ?? '')) {
    throw new FhirError(
      'forbidden',
      'Forbidden: starting a SMART launch needs a project administrator or a Practitioner user',
      'access.launch',
    );
  }
  if (scopeReach(actor, 'Patient', 'r') !== 'all') {
    throw new FhirError(
      'forbidden',
      "Forbidden: the token's scope does not permit starting a SMART launch (it needs user/Patient.r)",
      'access.launch-scope',
    );
  }
}

/** Whether `resourceType`/`id` is the actor's own ProjectMembership. */
function ownMembership(actor: Actor, resourceType: string, id: string | undefined): boolean {
  return resourceType === 'ProjectMembership' && id !== undefined && id === actor.membershipId;
}

/**
 * The one ProjectMembership the actor's reads may return (AccessScope.membership): its own, for a caller who is not an
 * admin (`''`, none, when its membership is unknown). Applied to every search, so that included memberships are
 * narrowed too.
 */
export function membershipReach(actor: Actor): string | undefined {
  return actor.superAdmin || actor.projectAdmin ? undefined : (actor.membershipId ?? '');
}

/**
 * Whether the actor may perform `interaction` on `resourceType`. Always the interaction performed: an update that
 * creates (an unknown id, or a deleted resource's next version) is a create and needs `c`.
 */
export function canWrite(actor: Actor, resourceType: string, interaction: WriteInteraction): boolean {
  if (!scopesPermit(actor, resourceType, LETTER[interaction])) return false;
  if (actor.superAdmin) return true;
  if (SUPER_WRITE.has(resourceType)) return false;
  if (ADMIN_WRITE.has(resourceType)) return actor.projectAdmin;
  return true;
}

/**
 * What a search of `resourceType` may return to the caller, or a 403. Members may search AsyncJob but see only the
 * jobs they started (API.md §5: search results follow the same rule as reading a job), and ProjectMembership but see
 * only their own (as reading one by id).
 */
export function searchScope(
  actor: Actor,
  caller: string | undefined,
  resourceType: string,
  scope: AccessScope,
): AccessScope {
  if (
    resourceType === 'AsyncJob' &&
    !actor.superAdmin &&
    !actor.projectAdmin &&
    scopesPermit(actor, 'AsyncJob', 's')
  ) {
    // A caller without a profile started no job: it finds none.
    return { ...scope, author: caller ?? '' };
  }
  const membership = membershipReach(actor);
  if (
    resourceType === 'ProjectMembership' &&
    membership !== undefined &&
    scopesPermit(actor, 'ProjectMembership', 's')
  ) {
    return { ...scope, membership };
  }
  assertRead(actor, resourceType, 'search');
  return scope;
}

/**
 * Chained parameters read their target type (`user:ClientApplication.name=x` reads ClientApplications): each must be
 * readable by the caller, or the search would tell whether such a resource exists.
 */
export function assertChainsReadable(actor: Actor, chainedTypes: readonly string[]): void {
  for (const type of chainedTypes) assertRead(actor, type, 'search');
}

const scopeReadRefused = (resourceType: string, interaction: ReadInteraction): FhirError =>
  new FhirError(
    'forbidden',
    `Forbidden: the token's scope does not permit ${interaction} of ${resourceType}`,
    'access.scope-read',
  );

/** With `id`, the read of that one instance (a member's own membership). */
export function assertRead(
  actor: Actor,
  resourceType: string,
  interaction: ReadInteraction = 'read',
  id?: string,
): void {
  if (!scopesPermit(actor, resourceType, LETTER[interaction]))
    throw scopeReadRefused(resourceType, interaction);
  if (!canRead(actor, resourceType, interaction, id)) {
    throw new FhirError(
      'forbidden',
      `Forbidden: reading ${resourceType} needs a project administrator`,
      'access.read',
    );
  }
}

export function assertWrite(actor: Actor, resourceType: string, interaction: WriteInteraction): void {
  // Nobody changes an AuditEvent (API.md §10): not a permission a role lacks, a method the type does not have.
  if (resourceType === 'AuditEvent' && interaction !== 'create')
    throw new FhirError(
      'not-supported',
      `AuditEvents cannot be changed: ${interaction} is not allowed`,
      'audit.immutable',
      { status: 405 },
    );
  if (!scopesPermit(actor, resourceType, LETTER[interaction])) {
    throw scopeWriteRefused(resourceType, interaction);
  }
  if (!canWrite(actor, resourceType, interaction)) {
    const who = SUPER_WRITE.has(resourceType) ? 'a super administrator' : 'a project administrator';
    throw new FhirError('forbidden', `Forbidden: changing ${resourceType} needs ${who}`, 'access.write');
  }
}

/** `Type/id` and nothing else: no search, fragment, version, trailing slash or server. */
const TYPE_ID = /^([A-Z][A-Za-z]{0,63})\/([^/]+)$/;

/**
 * The resource a Binary.securityContext names (https://hl7.org/fhir/R4/binary.html#security), or undefined when it
 * names none that can be resolved: it must be a Reference whose `reference` is exactly `Type/id` of a known resource
 * type (an absolute URL under `fhirBase`, this server's FHIR base, counts as the `Type/id` it ends with) and whose
 * `type`, if given, is that type. Search strings, identifiers, fragments (contained resources), queries, versions,
 * trailing slashes, lower-case or unknown types and other servers are not resolved: the check must not guess.
 */
export function securityContextTarget(
  securityContext: unknown,
  fhirBase?: string,
): { type: string; id: string; reference: string } | undefined {
  if (typeof securityContext !== 'object' || securityContext === null) return undefined;
  const { reference, type } = securityContext as { reference?: unknown; type?: unknown };
  if (typeof reference !== 'string') return undefined;
  const local =
    fhirBase !== undefined && reference.startsWith(`${fhirBase}/`)
      ? reference.slice(fhirBase.length + 1)
      : reference;
  const m = TYPE_ID.exec(local);
  const [, t = '', id = ''] = m ?? [];
  if (!m || !isResourceType(t) || !isValidId(id)) return undefined;
  if (type !== undefined && type !== t && type !== `http://hl7.org/fhir/StructureDefinition/${t}`)
    return undefined;
  return { type: t, id, reference: local };
}

/**
 * Whether the actor reads every type in its reach: a project admin or super administrator whose token is not
 * narrowed below `*` reads (a Binary whose securityContext cannot be resolved is theirs alone).
 */
function readsEveryType(actor: Actor): boolean {
  if (!actor.superAdmin && !actor.projectAdmin) return false;
  return (
    !actor.scopes || actor.scopes.some((s) => !s.patient && s.type === '*' && s.permissions.includes('r'))
  );
}

/**
 * A Binary's content is read under its securityContext (https://hl7.org/fhir/R4/binary.html#security): besides
 * reading Binary in its project, the caller needs read access (role and SMART scopes) to the type of the resource the
 * securityContext names, so a Binary attached to a ClientApplication is for project admins, and a token scoped to
 * `system/Binary.r` alone cannot read content attached to a Patient. The type is what is checked (Binary is in no
 * Patient compartment, so a token limited by `patient/` scopes reads no Binary at all). Fails closed: writes store
 * only a securityContext that resolves (repository/binary-content.ts), and one that does not (data written before)
 * is read only by an administrator who reads every type, since the type it meant cannot be known.
 */
export function assertSecurityContextRead(actor: Actor, securityContext: unknown, fhirBase?: string): void {
  if (securityContext === undefined) return;
  const target = securityContextTarget(securityContext, fhirBase);
  if (target === undefined) {
    if (readsEveryType(actor)) return;
    throw new FhirError(
      'forbidden',
      "Forbidden: this Binary's securityContext does not name a resource as Type/id; only an administrator with read access to every type may read it",
      'access.binary-context-unresolved',
    );
  }
  if (canRead(actor, target.type, 'read')) return;
  throw new FhirError(
    'forbidden',
    `Forbidden: this Binary's securityContext needs read access to ${target.type}`,
    'access.binary-context',
  );
}

/**
 * Whether the actor is a super administrator whose token is not narrowed by scopes (only `system/*.cruds` or none):
 * super administrator actions ($reindex, $expunge, setting passwords) span every type.
 */
export function hasSuperAdminPowers(actor: Actor): boolean {
  const everything =
    actor.scopes?.some((s) => !s.patient && s.type === '*' && s.permissions === 'cruds') ?? true;
  return actor.superAdmin && everything;
}

/**
 * Bulk work that reads stored data outside the search engine ($export, views over stored data) is refused to a
 * token whose reads are bounded by a patient's compartment (AccessScope.patient): it would not be bounded there.
 */
export function assertWholeReach(scope: AccessScope, what: string): void {
  if (scope.patient) {
    throw new FhirError(
      'forbidden',
      `Forbidden: ${what} is not available to a token limited by patient/ scopes`,
      'access.patient-scope-bulk',
    );
  }
}

export function assertSuperAdmin(actor: Actor, what: string): void {
  if (!hasSuperAdminPowers(actor)) {
    throw new FhirError('forbidden', `Forbidden: ${what} needs a super administrator`, 'access.super-admin');
  }
}

/**
 * AsyncJob instances (API.md §5): whoever started the job (its `meta.author`), an admin of its project and a super
 * administrator may read and cancel a job and download its files; to anyone else it does not exist.
 */
export function canAccessJob(
  actor: Actor,
  caller: string | undefined,
  job: { projectId: string; author: string | undefined },
): boolean {
  if (actor.superAdmin) return true;
  if (actor.projectId !== job.projectId) return false;
  return actor.projectAdmin || (caller !== undefined && caller === job.author);
}

/**
 * Whether the actor's bulk work (export) may hold `resourceType`: what it may read, and AuditEvents only for admins (a
 * Patient user reads those about themselves through auditReach, one search at a time).
 */
export function canReadInBulk(actor: Actor, resourceType: string): boolean {
  if (resourceType === 'AuditEvent' && !actor.superAdmin && !actor.projectAdmin) return false;
  return canRead(actor, resourceType);
}

/** Which AuditEvents a caller may read (API.md §10): `projectId` null for every project; `patient`, only those about it. */
export interface AuditReach {
  projectId: string | null;
  patient?: string;
}

const PATIENT_PROFILE = /^Patient\/([A-Za-z0-9\-.]{1,64})$/;

/**
 * AuditEvents (API.md §10): a super administrator reads all; a project's admins read its events; a Patient user (or a
 * token whose only AuditEvent scope is a `patient/` one) reads its project's events whose patient entity is itself;
 * anyone else, nothing (403). `profile` is the caller's profile reference.
 */
export function auditReach(
  actor: Actor,
  profile: string | undefined,
  interaction: ReadInteraction,
): AuditReach {
  const reach = scopeReach(actor, 'AuditEvent', LETTER[interaction]);
  if (reach === 'none') throw scopeReadRefused('AuditEvent', interaction);
  const ownPatient = PATIENT_PROFILE.exec(profile ?? '')?.[1];
  if (reach === 'patient' && actor.patient !== undefined)
    return { projectId: actor.projectId, patient: actor.patient };
  if (actor.superAdmin) return { projectId: null };
  if (actor.projectAdmin) return { projectId: actor.projectId };
  if (ownPatient !== undefined) return { projectId: actor.projectId, patient: ownPatient };
  throw new FhirError(
    'forbidden',
    'Forbidden: AuditEvents are read by project administrators, and by a patient for their own record',
    'access.audit-read',
  );
}

/**
 * `AuditEvent/$verify-chain`: whose audit chain the actor may verify. A project admin verifies its own project's
 * chain; a super administrator any project's (or the chain of requests without a login, project ''). Scopes are
 * checked by the caller (AuditEvent read).
 */
export function assertAuditChainAccess(actor: Actor, projectId: string): void {
  if (actor.superAdmin) return;
  if (actor.projectAdmin && projectId === actor.projectId) return;
  throw new FhirError(
    'forbidden',
    actor.projectAdmin
      ? "Forbidden: a project administrator verifies only its own project's audit chain"
      : 'Forbidden: verifying the audit chain needs a project administrator',
    'access.audit-chain',
  );
}
