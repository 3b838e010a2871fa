// Ensures the super administrator at every start (API.md §1), idempotently and under an advisory lock so that
// several instances starting together create it once. The configuration is the source of truth.
import bcrypt from 'bcryptjs';
import type { Config } from '../config/config.js';
import { systemContext, type RepoContext } from '../fhir/repository/context.js';
import { createResource } from '../fhir/repository/create.js';
import { generateSecret, readCredential, sha256, storeSecrets } from '../fhir/repository/secrets.js';
import { updateResource } from '../fhir/repository/update.js';
import type { Resource } from '../fhir/types.js';
import type { Db } from '../storage/db.js';
import { membershipsOfUser } from './principal.js';

const LOCK_KEY = 72_410_002;
const CLIENT_NAME = 'Super Admin Client';

export interface BootstrapResult {
  projectId: string;
  userId: string;
  clientId: string;
  /** Values generated at this start, to be printed once. */
  generated: { password?: string; clientId?: string; clientSecret?: string };
}

type Env = Pick<RepoContext, 'clock' | 'newId' | 'fhirBase'>;

async function firstId(db: Db, sql: string, args: unknown[]): Promise<string | undefined> {
  return (await db.query<{ id: string }>(sql, args)).rows[0]?.id;
}

async function create(db: Db, ctx: RepoContext, r: Resource): Promise<string> {
  const res = await createResource(db, ctx, r);
  return (res.body as Resource).id as string;
}

async function ensureMembership(
  db: Db,
  ctx: RepoContext,
  projectId: string,
  userRef: string,
  profileRef: () => Promise<string>,
) {
  const existing = (await membershipsOfUser(db, userRef)).find((m) => m.project_id === projectId);
  if (!existing) {
    await create(db, ctx, {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${projectId}` },
      user: { reference: userRef },
      profile: { reference: await profileRef() },
      admin: true,
    });
    return;
  }
  const m = JSON.parse(existing.json) as Resource;
  if (m.admin !== true || m.active === false) {
    await updateResource(db, ctx, 'ProjectMembership', existing.id, { ...m, admin: true, active: true });
  }
}

export async function ensureSuperAdmin(db: Db, env: Env, admin: Config['admin']): Promise<BootstrapResult> {
  return db.session(async (conn) => {
    await conn.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    try {
      return await ensure(db, env, admin);
    } finally {
      await conn.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
    }
  });
}

async function ensure(db: Db, env: Env, admin: Config['admin']): Promise<BootstrapResult> {
  const generated: BootstrapResult['generated'] = {};
  let projectId = await firstId(
    db,
    `SELECT id FROM resources WHERE resource_type = 'Project' AND NOT deleted AND content->>'superAdmin' = 'true' ORDER BY rid LIMIT 1`,
    [],
  );
  if (!projectId) {
    projectId = await create(db, systemContext('', env), {
      resourceType: 'Project',
      name: 'Super Admin',
      superAdmin: true,
    });
  }
  const ctx = systemContext(projectId, env);

  // The User with admin.email, its password, its Practitioner profile and admin membership.
  let userId = await firstId(
    db,
    `SELECT id FROM resources WHERE resource_type = 'User' AND NOT deleted AND lower(content->>'email') = lower($1) ORDER BY rid LIMIT 1`,
    [admin.email],
  );
  if (!userId) {
    userId = await create(db, ctx, {
      resourceType: 'User',
      firstName: 'Super',
      lastName: 'Admin',
      email: admin.email,
    });
  }
  const hash = await readCredential(db, 'User', userId, 'password_hash');
  if (admin.password ? !hash || !(await bcrypt.compare(admin.password, hash)) : !hash) {
    const password = admin.password ?? generateSecret().slice(0, 20);
    if (!admin.password) generated.password = password;
    await storeSecrets(db, 'User', userId, [
      { kind: 'password_hash', hash: await bcrypt.hash(password, 10) },
    ]);
  }
  await ensureMembership(db, ctx, projectId, `User/${userId}`, async () => {
    const id = await create(db, ctx, {
      resourceType: 'Practitioner',
      name: [{ given: ['Super'], family: 'Admin' }],
      telecom: [{ system: 'email', value: admin.email }],
    });
    return `Practitioner/${id}`;
  });

  // The ClientApplication admin.clientId (or the one generated at an earlier start) with its secret.
  let clientId = admin.clientId;
  let createdClient = false;
  if (clientId) {
    const row = await firstId(
      db,
      `SELECT id FROM resources WHERE resource_type = 'ClientApplication' AND id = $1 AND NOT deleted`,
      [clientId],
    );
    if (!row) {
      await updateResource(db, ctx, 'ClientApplication', clientId, {
        resourceType: 'ClientApplication',
        id: clientId,
        name: CLIENT_NAME,
      });
      createdClient = true;
    }
  } else {
    clientId = await firstId(
      db,
      `SELECT id FROM resources WHERE resource_type = 'ClientApplication' AND NOT deleted AND project_id = $1 AND content->>'name' = $2 ORDER BY rid LIMIT 1`,
      [projectId, CLIENT_NAME],
    );
    if (!clientId) {
      clientId = env.newId();
      generated.clientId = clientId;
      createdClient = true;
      await updateResource(db, ctx, 'ClientApplication', clientId, {
        resourceType: 'ClientApplication',
        id: clientId,
        name: CLIENT_NAME,
      });
    }
  }
  // A create without a secret generates one; the configured secret (or a fresh one) replaces it here.
  const secretHash = await readCredential(db, 'ClientApplication', clientId, 'client_secret');
  const wanted = admin.clientSecret;
  if (wanted ? secretHash !== sha256(wanted) : !secretHash || createdClient) {
    const secret = wanted ?? generateSecret();
    if (!wanted) generated.clientSecret = secret;
    await storeSecrets(db, 'ClientApplication', clientId, [{ kind: 'client_secret', hash: sha256(secret) }]);
  }
  const cid = clientId;
  await ensureMembership(
    db,
    ctx,
    projectId,
    `ClientApplication/${cid}`,
    async () => `ClientApplication/${cid}`,
  );
  return { projectId, userId, clientId, generated };
}
