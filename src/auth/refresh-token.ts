// The refresh_token grant (RFC 6749 §6, https://www.rfc-editor.org/rfc/rfc6749#section-6) with rotation and reuse
// detection (OAuth 2.1 §4.3.1, RFC 6819 §5.2.2.3): opaque random tokens, stored only as SHA-256 hashes and bound to
// a login, each usable once; presenting a token that was already used ends the whole login. A token issued to a
// confidential client is redeemed only by that client, authenticated (RFC 6749 §6, client-auth.ts).
import { generateSecret, sha256 } from '../fhir/repository/secrets.js';
import type { Queryable } from '../storage/db.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import { clientProofRefusal } from './client-auth.js';
import { DEFAULT_AUDIENCE, type IdTokenSigner } from './id-token.js';
import { accessTokenResponse, type TokenResponse } from './issue-login.js';
import { OAuthError } from './oauth-error.js';
import { loadPrincipal, type Principal } from './principal.js';
import { endLogin } from './revoke.js';
import { patientContext } from './smart-user-scopes.js';

/** Lifetime of a refresh token (seconds); each rotation starts a new one. */
export const REFRESH_TOKEN_LIFETIME = 14 * 24 * 3600;

/** What a user's login was granted, carried from the code to every refresh token of the login. */
export interface UserGrant {
  scope: string;
  /** When the user authenticated (seconds since the epoch). */
  authTime: number;
  nonce?: string;
}

