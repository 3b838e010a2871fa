// The token-exchange grant (RFC 8693, https://www.rfc-editor.org/rfc/rfc8693; API.md §2, seed §5.8): an access token of
// the identity provider configured on a ClientApplication is checked at that provider's userinfo endpoint, the user is
// found by email (User.email) or, with `useSubject`, by `sub` (ProjectMembership.externalId) inside the client's
// project, and a service access token is issued that never outlives the subject token. The userinfo URL is a
// tenant's choice, so it is fetched only through the outbound rule, and every failed exchange answers alike: which
// step failed (closed port, internal address, no such user) goes to the log, never to the caller.
import { decodeJwt } from 'jose';
import { selectCurrent } from '../fhir/repository/store.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import type { ExternalAuthLogger } from './external/validate-external-token.js';
import { issueLogin, type TokenResponse } from './issue-login.js';
import { OAuthError } from './oauth-error.js';
import { outboundGet, OutboundError, type Resolver } from './outbound.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
/** The one answer of every failed exchange (API.md §2). */
export const EXCHANGE_FAILED = 'The subject token could not be exchanged';

export interface TokenExchangeParams {
  subjectToken?: string;
  subjectTokenType?: string;
  clientId?: string;
}

export interface TokenExchangeOptions {
  log: ExternalAuthLogger;
  /** Timeout of the userinfo request in milliseconds (default 5000). */
  timeoutMs?: number;
  /** DNS resolver of the outbound rule (default the system's). */
  resolve?: Resolver;
}

