// Rules a version must satisfy that need the database or the network (API.md §3 membership targets, §2 outbound
// URLs): every writer (create, update, patch, batch, transaction, invite) calls checkWriteRules just before it
// stores prepared versions, inside its transaction when it has one. Versions declaring meta.profile are validated
// against the profiles the server knows (API.md §9). `items` are all the versions stored together,
// so a transaction that creates a profile and its membership is judged as a whole.
import { outboundTargetRefused } from '../../auth/outbound.js';
import type { Queryable } from '../../storage/db.js';
import type { At } from '../conformance/model.js';
import { FhirError } from '../outcome.js';
import type { RepoContext } from './context.js';
import { isValidId } from '../id.js';
import type { PreparedWrite } from './prepare.js';

export async function checkWriteRules(
  db: Queryable,
  ctx: RepoContext,
  items: readonly PreparedWrite[],
): Promise<void> {
  await checkTargetProjects(db, ctx, items);
  await checkMembershipTargets(db, items);
  await checkOutboundUrls(ctx, items);
  if (ctx.subscriptions && items.some((it) => it.resource.resourceType === 'Subscription'))
    await ctx.subscriptions.beforeStore(db, ctx, items);
  await checkProfiles(db, ctx, items);
}

/** meta.profile entries checked at most per resource. */
const MAX_PROFILES = 20;

/**
 * API.md §9: a version whose meta.profile names a profile the server knows (in its project, then the shared set) and
 * fails it is refused with 422 and every issue; an unknown profile does not block. Inside the write's transaction
 * (`db`), so the resolver sees what it sees. Nothing is asked for a resource without meta.profile.
 */
async function checkProfiles(
  db: Queryable,
  ctx: RepoContext,
  items: readonly PreparedWrite[],
): Promise<void> {
  const validator = ctx.conformance?.profiles;
  if (!validator) return;
  // One `At` per project for the whole write, so the validator resolves each canonical once for all its versions.
  const ats = new Map<string, At>();
  for (const { resource, projectId } of items) {
    const declared = (resource.meta as { profile?: unknown } | undefined)?.profile;
    if (!Array.isArray(declared) || declared.length === 0) continue;
    const profiles = declared
      .filter((p): p is string => typeof p === 'string')
      .slice(0, MAX_PROFILES)
      .map((canonical) => ({ canonical, explicit: false }));
    let at = ats.get(projectId);
    if (!at) ats.set(projectId, (at = { projectId, db }));
    const issues = await validator.validate(at, resource, profiles);
    const errors = issues.filter((i) => i.severity === 'error' || i.severity === 'fatal');
    const first = errors[0];
    if (!first) continue;
    const more = errors.length > 1 ? ` (and ${errors.length - 1} more)` : '';
    throw new FhirError(
      'processing',
      `${resource.resourceType} does not conform to its meta.profile: ${first.details?.text ?? ''}${more}`,
      'write.profile-invalid',
      { status: 422, issues },
    );
  }
}

/**
 * A super administrator may write into another project (meta.project, or the project a membership names): that
 * project must exist, or the resource would belong to no one (and a project created later with that id would find it).
 */
async function checkTargetProjects(
  db: Queryable,
  ctx: RepoContext,
  items: readonly PreparedWrite[],
): Promise<void> {
  const together = new Set(
    items.filter((it) => it.resource.resourceType === 'Project').map((it) => it.projectId),
  );
  const other = items.filter(
    (it) =>
      it.resource.resourceType !== 'Project' &&
      it.projectId !== ctx.actor.projectId &&
      !together.has(it.projectId),
  );
  if (other.length === 0) return;
  const ids = [...new Set(other.map((it) => it.projectId))];
  const r = await db.query<{ id: string }>(
    `SELECT id FROM resources WHERE resource_type = 'Project' AND id = ANY($1::text[]) AND NOT deleted`,
    [ids],
  );
  const live = new Set(r.rows.map((row) => row.id));
  const missing = other.find((it) => !live.has(it.projectId));
  if (missing) {
    const type = missing.resource.resourceType;
    const element = type === 'ProjectMembership' ? 'ProjectMembership.project' : `${type}.meta.project`;
    throw new FhirError(
      'invalid',
      `${element} names Project/${missing.projectId}, which does not exist`,
      'write.no-project',
      {
        expression: [element],
      },
    );
  }
}

/** What a membership's `user` may name; a User may be a member of several projects, a client only of its own. */
const USER_TYPES = new Set(['User', 'ClientApplication']);
/** What a membership's `profile` may name (a ClientApplication only as its own membership's profile). */
const PROFILE_TYPES = new Set(['Patient', 'Practitioner', 'RelatedPerson', 'ClientApplication']);

interface Target {
  element: 'project' | 'user' | 'profile';
  type: string;
  id: string;
  /** The project the target must belong to: the membership's. */
  projectId: string;
}

