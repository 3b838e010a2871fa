// POST /admin/projects/<id>/invite (API.md §3, seed §4.2): creates the profile, links or creates the User, and
// creates the ProjectMembership, all in one transaction. externalId uniqueness is the database's (a unique index),
// so two concurrent invites with one externalId cannot both succeed.
import { z } from 'zod';
import { systemContext, type RepoContext } from '../fhir/repository/context.js';
import { commitCreates } from '../fhir/repository/create.js';
import { prepareWrite } from '../fhir/repository/prepare.js';
import { selectCurrent } from '../fhir/repository/store.js';
import { FhirError } from '../fhir/outcome.js';
import type { Resource } from '../fhir/types.js';
import type { Db } from '../storage/db.js';
import { assertWrite } from '../fhir/access.js';
import { actorOf, type Principal } from './principal.js';

const inviteSchema = z.object({
  resourceType: z.enum(['Practitioner', 'Patient']),
  firstName: z.string().trim().min(1).max(200),
  lastName: z.string().trim().min(1).max(200),
  email: z.email().max(320).optional(),
  externalId: z.string().min(1).max(1024).optional(),
  admin: z.boolean().optional(),
});

export type InviteRequest = z.infer<typeof inviteSchema>;

export function parseInvite(body: unknown): InviteRequest {
  const r = inviteSchema.safeParse(body);
  if (!r.success) {
    const issue = r.error.issues[0];
    const field = issue?.path.join('.') || 'body';
    throw new FhirError(
      'invalid',
      `Invalid invite: ${field}: ${issue?.message ?? 'invalid'}`,
      'invite.invalid',
      {
        expression: [field],
      },
    );
  }
  return r.data;
}

export async function invite(
  db: Db,
  env: Pick<RepoContext, 'clock' | 'newId' | 'fhirBase'>,
  principal: Principal,
  projectId: string,
  body: unknown,
): Promise<Resource> {
  if (!principal.superAdmin && !(principal.projectAdmin && principal.projectId === projectId)) {
    throw new FhirError('forbidden', 'Only an admin of this project may invite', 'invite.forbidden');
  }
  const req = parseInvite(body);
  // A token narrowed by SMART scopes invites only when they permit creating the profile and the membership.
  assertWrite(actorOf(principal), req.resourceType, 'create');
  assertWrite(actorOf(principal), 'ProjectMembership', 'create');
  const project = await selectCurrent(db, 'Project', projectId);
  if (!project || project.deleted)
    throw new FhirError('not-found', `Not found: Project/${projectId}`, 'invite.no-project');
  const ctx: RepoContext = { ...systemContext(projectId, env), author: principal.profile };
  return db.transaction(async (tx) => {
    const now = ctx.clock();
    const profile = prepareWrite(
      ctx,
      {
        resourceType: req.resourceType,
        name: [{ given: [req.firstName], family: req.lastName }],
        ...(req.email ? { telecom: [{ system: 'email', value: req.email }] } : {}),
      },
      ctx.newId(),
      1,
      now,
    );
    const writes = [profile];
    let userId: string | undefined;
    if (req.email) {
      const r = await tx.query<{ id: string }>(
        `SELECT id FROM resources WHERE resource_type = 'User' AND NOT deleted AND lower(content->>'email') = lower($1) ORDER BY rid LIMIT 1`,
        [req.email],
      );
      userId = r.rows[0]?.id;
    }
    if (!userId) {
      const user = prepareWrite(
        ctx,
        {
          resourceType: 'User',
          firstName: req.firstName,
          lastName: req.lastName,
          ...(req.email ? { email: req.email } : {}),
        },
        ctx.newId(),
        1,
        now,
      );
      userId = user.resource.id as string;
      writes.push(user);
    }
    const membership = prepareWrite(
      ctx,
      {
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${projectId}` },
        user: { reference: `User/${userId}` },
        profile: { reference: `${req.resourceType}/${profile.resource.id as string}` },
        ...(req.externalId !== undefined ? { externalId: req.externalId } : {}),
        ...(req.admin !== undefined ? { admin: req.admin } : {}),
      },
      ctx.newId(),
      1,
      now,
    );
    writes.push(membership);
    await commitCreates(tx, ctx, writes);
    return membership.resource;
  });
}
