// POST /auth/login (API.md §2): a User's email and password (bcrypt, `credentials` table) and a PKCE S256 code
// challenge give a login and a one-time authorization code for the token endpoint. https://www.rfc-editor.org/rfc/rfc7636
// Also the super administrator's way to set a User's password.
import bcrypt from 'bcryptjs';
import { z } from 'zod';
import { hasSuperAdminPowers } from '../fhir/access.js';
import { FhirError, notFound } from '../fhir/outcome.js';
import { readCredential, storeSecrets } from '../fhir/repository/secrets.js';
import { selectCurrent } from '../fhir/repository/store.js';
import { createAuthorizationCode, purgeExpiredCodes, S256_CHALLENGE } from './authorization-code.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import {
  activeMembershipsOfUser,
  actorOf,
  createLogin,
  revokeLoginsOfUser,
  type ActiveMembership,
  type Principal,
} from './principal.js';
import { purgeExpiredRefreshTokens } from './refresh-token.js';

/** Scopes a user login may be granted; others asked for are left out of the grant (RFC 6749 §3.3). */
export const SUPPORTED_SCOPES = ['openid', 'profile', 'email', 'fhirUser', 'offline_access', 'offline'];

/** Compared against when the email is unknown, so that unknown emails and wrong passwords take the same time. */
const DUMMY_HASH = '$2b$10$88XtF/pQE7WM/pDE9E8xH.0kNtXqGI6dvCImH.CboJ/ycS7xlJU7u';
const BCRYPT_COST = 10;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;

// Unknown fields (MedplumClient sends e.g. `remember`, `resourceType`) are ignored; empty strings count as absent.
const optional = (max: number) =>
  z
    .string()
    .max(max)
    .optional()
    .transform((v) => (v === '' ? undefined : v));

const loginSchema = z.object({
  email: z.string().trim().min(1).max(320),
  password: z.string().min(1).max(1024),
  codeChallenge: optional(256),
  codeChallengeMethod: optional(32),
  projectId: optional(64),
  clientId: optional(64),
  scope: optional(1024),
  nonce: optional(512),
});

function parse<T>(schema: z.ZodType<T>, body: unknown, what: string, code: string): T {
  const r = schema.safeParse(body);
  if (r.success) return r.data;
  const issue = r.error.issues[0];
  const field = issue?.path.join('.') || 'body';
  throw new FhirError('invalid', `Invalid ${what}: ${field}: ${issue?.message ?? 'invalid'}`, code, {
    expression: [field],
  });
}

/** The scope granted for a requested one: always `openid`, plus the supported scopes asked for. */
export function grantedScope(requested: string | undefined): string {
  const asked = new Set((requested ?? '').split(/\s+/));
  return ['openid', ...SUPPORTED_SCOPES.filter((s) => s !== 'openid' && asked.has(s))].join(' ');
}

export async function checkPassword(deps: AuthDeps, email: string, password: string): Promise<string> {
  const r = await deps.db.query<{ id: string }>(
    `SELECT id FROM resources WHERE resource_type = 'User' AND NOT deleted AND lower(content->>'email') = lower($1)
     ORDER BY rid LIMIT 1`,
    [email],
  );
  const userId = r.rows[0]?.id;
  const hash = userId ? await readCredential(deps.db, 'User', userId, 'password_hash') : undefined;
  const ok = await bcrypt.compare(password, hash ?? DUMMY_HASH);
  // One answer for an unknown email, a User without a password and a wrong password (no user enumeration).
  if (!userId || !hash || !ok) {
    throw new FhirError('invalid', 'Email or password is invalid', 'login.bad-credentials');
  }
  return userId;
}

export interface LoginAnswer {
  login: string;
  code: string;
}

