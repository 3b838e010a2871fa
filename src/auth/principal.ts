// Who is calling: the login behind a token, its membership and project. The single place that turns a
// verified token into the Actor that fhir/access.ts decides on.
import type { Actor } from '../fhir/access.js';
import type { AccessScope } from '../fhir/types.js';
import type { Queryable } from '../storage/db.js';

export interface Principal {
  loginId: string;
  membershipId: string;
  projectId: string;
  /** `<Type>/<id>` of the profile (Practitioner, Patient, ClientApplication…). */
  profile: string;
  clientId?: string;
  userId?: string;
  sub: string;
  projectAdmin: boolean;
  superAdmin: boolean;
  /** Set when the caller presented an external identity provider's JWT (API.md §4) instead of a service token. */
  external?: { exp: number; tokenHash: string };
}

export function actorOf(p: Principal): Actor {
  return { projectId: p.projectId, projectAdmin: p.projectAdmin, superAdmin: p.superAdmin };
}

export function scopeOf(p: Principal): AccessScope {
  return { projectId: p.superAdmin ? null : p.projectId };
}

interface LoginRow {
  id: string;
  membership_id: string;
  project_id: string;
  profile: string;
  client_id: string | null;
  user_id: string | null;
  revoked: boolean;
  m_admin: string | null;
  m_active: string | null;
  m_deleted: boolean;
  p_super: string | null;
  p_deleted: boolean;
}

/** The principal of a login, or undefined when the login is revoked or its membership/project is gone. */
export async function loadPrincipal(
  db: Queryable,
  loginId: string,
  sub: string,
): Promise<Principal | undefined> {
  const r = await db.query<LoginRow>(
    `SELECT l.id, l.membership_id, l.project_id, l.profile, l.client_id, l.user_id, l.revoked,
            m.content->>'admin' AS m_admin, m.content->>'active' AS m_active, m.deleted AS m_deleted,
            p.content->>'superAdmin' AS p_super, p.deleted AS p_deleted
     FROM logins l
     JOIN resources m ON m.resource_type = 'ProjectMembership' AND m.id = l.membership_id
     JOIN resources p ON p.resource_type = 'Project' AND p.id = l.project_id
     WHERE l.id = $1`,
    [loginId],
    { prepare: true },
  );
  const row = r.rows[0];
  if (!row || row.revoked || row.m_deleted || row.p_deleted || row.m_active === 'false') return undefined;
  return {
    loginId: row.id,
    membershipId: row.membership_id,
    projectId: row.project_id,
    profile: row.profile,
    ...(row.client_id ? { clientId: row.client_id } : {}),
    ...(row.user_id ? { userId: row.user_id } : {}),
    sub,
    projectAdmin: row.m_admin === 'true',
    superAdmin: row.p_super === 'true',
  };
}

export interface NewLogin {
  id: string;
  membershipId: string;
  projectId: string;
  profile: string;
  clientId?: string;
  userId?: string;
  authMethod: 'client_credentials' | 'password' | 'external' | 'token-exchange';
}

export async function createLogin(db: Queryable, l: NewLogin): Promise<void> {
  await db.query(
    `INSERT INTO logins (id, membership_id, project_id, profile, client_id, user_id, auth_method)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [l.id, l.membershipId, l.projectId, l.profile, l.clientId ?? null, l.userId ?? null, l.authMethod],
  );
}

export interface MembershipRow {
  id: string;
  project_id: string;
  json: string;
}

/** Active memberships whose `user` is the given reference (e.g. `ClientApplication/abc`). */
export async function membershipsOfUser(db: Queryable, userRef: string): Promise<MembershipRow[]> {
  const r = await db.query<MembershipRow>(
    `SELECT id, project_id, content::text AS json FROM resources
     WHERE resource_type = 'ProjectMembership' AND NOT deleted AND content->'user'->>'reference' = $1
     ORDER BY rid`,
    [userRef],
  );
  return r.rows;
}

interface MembershipPrincipalRow {
  project_id: string;
  m_admin: string | null;
  m_active: string | null;
  p_super: string | null;
  p_deleted: boolean | null;
}

/** The principal of a membership found without a login (an external token presented directly). */
export async function loadMembershipPrincipal(
  db: Queryable,
  membershipId: string,
  profile: string,
  sub: string,
  external: NonNullable<Principal['external']>,
): Promise<Principal | undefined> {
  const r = await db.query<MembershipPrincipalRow>(
    `SELECT m.project_id, m.content->>'admin' AS m_admin, m.content->>'active' AS m_active,
            p.content->>'superAdmin' AS p_super, p.deleted AS p_deleted
     FROM resources m JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id
     WHERE m.resource_type = 'ProjectMembership' AND m.id = $1 AND NOT m.deleted`,
    [membershipId],
    { prepare: true },
  );
  const row = r.rows[0];
  if (!row || row.p_deleted || row.m_active === 'false') return undefined;
  return {
    loginId: '',
    membershipId,
    projectId: row.project_id,
    profile,
    sub,
    projectAdmin: row.m_admin === 'true',
    superAdmin: row.p_super === 'true',
    external,
  };
}

/** Ends a login: its tokens stop working once cached principals are dropped (PrincipalCache.changed). */
export async function revokeLogin(db: Queryable, loginId: string): Promise<boolean> {
  const r = await db.query('UPDATE logins SET revoked = true WHERE id = $1 AND NOT revoked', [loginId]);
  return r.rowCount > 0;
}

/** Ends a User's logins made with the given method (e.g. its password logins after a password change). */
export async function revokeLoginsOfUser(
  db: Queryable,
  userId: string,
  authMethod: NewLogin['authMethod'],
  exceptLoginId = '',
): Promise<number> {
  const r = await db.query(
    'UPDATE logins SET revoked = true WHERE user_id = $1 AND auth_method = $2 AND id <> $3 AND NOT revoked',
    [userId, authMethod, exceptLoginId],
  );
  return r.rowCount;
}

export interface ActiveMembership {
  id: string;
  project_id: string;
  profile: string;
}

/** Active memberships with a profile, of live projects, whose `user` is the given reference (oldest first). */
export async function activeMembershipsOfUser(db: Queryable, userRef: string): Promise<ActiveMembership[]> {
  const r = await db.query<ActiveMembership>(
    `SELECT m.id, m.project_id, m.content->'profile'->>'reference' AS profile
     FROM resources m JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id AND NOT p.deleted
     WHERE m.resource_type = 'ProjectMembership' AND NOT m.deleted AND m.content->'user'->>'reference' = $1
       AND coalesce(m.content->>'active', 'true') <> 'false' AND m.content->'profile'->>'reference' IS NOT NULL
     ORDER BY m.rid`,
    [userRef],
  );
  return r.rows;
}
