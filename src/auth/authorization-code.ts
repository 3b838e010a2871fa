// The authorization_code grant with PKCE S256 (RFC 6749 §4.1.3, RFC 7636 §4.6, https://www.rfc-editor.org/rfc/rfc7636):
// a code from POST /auth/login or GET/POST /oauth2/authorize is exchanged once, within 60 s, by the holder of its code
// verifier; a code presented a second time ends the login it was issued for (RFC 6749 §4.1.2). A code of the authorize
// endpoint also needs its client_id and the redirect_uri its request named (RFC 6749 §4.1.3). A confidential client
// must authenticate (client-auth.ts); a public one sends no secret: PKCE binds the code to it.
import { createHash, timingSafeEqual } from 'node:crypto';
import { generateSecret, sha256 } from '../fhir/repository/secrets.js';
import type { Queryable } from '../storage/db.js';
import type { AuthDeps } from './deps.js';
import type { IdTokenSigner } from './id-token.js';
import type { TokenResponse } from './issue-login.js';
import { clientProofRefusal } from './client-auth.js';
import { OAuthError, type OAuthErrorCode } from './oauth-error.js';
import { loadPrincipal, type Principal } from './principal.js';
import { storeRefreshToken, userTokenResponse, type UserGrant } from './refresh-token.js';
import { endLogin } from './revoke.js';

/** Lifetime of an authorization code (seconds). */
export const CODE_LIFETIME = 60;
/** How long a used or expired code is kept to recognize its replay (seconds). */
const CODE_RETENTION = 3600;

/** RFC 7636 §4.1: 43 to 128 unreserved characters. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** BASE64URL(SHA256(verifier)) is always 43 characters. */
export const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/** RFC 7636 §4.2: the S256 code challenge of a verifier. */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