export interface IdentityProvider {
  userInfoUrl: string;
  useSubject: boolean;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function identityProviderOf(client: Record<string, unknown>): IdentityProvider | undefined {
  const idp = client.identityProvider;
  if (!isRecord(idp) || typeof idp.userInfoUrl !== 'string') return undefined;
  try {
    const url = new URL(idp.userInfoUrl);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
  } catch {
    return undefined;
  }
  return { userInfoUrl: idp.userInfoUrl, useSubject: idp.useSubject === true };
}

/** The subject token's claims when it is a JWT (its signature is the provider's business, checked by userinfo). */
function jwtClaims(token: string): Record<string, unknown> | undefined {
  try {
    return decodeJwt(token);
  } catch {
    return undefined;
  }
}

/** Why an exchange (or an upstream sign-in) failed, for the log; the caller always gets one same answer. */
export class ExchangeFailure extends Error {
  constructor(
    readonly reason: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(reason);
  }
}

const failed = (reason: string, detail?: Record<string, unknown>) => new ExchangeFailure(reason, detail);

async function callUserinfo(
  deps: AuthDeps,
  url: string,
  token: string,
  opts: TokenExchangeOptions,
): Promise<Record<string, unknown>> {
  let res;
  try {
    res = await outboundGet(
      url,
      { allowedHosts: deps.allowedOutboundHosts ?? [], ...(opts.resolve ? { resolve: opts.resolve } : {}) },
      {
        headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
        timeoutMs: opts.timeoutMs ?? 5000,
      },
    );
  } catch (err) {
    if (err instanceof OutboundError)
      throw failed(`userinfo ${err.reason}`, err.code ? { code: err.code } : {});
    throw err;
  }
  // Redirects are not followed: the token must never reach wherever a redirect points.
  if (res.status < 200 || res.status > 299) throw failed('userinfo answered non-2xx', { status: res.status });
  try {
    const body: unknown = JSON.parse(res.body);
    if (isRecord(body)) return body;
  } catch {
    // fall through
  }
  throw failed('userinfo answered no JSON object');
}

export interface MembershipMatch {
  id: string;
  profile: string | null;
  user_ref: string | null;
}

const MEMBERSHIP_SQL = `SELECT m.id, m.content->'profile'->>'reference' AS profile, m.content->'user'->>'reference' AS user_ref
  FROM resources m JOIN resources p ON p.resource_type = 'Project' AND p.id = m.project_id AND NOT p.deleted
  WHERE m.resource_type = 'ProjectMembership' AND NOT m.deleted AND m.project_id = $1
    AND coalesce(m.content->>'active', 'true') <> 'false'`;

async function findMembership(
  deps: AuthDeps,
  projectId: string,
  idp: IdentityProvider,
  userinfo: Record<string, unknown>,
  claims: Record<string, unknown> | undefined,
): Promise<MembershipMatch> {
  let rows: MembershipMatch[];
  if (idp.useSubject) {
    const sub = userinfo.sub;
    if (typeof sub !== 'string' || sub === '') throw failed('userinfo answered no subject');
    if (typeof claims?.sub === 'string' && claims.sub !== sub) {
      throw failed('userinfo subject differs from the token');
    }
    rows = (
      await deps.db.query<MembershipMatch>(`${MEMBERSHIP_SQL} AND m.content->>'externalId' = $2 LIMIT 2`, [
        projectId,
        sub,
      ])
    ).rows;
  } else {
    const email = userinfo.email;
    if (typeof email !== 'string' || email === '') throw failed('userinfo answered no email');
    // An address the provider itself has not verified identifies nobody.
    if (userinfo.email_verified === false) throw failed('userinfo email not verified');
    rows = (
      await deps.db.query<MembershipMatch>(
        `${MEMBERSHIP_SQL} AND m.content->'user'->>'reference' IN (
           SELECT 'User/' || u.id FROM resources u
           WHERE u.resource_type = 'User' AND NOT u.deleted AND lower(u.content->>'email') = lower($2))
         LIMIT 2`,
        [projectId, email],
      )
    ).rows;
  }
  const [first, second] = rows;
  if (!first || !first.profile) throw failed('no membership matches');
  if (second) throw failed('several memberships match');
  return first;
}

/** The ClientApplication's identity provider checks the subject token; the user is its project's matching member. */
export async function identify(
  deps: AuthDeps,
  project: string,
  idp: IdentityProvider,
  subjectToken: string,
  opts: TokenExchangeOptions,
): Promise<{ m: MembershipMatch; exp?: number }> {
  const claims = jwtClaims(subjectToken);
  const exp = typeof claims?.exp === 'number' && Number.isFinite(claims.exp) ? claims.exp : undefined;
  if (exp !== undefined && exp <= nowSeconds(deps)) throw failed('subject token expired');
  const userinfo = await callUserinfo(deps, idp.userInfoUrl, subjectToken, opts);
  const m = await findMembership(deps, project, idp, userinfo, claims);
  // The provider may have taken its time: the token must still be valid now.
  if (exp !== undefined && exp <= nowSeconds(deps)) throw failed('subject token expired');
  return { m, ...(exp !== undefined ? { exp } : {}) };
}

export async function tokenExchangeGrant(
  deps: AuthDeps,
  params: TokenExchangeParams,
  opts: TokenExchangeOptions,
): Promise<TokenResponse> {
  const { subjectToken, subjectTokenType, clientId } = params;
  if (!subjectToken) throw new OAuthError('invalid_request', 'subject_token is required');
  if (!subjectTokenType) throw new OAuthError('invalid_request', 'subject_token_type is required');
  if (subjectTokenType !== ACCESS_TOKEN_TYPE) {
    throw new OAuthError('invalid_request', `subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (!clientId) throw new OAuthError('invalid_request', 'client_id is required');

  const row = /^[A-Za-z0-9\-.]{1,64}$/.test(clientId)
    ? await selectCurrent(deps.db, 'ClientApplication', clientId)
    : undefined;
  if (!row || row.deleted) throw new OAuthError('invalid_client', 'Unknown client');
  const idp = identityProviderOf(JSON.parse(row.json) as Record<string, unknown>);
  if (!idp) throw new OAuthError('invalid_request', 'The client has no identity provider with a userInfoUrl');

  let found: { m: MembershipMatch; exp?: number };
  try {
    found = await identify(deps, row.project_id, idp, subjectToken, opts);
  } catch (err) {
    if (!(err instanceof ExchangeFailure)) throw err;
    // Host only: the path is the tenant's, the token is the caller's.
    const host = new URL(idp.userInfoUrl).host;
    opts.log.warn({ clientId, host, reason: err.reason, ...err.detail }, 'Token exchange failed');
    throw new OAuthError('invalid_grant', EXCHANGE_FAILED);
  }
  const { m, exp } = found;
  const userId = m.user_ref?.startsWith('User/') ? m.user_ref.slice('User/'.length) : undefined;
  const issued = await issueLogin(
    deps,
    {
      membershipId: m.id,
      projectId: row.project_id,
      profile: m.profile as string,
      clientId,
      ...(userId ? { userId } : {}),
      authMethod: 'token-exchange',
    },
    { sub: userId ?? (m.profile as string), ...(exp !== undefined ? { notAfter: exp } : {}) },
  );
  return { ...issued, issued_token_type: ACCESS_TOKEN_TYPE };
}