const refused = (element: string, message: string): FhirError =>
  new FhirError('invalid', `ProjectMembership.${element} ${message}`, `membership.${element}-target`, {
    expression: [`ProjectMembership.${element}`],
  });

/** `Type/id` of a Reference element, with the type among `types`, or a 400 naming the element. */
function referenceOf(resource: PreparedWrite['resource'], element: Target['element'], types: Set<string>) {
  const ref = (resource[element] as { reference?: unknown } | undefined)?.reference;
  const m = typeof ref === 'string' ? /^([A-Za-z]+)\/([^/]+)$/.exec(ref) : null;
  const [, type = '', id = ''] = m ?? [];
  if (!types.has(type) || !isValidId(id)) {
    throw refused(element, `must be a reference of the form <Type>/<id> to a ${[...types].join(', ')}`);
  }
  return { type, id };
}

/** What a membership names that must exist in its own project: its project, profile, and user when a client. */
function membershipTargets(m: PreparedWrite): Target[] {
  const r = m.resource;
  const projectId = m.projectId;
  // prepareWrite already made `project` name the project the membership is stored in.
  const targets: Target[] = [{ element: 'project', type: 'Project', id: projectId, projectId }];
  const user = referenceOf(r, 'user', USER_TYPES);
  if (user.type === 'ClientApplication') targets.push({ element: 'user', ...user, projectId });
  const profile = referenceOf(r, 'profile', PROFILE_TYPES);
  if (profile.type === 'ClientApplication' && (user.type !== profile.type || user.id !== profile.id)) {
    throw refused('profile', 'may name a ClientApplication only in the membership of that client (its user)');
  }
  targets.push({ element: 'profile', ...profile, projectId });
  return targets;
}

/**
 * API.md §3: a membership's profile, and its user when that is a ClientApplication, are live resources of the
 * membership's own project (or stored in the same write), whoever writes it — otherwise a project admin could lend
 * another project's client (and its identity-provider secret) or patient to its own members. A missing target and
 * another project's answer alike, so the answer tells nothing about other projects.
 */
async function checkMembershipTargets(db: Queryable, items: readonly PreparedWrite[]): Promise<void> {
  const targets = items
    .filter((it) => it.resource.resourceType === 'ProjectMembership')
    .flatMap(membershipTargets);
  if (targets.length === 0) return;
  const together = new Map(
    items.map((it) => [`${it.resource.resourceType}/${it.resource.id as string}`, it]),
  );
  const lookup = targets.filter((t) => !together.has(`${t.type}/${t.id}`));
  const stored = new Map<string, string>();
  if (lookup.length > 0) {
    const r = await db.query<{ resource_type: string; id: string; project_id: string }>(
      `SELECT r.resource_type, r.id, r.project_id FROM resources r
       JOIN unnest($1::text[], $2::text[]) AS t(resource_type, id) ON r.resource_type = t.resource_type AND r.id = t.id
       WHERE NOT r.deleted`,
      [lookup.map((t) => t.type), lookup.map((t) => t.id)],
    );
    for (const row of r.rows) stored.set(`${row.resource_type}/${row.id}`, row.project_id);
  }
  for (const t of targets) {
    const key = `${t.type}/${t.id}`;
    const projectId = together.get(key)?.projectId ?? stored.get(key);
    if (projectId !== t.projectId) {
      throw refused(
        t.element,
        t.element === 'project'
          ? `names ${key}, which does not exist`
          : `names ${key}, which is not a resource of the membership's project`,
      );
    }
  }
}

/** The URLs of a ClientApplication that the server fetches (API.md §2), by the element path they are stored at. */
const FETCHED_URLS: readonly (readonly string[])[] = [
  ['identityProvider', 'userInfoUrl'],
  ['identityProvider', 'tokenUrl'],
  ['jwksUri'],
];

/**
 * API.md §2: a ClientApplication may not name a URL the server would fetch whose host is, or resolves to, a loopback,
 * private or link-local address, unless the operator lists it in allowedOutboundHosts. A name that does not resolve
 * yet is accepted; every use checks again (auth/outbound.ts).
 */
async function checkOutboundUrls(ctx: RepoContext, items: readonly PreparedWrite[]): Promise<void> {
  const policy = { allowedHosts: ctx.allowedOutboundHosts ?? [] };
  for (const { resource } of items) {
    if (resource.resourceType !== 'ClientApplication') continue;
    for (const path of FETCHED_URLS) {
      let value: unknown = resource;
      for (const key of path) value = (value as Record<string, unknown> | undefined)?.[key];
      if (typeof value !== 'string' || !(await outboundTargetRefused(value, policy))) continue;
      const expression = `ClientApplication.${path.join('.')}`;
      throw new FhirError(
        'invalid',
        `${expression} names a loopback, private or link-local address; the server does not fetch it`,
        'write.outbound-refused',
        { expression: [expression] },
      );
    }
  }
}