export async function createAuthorizationCode(
  db: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  loginId: string,
  codeChallenge: string,
  grant: UserGrant,
  origin: { redirectUri?: string; viaAuthorize?: boolean } = {},
): Promise<string> {
  const code = generateSecret();
  const now = deps.clock().getTime();
  await db.query(
    `INSERT INTO oauth_codes (code_hash, login_id, code_challenge, scope, nonce, auth_time, expires_at, redirect_uri,
       via_authorize) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      sha256(code),
      loginId,
      codeChallenge,
      grant.scope,
      grant.nonce ?? null,
      grant.authTime,
      new Date(now + CODE_LIFETIME * 1000),
      origin.redirectUri ?? null,
      origin.viaAuthorize ?? false,
    ],
  );
  return code;
}

/** Drops codes that expired long enough ago that a replay no longer matters. */
export async function purgeExpiredCodes(db: Queryable, deps: Pick<AuthDeps, 'clock'>): Promise<void> {
  await db.query('DELETE FROM oauth_codes WHERE expires_at < $1', [
    new Date(deps.clock().getTime() - CODE_RETENTION * 1000),
  ]);
}

interface CodeRow {
  login_id: string;
  code_challenge: string;
  scope: string;
  nonce: string | null;
  auth_time: string | number;
  expires_at: Date | string;
  used_at: Date | string | null;
  redirect_uri: string | null;
  via_authorize: boolean;
}

type Outcome =
  | { kind: 'ok'; principal: Principal; grant: UserGrant; refreshToken?: string }
  | { kind: 'reused'; loginId: string }
  | { kind: 'refused'; why: string; error?: OAuthErrorCode };

export interface CodeExchange {
  code?: string;
  codeVerifier?: string;
  clientId?: string;
  /** The client the request authenticated as (client-auth.ts), already checked: a wrong proof never gets here. */
  authenticatedClient?: string;
  redirectUri?: string;
}

/** SMART App Launch: a refresh token only for `offline_access` (`online_access` is not supported). */
const wantsRefresh = (scope: string): boolean => /(^|\s)offline_access(\s|$)/.test(scope);

/** The checks of RFC 6749 §4.1.3 for a code of the authorize endpoint; undefined when they pass. */
function authorizeCodeRefusal(row: CodeRow, principal: Principal, params: CodeExchange): Outcome | undefined {
  if (!row.via_authorize) return undefined;
  if (!params.clientId) return { kind: 'refused', why: 'client_id is required', error: 'invalid_request' };
  if (principal.clientId !== params.clientId) {
    return { kind: 'refused', why: 'The authorization code was issued to another client' };
  }
  if (row.redirect_uri !== null && params.redirectUri !== row.redirect_uri) {
    return { kind: 'refused', why: 'redirect_uri does not match the one of the authorization request' };
  }
  return undefined;
}

function verifierMatches(verifier: string, challenge: string): boolean {
  if (!VERIFIER.test(verifier)) return false;
  const a = Buffer.from(s256(verifier));
  const b = Buffer.from(challenge);
  return a.length === b.length && timingSafeEqual(a, b);
}

export async function authorizationCodeGrant(
  deps: AuthDeps,
  signIdToken: IdTokenSigner,
  params: CodeExchange,
): Promise<TokenResponse> {
  const { code, codeVerifier } = params;
  if (!code) throw new OAuthError('invalid_request', 'code is required');
  if (!codeVerifier) throw new OAuthError('invalid_request', 'code_verifier is required (PKCE, RFC 7636)');
  // Every outcome below commits: a presented code is used up, whether or not the exchange succeeds.
  const outcome = await deps.db.transaction<Outcome>(async (tx) => {
    const r = await tx.query<CodeRow>(
      `SELECT login_id, code_challenge, scope, nonce, auth_time, expires_at, used_at, redirect_uri, via_authorize
       FROM oauth_codes WHERE code_hash = $1 FOR UPDATE`,
      [sha256(code)],
    );
    const row = r.rows[0];
    if (!row) return { kind: 'refused', why: 'The authorization code is not valid' };
    if (row.used_at !== null) return { kind: 'reused', loginId: row.login_id };
    const now = deps.clock();
    await tx.query('UPDATE oauth_codes SET used_at = $2 WHERE code_hash = $1', [sha256(code), now]);
    if (new Date(row.expires_at).getTime() <= now.getTime()) {
      return { kind: 'refused', why: 'The authorization code has expired' };
    }
    if (!verifierMatches(codeVerifier, row.code_challenge)) {
      return { kind: 'refused', why: 'The code_verifier does not match the code challenge' };
    }
    const principal = await loadPrincipal(tx, row.login_id, '');
    if (!principal) return { kind: 'refused', why: 'The login of this code has ended' };
    if (params.clientId && principal.clientId && params.clientId !== principal.clientId) {
      return { kind: 'refused', why: 'The authorization code was issued to another client' };
    }
    // RFC 6749 §4.1.3: a confidential client authenticates. The code is used up all the same (whoever holds it
    // without the client's proof holds a stolen code).
    const unproven = await clientProofRefusal(tx, principal.clientId, {
      ...(params.clientId !== undefined ? { clientId: params.clientId } : {}),
      ...(params.authenticatedClient !== undefined ? { authenticated: params.authenticatedClient } : {}),
    });
    if (unproven) return { kind: 'refused', why: unproven.description, error: unproven.error };
    const refusal = authorizeCodeRefusal(row, principal, params);
    if (refusal) return refusal;
    const grant: UserGrant = {
      scope: row.scope,
      authTime: Number(row.auth_time),
      ...(row.nonce !== null ? { nonce: row.nonce } : {}),
    };
    // Codes of POST /auth/login always came with a refresh token (API.md §2); SMART apps ask for one.
    const refreshToken =
      !row.via_authorize || wantsRefresh(row.scope)
        ? await storeRefreshToken(tx, deps, row.login_id, { scope: grant.scope, authTime: grant.authTime })
        : undefined;
    return { kind: 'ok', principal, grant, ...(refreshToken ? { refreshToken } : {}) };
  });
  if (outcome.kind === 'reused') {
    await endLogin(deps, outcome.loginId);
    throw new OAuthError(
      'invalid_grant',
      'The authorization code was already used; the login has been ended',
    );
  }
  if (outcome.kind === 'refused') throw new OAuthError(outcome.error ?? 'invalid_grant', outcome.why);
  return userTokenResponse(deps, signIdToken, outcome.principal, outcome.grant, outcome.refreshToken);
}
