// Shared steps before a version is written: access, validation, secrets, server-owned meta.
import { assertWrite } from '../access.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { assertValid } from '../validation/validate.js';
import type { RepoContext } from './context.js';
import { extractSecrets, type ExtractedSecret } from './secrets.js';
import type { NewVersion } from './store.js';

export interface PreparedWrite extends NewVersion {
  secrets: ExtractedSecret[];
  revealedSecret?: string;
}

const ID_RE = /^[A-Za-z0-9\-.]{1,64}$/;

export function assertId(id: string): void {
  if (!ID_RE.test(id))
    throw new FhirError('invalid', `Invalid resource id: ${id.slice(0, 80)}`, 'rest.bad-id');
}

export function assertBody(body: unknown, resourceType?: string): Resource {
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

/** The project a written resource belongs to: the caller's, or for super administrators the one named in meta.project. */
function targetProject(ctx: RepoContext, resource: Resource, id: string, existingProject?: string): string {
  if (resource.resourceType === 'Project') return id;
  if (existingProject) return existingProject;
  const asked = resource.meta?.project;
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
 * `existingProject` is given for updates: a resource never moves between projects.
 */
export function prepareWrite(
  ctx: RepoContext,
  input: Resource,
  id: string,
  versionId: number,
  now: Date,
  existingProject?: string,
): PreparedWrite {
  assertWrite(ctx.actor, input.resourceType);
  assertId(id);
  const projectId = targetProject(ctx, input, id, existingProject);
  assertMembershipProject(input, projectId);
  const { resource: clean, secrets, revealed } = extractSecrets(input, versionId === 1);
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
  assertValid(resource);
  return { resource, projectId, versionId, lastUpdated: now, secrets, revealedSecret: revealed };
}
