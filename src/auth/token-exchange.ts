// The token-exchange grant (RFC 8693, https://www.rfc-editor.org/rfc/rfc8693; API.md §2, seed §5.8): an access token of
// the identity provider configured on a ClientApplication is checked at that provider's userinfo endpoint, the user is
// found by email (User.email) or, with `useSubject`, by `sub` (ProjectMembership.externalId) inside the client's
// project, and a service access token is issued that never outlives the subject token.
import { decodeJwt } from 'jose';
import { selectCurrent } from '../fhir/repository/store.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import type { ExternalAuthLogger } from './external/validate-external-token.js';
import { issueLogin, type TokenResponse } from './issue-login.js';
import { OAuthError } from './oauth-error.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

export interface TokenExchangeParams {
  subjectToken?: string;
  subjectTokenType?: string;
  clientId?: string;
}

export interface TokenExchangeOptions {
  log: ExternalAuthLogger;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Timeout of the userinfo request in milliseconds (default 5000). */
  timeoutMs?: number;
}

interface IdentityProvider {
  userInfoUrl: string;
  useSubject: boolean;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function identityProviderOf(client: Record<string, unknown>): IdentityProvider | undefined {
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

const rejected = (why: string) => new OAuthError('invalid_grant', why);

async function callUserinfo(
  url: string,
  token: string,
  opts: TokenExchangeOptions,
): Promise<Record<string, unknown>> {
  const fetchImpl = opts.fetch ?? globalThis.fetch;
  const host = new URL(url).host;
  let res: Response;
  let text: string;
  try {
    res = await fetchImpl(url, {
      method: 'GET',
      headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
      signal: AbortSignal.timeout(opts.timeoutMs ?? 5000),
      // Never forward the token to wherever a redirect points.
      redirect: 'manual',
    });
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => undefined);
      if (res.status >= 500) opts.log.warn({ host, status: res.status }, 'Token exchange: userinfo failed');
      throw rejected('The identity provider rejected the subject token');
    }
    text = await res.text();
  } catch (err) {
    if (err instanceof OAuthError) throw err;
    // Only the error's name and code are logged: the message of a fetch error may quote the request.
    const e = err as { name?: unknown; cause?: { code?: unknown } };
    opts.log.warn(
      { host, err: { name: String(e?.name), code: String(e?.cause?.code ?? '') } },
      'Token exchange: userinfo unreachable',
    );
    throw rejected('The identity provider could not be reached');
  }
  try {
    const body: unknown = JSON.parse(text);
    if (isRecord(body)) return body;
  } catch {
    // fall through
  }
  throw rejected('The identity provider answered no userinfo object');
}

interface MembershipMatch {
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
    if (typeof sub !== 'string' || sub === '') throw rejected('The identity provider answered no subject');
    if (typeof claims?.sub === 'string' && claims.sub !== sub) {
      throw rejected('The identity provider returned a different subject than the token');
    }
    rows = (
      await deps.db.query<MembershipMatch>(`${MEMBERSHIP_SQL} AND m.content->>'externalId' = $2 LIMIT 2`, [
        projectId,
        sub,
      ])
    ).rows;
  } else {
    const email = userinfo.email;
    if (typeof email !== 'string' || email === '') throw rejected('The identity provider answered no email');
    // An address the provider itself has not verified identifies nobody.
    if (userinfo.email_verified === false) throw rejected('The identity provider has not verified the email');
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
  if (!first || !first.profile) throw rejected("No user of the client's project matches the subject token");
  if (second) throw rejected("Several users of the client's project match the subject token");
  return first;
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

  const claims = jwtClaims(subjectToken);
  const exp = typeof claims?.exp === 'number' && Number.isFinite(claims.exp) ? claims.exp : undefined;
  if (exp !== undefined && exp <= nowSeconds(deps)) throw rejected('The subject token has expired');

  const userinfo = await callUserinfo(idp.userInfoUrl, subjectToken, opts);
  const m = await findMembership(deps, row.project_id, idp, userinfo, claims);
  const userId = m.user_ref?.startsWith('User/') ? m.user_ref.slice('User/'.length) : undefined;
  // The provider may have taken its time: the token must still be valid now.
  if (exp !== undefined && exp <= nowSeconds(deps)) throw rejected('The subject token has expired');
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