export async function storeRefreshToken(
  tx: Queryable,
  deps: Pick<AuthDeps, 'clock'>,
  loginId: string,
  grant: UserGrant,
): Promise<string> {
  const token = generateSecret();
  const now = deps.clock();
  await tx.query(
    `INSERT INTO refresh_tokens (token_hash, login_id, scope, auth_time, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [
      sha256(token),
      loginId,
      grant.scope,
      grant.authTime,
      now,
      new Date(now.getTime() + REFRESH_TOKEN_LIFETIME * 1000),
    ],
  );
  return token;
}

/**
 * Access token, refresh token and ID Token of a user's login (the code flow's answer, API.md §2): the ID Token when
 * `openid` was granted, and the SMART launch context: `patient` when `launch` or `launch/patient` was (the login's
 * launch patient, else the user's own Patient), `encounter` when `launch` or `launch/encounter` was, and
 * `fhirContext` (an EHR launch's further resources) when `launch` was.
 */
export async function userTokenResponse(
  deps: AuthDeps,
  signIdToken: IdTokenSigner,
  principal: Principal,
  grant: UserGrant,
  refreshToken: string | undefined,
): Promise<TokenResponse> {
  const sub = principal.userId ?? principal.profile;
  const res = await accessTokenResponse(
    deps,
    {
      id: principal.loginId,
      projectId: principal.projectId,
      profile: principal.profile,
      ...(principal.clientId ? { clientId: principal.clientId } : {}),
    },
    { sub, scope: grant.scope },
  );
  const granted = scopes(grant.scope);
  // The login's launch context (EHR launch or patient picker, API.md §11), else a Patient user's own record.
  const withLaunch = granted.includes('launch') || granted.includes('launch/patient');
  const patient = withLaunch ? (principal.launchPatient ?? patientContext(principal.profile)) : undefined;
  const encounter =
    granted.includes('launch') || granted.includes('launch/encounter')
      ? principal.launchEncounter
      : undefined;
  const fhirContext = granted.includes('launch') ? principal.launchFhirContext : undefined;
  const idToken = granted.includes('openid')
    ? await signIdToken({
        sub,
        audience: principal.clientId ?? DEFAULT_AUDIENCE,
        authTime: grant.authTime,
        ...(grant.nonce !== undefined ? { nonce: grant.nonce } : {}),
        fhirUser: principal.profile,
        accessToken: res.access_token,
        lifetime: res.expires_in,
        now: nowSeconds(deps),
      })
    : undefined;
  return {
    ...res,
    ...(refreshToken !== undefined ? { refresh_token: refreshToken } : {}),
    ...(idToken !== undefined ? { id_token: idToken } : {}),
    ...(patient !== undefined ? { patient } : {}),
    ...(encounter !== undefined ? { encounter } : {}),
    ...(fhirContext !== undefined ? { fhirContext } : {}),
  };
}

interface RefreshRow {
  login_id: string;
  scope: string;
  auth_time: string | number;
  expires_at: Date | string;
  used_at: Date | string | null;
}

type Outcome =
  | { kind: 'ok'; principal: Principal; grant: UserGrant; token: string }
  | { kind: 'reused'; loginId: string }
  | { kind: 'refused'; error: OAuthError };

const scopes = (s: string): string[] => s.split(/\s+/).filter((x) => x !== '');

export async function refreshTokenGrant(
  deps: AuthDeps,
  signIdToken: IdTokenSigner,
  params: {
    refreshToken?: string;
    clientId?: string;
    /** The client the request authenticated as (client-auth.ts), already checked. */
    authenticatedClient?: string;
    scope?: string;
  },
): Promise<TokenResponse> {
  const presented = params.refreshToken;
  if (!presented) throw new OAuthError('invalid_request', 'refresh_token is required');
  const invalid = (why: string): Outcome => ({
    kind: 'refused',
    error: new OAuthError('invalid_grant', why),
  });
  const outcome = await deps.db.transaction<Outcome>(async (tx) => {
    // The row lock serializes concurrent uses of one token: exactly one of them finds it unused.
    const r = await tx.query<RefreshRow>(
      `SELECT login_id, scope, auth_time, expires_at, used_at FROM refresh_tokens WHERE token_hash = $1 FOR UPDATE`,
      [sha256(presented)],
    );
    const row = r.rows[0];
    if (!row) return invalid('The refresh token is not valid');
    if (row.used_at !== null) return { kind: 'reused', loginId: row.login_id };
    const now = deps.clock();
    if (new Date(row.expires_at).getTime() <= now.getTime()) return invalid('The refresh token has expired');
    const principal = await loadPrincipal(tx, row.login_id, '');
    if (!principal) return invalid('The login of this refresh token has ended');
    if (params.clientId && principal.clientId && params.clientId !== principal.clientId) {
      return invalid('The refresh token was issued to another client');
    }
    // Refused before the token is used: its client still holds a good token.
    const unproven = await clientProofRefusal(tx, principal.clientId, {
      ...(params.clientId !== undefined ? { clientId: params.clientId } : {}),
      ...(params.authenticatedClient !== undefined ? { authenticated: params.authenticatedClient } : {}),
    });
    if (unproven) return { kind: 'refused', error: unproven };
    let scope = row.scope;
    if (params.scope !== undefined && params.scope.trim() !== '') {
      // RFC 6749 §6: a narrower scope may be asked for, never a wider one.
      const granted = new Set(scopes(row.scope));
      const asked = scopes(params.scope);
      if (asked.some((s) => !granted.has(s))) {
        return {
          kind: 'refused',
          error: new OAuthError('invalid_scope', 'The requested scope exceeds the granted scope'),
        };
      }
      scope = asked.join(' ');
    }
    await tx.query('UPDATE refresh_tokens SET used_at = $2 WHERE token_hash = $1', [sha256(presented), now]);
    const authTime = Number(row.auth_time);
    // RFC 6749 §6: the new refresh token keeps the scope of the one it replaces.
    const token = await storeRefreshToken(tx, deps, row.login_id, { scope: row.scope, authTime });
    return { kind: 'ok', principal, grant: { scope, authTime }, token };
  });
  if (outcome.kind === 'reused') {
    // A rotated token came back: either the client or an attacker holds a stolen copy. End the login.
    await endLogin(deps, outcome.loginId);
    throw new OAuthError('invalid_grant', 'The refresh token was already used; the login has been ended');
  }
  if (outcome.kind === 'refused') throw outcome.error;
  return userTokenResponse(deps, signIdToken, outcome.principal, outcome.grant, outcome.token);
}

/** Drops expired refresh tokens (a replay of an expired token is refused as unknown). */
export async function purgeExpiredRefreshTokens(db: Queryable, deps: Pick<AuthDeps, 'clock'>): Promise<void> {
  await db.query('DELETE FROM refresh_tokens WHERE expires_at < $1', [deps.clock()]);
}
