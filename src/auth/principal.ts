// Who is calling: the login behind a token, its membership and project. The single place that turns a
// verified token into the Actor that fhir/access.ts decides on.
import { membershipReach, patientReach, type Actor, type ResourceScope } from '../fhir/access.js';
import type { AccessScope } from '../fhir/types.js';
import type { Queryable } from '../storage/db.js';
import { loginHolds, usableMembership } from './login-rules.js';
import type { FhirContextItem } from './smart-launch.js';
import { patientContext } from './smart-user-scopes.js';

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
  /** The SMART resource scopes of the token presented (smart-scopes.ts); absent: not limited by scopes. */
  scopes?: readonly ResourceScope[];
  /** The launch context of the login (an EHR launch or the patient picker, API.md §11): a Patient id. */
  launchPatient?: string;
  /** The launch context's Encounter id (EHR launch). */
  launchEncounter?: string;
  /** The launch context's further resources (EHR launch, SMART `fhirContext`). */
  launchFhirContext?: FhirContextItem[];
}

export function actorOf(p: Principal): Actor {
  // The login's launch context, else the user's own Patient profile (standalone launch by a Patient user).
  const patient = p.scopes?.some((s) => s.patient)
    ? (p.launchPatient ?? patientContext(p.profile))
    : undefined;
  return {
    projectId: p.projectId,
    projectAdmin: p.projectAdmin,
    superAdmin: p.superAdmin,
    membershipId: p.membershipId,
    ...(p.scopes ? { scopes: p.scopes } : {}),
    ...(patient !== undefined ? { patient } : {}),
  };
}

/**
 * What the principal may read: its project (all, for a super administrator), narrowed by `patient/` scopes, and for
 * a member to its own ProjectMembership among memberships.
 */
export function scopeOf(p: Principal, actor: Actor = actorOf(p)): AccessScope {
  const patient = patientReach(actor);
  const membership = membershipReach(actor);
  return {
    projectId: p.superAdmin ? null : p.projectId,
    ...(patient ? { patient } : {}),
    ...(membership !== undefined ? { membership } : {}),
  };
}

interface LoginRow {
  id: string;
  membership_id: string;
  project_id: string;
  profile: string;
  client_id: string | null;
  user_id: string | null;
  m_admin: string | null;
  p_super: string | null;
  launch_patient: string | null;
  launch_encounter: string | null;
  launch_fhir_context: FhirContextItem[] | null;
}

const LOGIN_COLUMNS =
  'id, membership_id, project_id, profile, client_id, user_id, auth_method, created_at, launch_patient, launch_encounter, ' +
  'launch_fhir_context';

/** The principal of login rows `l` (a CTE with the `logins` columns) that still hold (login-rules.ts). */
const principalSql = (source: string): string =>
  `WITH l AS (${source})
   SELECT l.id, l.membership_id, l.project_id, l.profile, l.client_id, l.user_id, l.launch_patient,
          l.launch_encounter, l.launch_fhir_context, m.content->>'admin' AS m_admin, p.content->>'superAdmin' AS p_super
   FROM l JOIN resources m ON m.resource_type = 'ProjectMembership' AND m.id = l.membership_id
     JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id
   WHERE ${usableMembership('m', 'p')} AND ${loginHolds('l', 'm')}`;

const LOAD_SQL = principalSql(`SELECT ${LOGIN_COLUMNS} FROM logins WHERE id = $1 AND NOT revoked`);
const CHECK_SQL = principalSql(
  `SELECT $1::text AS id, $2::text AS membership_id, $3::text AS project_id, $4::text AS profile,
          $5::text AS client_id, $6::text AS user_id, $7::text AS auth_method, $8::timestamptz AS created_at,
          $9::text AS launch_patient, $10::text AS launch_encounter, $11::jsonb AS launch_fhir_context`,
);

function toPrincipal(row: LoginRow | undefined, sub: string): Principal | undefined {
  if (!row) return undefined;
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
    ...(row.launch_patient ? { launchPatient: row.launch_patient } : {}),
    ...(row.launch_encounter ? { launchEncounter: row.launch_encounter } : {}),
    ...(row.launch_fhir_context ? { launchFhirContext: row.launch_fhir_context } : {}),
  };
}

