// Shared steps before a version is written: access, validation, secrets, server-owned meta.
import { assertWrite, type WriteInteraction } from '../access.js';
import { copyRawNumbers } from '../json/raw-numbers.js';
import { isValidId } from '../id.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { assertDepth, MAX_RESOURCE_DEPTH } from '../validation/depth.js';
import { assertValid } from '../validation/validate.js';
import { assertSecurityContextForm, extractBinaryData } from './binary-content.js';
import type { RepoContext } from './context.js';
import { extractSecrets, type ExtractedSecret } from './secrets.js';
import { normaliseSubscription } from '../subscriptions/subscription-resource.js';
import { assertWriteReach } from './reach.js';
import type { NewVersion } from './store.js';

export interface PreparedWrite extends NewVersion {
  secrets: ExtractedSecret[];
  revealedSecret?: string;
  /** A Binary's content, stored in the file store beside the version (binary-content.ts), not in its row. */
  content?: Buffer;
}

export function assertId(id: string): void {
  if (!isValidId(id))
    throw new FhirError('invalid', `Invalid resource id: ${id.slice(0, 80)}`, 'rest.bad-id');
}

/**
 * The request body of a create or update (or a Bundle entry's resource): a JSON object with a resourceType, of the
 * URL's type when one is given, nesting at most MAX_RESOURCE_DEPTH levels (checked before anything walks it).
 */
export function assertBody(body: unknown, resourceType?: string): Resource {
  const r = assertShape(body, resourceType);
  assertDepth(r, MAX_RESOURCE_DEPTH, r.resourceType.slice(0, 64));
  return r;
}

/** The shape checks of assertBody without the depth bound (a batch or transaction Bundle bounds each entry). */
export function assertShape(body: unknown, resourceType?: string): Resource {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new FhirError(
      'structure',
      'The request body must be a FHIR resource (a JSON object)',
      'rest.body-shape',
    );
  }
  const r = body as Resource;
  if (typeof r.resourceType !== 'string') {
    throw new FhirError('structure', 'The resource has no resourceType', 'rest.no-resource-type', {
      expression: ['resourceType'],
    });
  }
  if (resourceType && r.resourceType !== resourceType) {
    throw new FhirError(
      'invalid',
      `The resource type ${r.resourceType} does not match the URL type ${resourceType}`,
      'rest.type-mismatch',
    );
  }
  return r;
}

/** The id in a ProjectMembership's `project` reference (`Project/<id>`), when it has that form. */
function namedProject(resource: Resource): string | undefined {
  const ref = (resource.project as { reference?: unknown } | undefined)?.reference;
  const m = typeof ref === 'string' ? /^Project\/([^/]+)$/.exec(ref) : null;
  return m?.[1] !== undefined && isValidId(m[1]) ? m[1] : undefined;
}

/**
 * The project a written resource belongs to: the caller's, or for super administrators the one named in meta.project,
 * and for a super administrator's ProjectMembership without meta.project the one it names (API.md §3).
 */
function targetProject(ctx: RepoContext, resource: Resource, id: string, existingProject?: string): string {
  if (resource.resourceType === 'Project') return id;
  if (existingProject) return existingProject;
  const asked = resource.meta?.project;
  if (asked === undefined && ctx.actor.superAdmin && resource.resourceType === 'ProjectMembership') {
    // Whether that project exists is a write rule (write-rules.ts); a malformed reference is refused below.
    const named = namedProject(resource);
    if (named) return named;
  }
  if (asked === undefined || asked === ctx.actor.projectId) return ctx.actor.projectId;
  if (typeof asked === 'string' && ctx.actor.superAdmin) return asked;
  throw new FhirError('forbidden', 'meta.project cannot name another project', 'rest.foreign-project', {
    expression: [`${resource.resourceType}.meta.project`],
  });
}

/** A ProjectMembership names the project it is stored in: another project's admin cannot make one that claims it. */
function assertMembershipProject(resource: Resource, projectId: string): void {
  if (resource.resourceType !== 'ProjectMembership') return;
  const ref = (resource.project as { reference?: unknown } | undefined)?.reference;
  if (ref !== undefined && ref !== `Project/${projectId}`) {
    throw new FhirError(
      'invalid',
      `ProjectMembership.project must be Project/${projectId}, the project it belongs to`,
      'rest.membership-project',
      { expression: ['ProjectMembership.project'] },
    );
  }
}

/**
 * Checks and stamps a resource about to become version `versionId` of `id`.
 * `existingProject` is given for updates: a resource never moves between projects. `interaction` is what the write
 * does, for the token's scopes: a first version is a create (an update to a new id included), a later one an update
 * unless the caller says otherwise (the next version of a deleted resource creates it again).
 */
export function prepareWrite(
  ctx: RepoContext,
  input: Resource,
  id: string,
  versionId: number,
  now: Date,
  existingProject?: string,
  interaction: WriteInteraction = versionId === 1 ? 'create' : 'update',
): PreparedWrite {
  assertWrite(ctx.actor, input.resourceType, interaction);
  assertId(id);
  const projectId = targetProject(ctx, input, id, existingProject);
  assertMembershipProject(input, projectId);
  const extracted = extractSecrets(input, versionId === 1);
  const { secrets, revealed } = extracted;
  const clean =
    input.resourceType === 'Subscription' ? normaliseSubscription(extracted.resource) : extracted.resource;
  const meta: Record<string, unknown> = { ...(clean.meta ?? {}) };
  delete meta.versionId;
  delete meta.lastUpdated;
  delete meta.project;
  delete meta.author;
  const resource: Resource = {
    ...clean,
    id,
    meta: {
      ...meta,
      versionId: String(versionId),
      lastUpdated: now.toISOString(),
      project: projectId,
      ...(ctx.author ? { author: { reference: ctx.author } } : {}),
    },
  };
  copyRawNumbers(clean, resource); // top-level decimals (e.g. ChargeItem.factorOverride) keep their text
  assertValid(resource);
  assertWriteReach(ctx, resource, resource.resourceType, interaction);
  if (resource.resourceType === 'Binary') assertSecurityContextForm(resource, ctx.fhirBase);
  if (resource.resourceType === 'Binary' && ctx.binaries) {
    const { resource: row, content } = extractBinaryData(resource);
    return { resource: row, projectId, versionId, lastUpdated: now, secrets, content };
  }
  return { resource, projectId, versionId, lastUpdated: now, secrets, revealedSecret: revealed };
}