export async function passwordLogin(deps: AuthDeps, body: unknown): Promise<LoginAnswer> {
  const req = parse(loginSchema, body, 'login', 'login.invalid');
  if (req.codeChallengeMethod !== 'S256') {
    throw new FhirError(
      'invalid',
      'codeChallengeMethod must be S256 (plain is not accepted)',
      'login.pkce-method',
      { expression: ['codeChallengeMethod'] },
    );
  }
  if (!req.codeChallenge || !S256_CHALLENGE.test(req.codeChallenge)) {
    throw new FhirError(
      'invalid',
      'codeChallenge must be the base64url SHA-256 of the code verifier (43 characters)',
      'login.pkce-challenge',
      { expression: ['codeChallenge'] },
    );
  }
  let clientProject: string | undefined;
  if (req.clientId !== undefined) {
    const client = ID.test(req.clientId)
      ? await selectCurrent(deps.db, 'ClientApplication', req.clientId)
      : undefined;
    // ClientApplication.status is `active | error | off`: a deactivated client starts no login.
    const status =
      client && !client.deleted ? (JSON.parse(client.json) as { status?: unknown }).status : 'off';
    if (!client || client.deleted || (status !== undefined && status !== 'active')) {
      throw new FhirError('invalid', 'Unknown clientId', 'login.unknown-client', {
        expression: ['clientId'],
      });
    }
    clientProject = client.project_id;
  }

  const userId = await checkPassword(deps, req.email, req.password);

  const memberships = (await activeMembershipsOfUser(deps.db, `User/${userId}`)).filter(
    (m) =>
      (req.projectId === undefined || m.project_id === req.projectId) &&
      (clientProject === undefined || m.project_id === clientProject),
  );
  const membership: ActiveMembership | undefined = memberships[0];
  if (!membership) {
    throw new FhirError(
      'forbidden',
      req.projectId !== undefined || clientProject !== undefined
        ? 'The user has no active membership in that project'
        : 'The user has no active project membership',
      'login.no-membership',
    );
  }

  const loginId = deps.newId();
  const grant = {
    scope: grantedScope(req.scope),
    authTime: nowSeconds(deps),
    ...(req.nonce !== undefined ? { nonce: req.nonce } : {}),
  };
  const code = await deps.db.transaction(async (tx) => {
    await createLogin(
      tx,
      {
        id: loginId,
        membershipId: membership.id,
        projectId: membership.project_id,
        profile: membership.profile,
        userId,
        ...(req.clientId !== undefined ? { clientId: req.clientId } : {}),
        authMethod: 'password',
      },
      deps.clock(),
    );
    return createAuthorizationCode(tx, deps, loginId, req.codeChallenge as string, grant);
  });
  // Housekeeping; a failure here must not fail the login.
  await purgeExpiredCodes(deps.db, deps).catch(() => undefined);
  await purgeExpiredRefreshTokens(deps.db, deps).catch(() => undefined);
  return { login: loginId, code };
}

const passwordSchema = z.object({ password: z.string().min(8).max(200) });

/**
 * POST /admin/users/<id>/password (super administrators only): sets a User's password and ends the User's other
 * password logins, so that a reset locks out whoever knew the old password.
 */
export async function setUserPassword(
  deps: AuthDeps,
  principal: Principal,
  userId: string,
  body: unknown,
): Promise<void> {
  if (!hasSuperAdminPowers(actorOf(principal))) {
    throw new FhirError('forbidden', 'Only a super administrator may set passwords', 'password.forbidden');
  }
  const { password } = parse(passwordSchema, body, 'password request', 'password.invalid');
  if (bcrypt.truncates(password)) {
    throw new FhirError(
      'invalid',
      'Invalid password request: password: longer than 72 bytes',
      'password.long',
      {
        expression: ['password'],
      },
    );
  }
  const user = ID.test(userId) ? await selectCurrent(deps.db, 'User', userId) : undefined;
  if (!user || user.deleted) throw notFound(`User/${userId}`, 'password.no-user');
  const hash = await bcrypt.hash(password, BCRYPT_COST);
  await storeSecrets(deps.db, 'User', userId, [{ kind: 'password_hash', hash }]);
  if ((await revokeLoginsOfUser(deps.db, userId, 'password', principal.loginId)) > 0) {
    await deps.principals.changed();
  }
}