/**
 * The principal of a login, or undefined when the login is revoked or no longer holds: its membership, client,
 * user or project is gone, deactivated (now or at any time since the login began), or points outside its project.
 */
export async function loadPrincipal(
  db: Queryable,
  loginId: string,
  sub: string,
): Promise<Principal | undefined> {
  const r = await db.query<LoginRow>(LOAD_SQL, [loginId], { prepare: true });
  return toPrincipal(r.rows[0], sub);
}

/** The `logins` columns of a new login, in the order CHECK_SQL and the INSERT below take them. */
const loginArgs = (l: NewLogin, createdAt: Date): unknown[] => [
  l.id,
  l.membershipId,
  l.projectId,
  l.profile,
  l.clientId ?? null,
  l.userId ?? null,
  l.authMethod,
  createdAt,
  l.launchPatient ?? null,
  l.launchEncounter ?? null,
  l.launchFhirContext ? JSON.stringify(l.launchFhirContext) : null,
];

/** Whether a login about to be created would hold (the same rules as loadPrincipal), checked before it is stored. */
export async function loginWouldHold(db: Queryable, l: NewLogin, createdAt: Date): Promise<boolean> {
  const r = await db.query<LoginRow>(CHECK_SQL, loginArgs(l, createdAt), { prepare: true });
  return r.rows.length > 0;
}

export interface NewLogin {
  id: string;
  membershipId: string;
  projectId: string;
  profile: string;
  clientId?: string;
  userId?: string;
  authMethod: 'client_credentials' | 'password' | 'external' | 'token-exchange';
  /** The launch context (API.md §11): the patient and encounter an EHR launch or the patient picker gave. */
  launchPatient?: string;
  launchEncounter?: string;
  /** The EHR launch's further resources (SMART `fhirContext`). */
  launchFhirContext?: FhirContextItem[];
}

/** Stores a login; `createdAt` is the app's clock, the clock resource versions are stamped with (login-rules.ts). */
export async function createLogin(db: Queryable, l: NewLogin, createdAt: Date): Promise<void> {
  await db.query(
    `INSERT INTO logins (id, membership_id, project_id, profile, client_id, user_id, auth_method, created_at,
       launch_patient, launch_encounter, launch_fhir_context)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb)`,
    loginArgs(l, createdAt),
  );
}

interface MembershipPrincipalRow {
  project_id: string;
  m_admin: string | null;
  p_super: string | null;
}

/**
 * The principal of a membership found without a login (an external token presented directly), when the membership
 * can be logged in through (login-rules.ts) and still names `profile`.
 */
export async function loadMembershipPrincipal(
  db: Queryable,
  membershipId: string,
  profile: string,
  sub: string,
  external: NonNullable<Principal['external']>,
): Promise<Principal | undefined> {
  const r = await db.query<MembershipPrincipalRow>(
    `SELECT m.project_id, m.content->>'admin' AS m_admin, p.content->>'superAdmin' AS p_super
     FROM resources m JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id
     WHERE m.id = $1 AND m.content->'profile'->>'reference' = $2 AND ${usableMembership('m', 'p')}`,
    [membershipId, profile],
    { prepare: true },
  );
  const row = r.rows[0];
  if (!row) return undefined;
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
  /** ProjectMembership.admin and the project's superAdmin, for what the login may be granted (smart-scopes.ts). */
  admin: boolean;
  super_admin: boolean;
}

/**
 * Memberships whose `user` is the given reference (e.g. `User/abc`, `ClientApplication/abc`) and that can be logged
 * in through (login-rules.ts), oldest first; only those of `projectId` when it is given.
 */
export async function activeMembershipsOfUser(
  db: Queryable,
  userRef: string,
  projectId?: string,
): Promise<ActiveMembership[]> {
  const r = await db.query<ActiveMembership>(
    `SELECT m.id, m.project_id, m.content->'profile'->>'reference' AS profile,
            coalesce(m.content->>'admin' = 'true', false) AS admin,
            coalesce(p.content->>'superAdmin' = 'true', false) AS super_admin
     FROM resources m JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id
     WHERE m.content->'user'->>'reference' = $1 AND ($2::text IS NULL OR m.project_id = $2)
       AND ${usableMembership('m', 'p')}
     ORDER BY m.rid`,
    [userRef, projectId ?? null],
  );
  return r.rows;
}
