// The one place that decides who may do what (API.md §3). Every path that reads or writes resources —
// REST interactions, batch/transaction entries, operations — asks here.
import { FhirError } from './outcome.js';
import type { AccessScope } from './types.js';

export interface Actor {
  /** The project the caller's membership belongs to. */
  projectId: string;
  projectAdmin: boolean;
  superAdmin: boolean;
}

/** Resource types that only project admins (and super administrators) may create or change. */
const ADMIN_WRITE = new Set(['ClientApplication', 'ProjectMembership', 'AsyncJob']);
/** Resource types that only project admins (and super administrators) may read. */
const ADMIN_READ = new Set(['ClientApplication', 'AsyncJob', 'Login']);
/** Resource types only super administrators may create or change. */
const SUPER_WRITE = new Set(['Project', 'User', 'Login']);

export function canRead(actor: Actor, resourceType: string): boolean {
  if (actor.superAdmin) return true;
  if (ADMIN_READ.has(resourceType)) return actor.projectAdmin;
  return true;
}

export function canWrite(actor: Actor, resourceType: string): boolean {
  if (actor.superAdmin) return true;
  if (SUPER_WRITE.has(resourceType)) return false;
  if (ADMIN_WRITE.has(resourceType)) return actor.projectAdmin;
  return true;
}

/**
 * What a search of `resourceType` may return to the caller, or a 403. Members may search AsyncJob but see only the
 * jobs they started (API.md §5: search results follow the same rule as reading a job).
 */
export function searchScope(
  actor: Actor,
  caller: string | undefined,
  resourceType: string,
  scope: AccessScope,
): AccessScope {
  if (resourceType === 'AsyncJob' && !actor.superAdmin && !actor.projectAdmin) {
    // A caller without a profile started no job: it finds none.
    return { ...scope, author: caller ?? '' };
  }
  assertRead(actor, resourceType);
  return scope;
}

/**
 * Chained parameters read their target type (`user:ClientApplication.name=x` reads ClientApplications): each must be
 * readable by the caller, or the search would tell whether such a resource exists.
 */
export function assertChainsReadable(actor: Actor, chainedTypes: readonly string[]): void {
  for (const type of chainedTypes) assertRead(actor, type);
}

export function assertRead(actor: Actor, resourceType: string): void {
  if (!canRead(actor, resourceType)) {
    throw new FhirError(
      'forbidden',
      `Forbidden: reading ${resourceType} needs a project administrator`,
      'access.read',
    );
  }
}

export function assertWrite(actor: Actor, resourceType: string): void {
  if (!canWrite(actor, resourceType)) {
    const who = SUPER_WRITE.has(resourceType) ? 'a super administrator' : 'a project administrator';
    throw new FhirError('forbidden', `Forbidden: changing ${resourceType} needs ${who}`, 'access.write');
  }
}

export function assertSuperAdmin(actor: Actor, what: string): void {
  if (!actor.superAdmin) {
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
