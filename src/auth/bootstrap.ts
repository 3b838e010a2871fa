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
import { consoleRedirectUri, ensureConsoleClient } from './console-client.js';

const LOCK_KEY = 72_410_002;
const CLIENT_NAME = 'Super Admin Client';

export interface BootstrapResult {
  projectId: string;
  userId: string;
  clientId: string;
  /** False when a tenant's project holds the console's client id: the console cannot sign anyone in. */
  consoleClient: boolean;
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

/**
 * Start-up refuses a configuration that names another project's resource as the super administrator's: adopting it
 * would hand that project's admins a super-admin login (API.md §1, §3). The message is one line naming the key.
 */
export class BootstrapError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BootstrapError';
  }
}

/** Whether `ref` (`Type/id`) is a live resource of the project. */
async function inProject(db: Db, projectId: string, ref: string | undefined): Promise<boolean> {
  const m = ref ? /^([A-Za-z]{1,64})\/([A-Za-z0-9.-]{1,64})$/.exec(ref) : null;
  if (!m) return false;
  const row = await firstId(
    db,
    `SELECT id FROM resources WHERE resource_type = $1 AND id = $2 AND project_id = $3 AND NOT deleted`,
    [m[1], m[2], projectId],
  );
  return row !== undefined;
}

/** The admin membership of `userRef` in the Super Admin project (never one of another project), made whole. */
async function ensureMembership(
  db: Db,
  ctx: RepoContext,
  projectId: string,
  userRef: string,
  profileRef: () => Promise<string>,
) {
  const r = await db.query<{ id: string; json: string }>(
    `SELECT id, content::text AS json FROM resources
     WHERE resource_type = 'ProjectMembership' AND NOT deleted AND project_id = $1
       AND content->'user'->>'reference' = $2
     ORDER BY rid LIMIT 1`,
    [projectId, userRef],
  );
  const existing = r.rows[0];
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
  const m = JSON.parse(existing.json) as Resource & {
    project?: { reference?: string };
    profile?: { reference?: string };
  };
  const projectOk = m.project?.reference === `Project/${projectId}`;
  // A profile outside the project (restored data) would be refused at login (login-rules.ts): replace it.
  const profileOk = await inProject(db, projectId, m.profile?.reference);
  if (m.admin !== true || m.active === false || !projectOk || !profileOk) {
    await updateResource(db, ctx, 'ProjectMembership', existing.id, {
      ...m,
      project: { reference: `Project/${projectId}` },
      ...(profileOk ? {} : { profile: { reference: await profileRef() } }),
      admin: true,
      active: true,
    });
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
  const users = await db.query<{ id: string; project_id: string }>(
    `SELECT id, project_id FROM resources WHERE resource_type = 'User' AND NOT deleted AND lower(content->>'email') = lower($1) ORDER BY rid LIMIT 1`,
    [admin.email],
  );
  let userId = users.rows[0]?.id;
  if (users.rows[0] && users.rows[0].project_id !== projectId) {
    // A project's admins invited this address: setting its password and making it super administrator would give
    // that project a super administrator's User; a second User with the address would make password login ambiguous.
    throw new BootstrapError(
      `Invalid configuration: admin.email: ${admin.email} is the email of a User of another project; choose another admin.email`,
    );
  }
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
    // Deleted rows count: updating a deleted id revives it in the project it was deleted from.
    const rows = await db.query<{ project_id: string; deleted: boolean }>(
      `SELECT project_id, deleted FROM resources WHERE resource_type = 'ClientApplication' AND id = $1`,
      [clientId],
    );
    const row = rows.rows[0];
    if (row && row.project_id !== projectId) {
      // A tenant created this id: adopting it would let its admins reset the secret and log in as super administrator.
      throw new BootstrapError(
        `Invalid configuration: admin.clientId: ClientApplication/${clientId} belongs to another project; choose another admin.clientId`,
      );
    }
    if (!row || row.deleted) {
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
    // The operator holds this secret: the client is confidential (client-auth.ts).
    const hash = sha256(secret);
    await storeSecrets(db, 'ClientApplication', clientId, [
      { kind: 'client_secret', hash },
      { kind: 'client_secret_set', hash },
    ]);
  }
  const cid = clientId;
  await ensureMembership(
    db,
    ctx,
    projectId,
    `ClientApplication/${cid}`,
    async () => `ClientApplication/${cid}`,
  );
  const consoleClient = await ensureConsoleClient(db, ctx, projectId, consoleRedirectUri(env.fhirBase));
  return { projectId, userId, clientId, consoleClient, generated };
}
