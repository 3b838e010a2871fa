// Ending logins: token revocation (RFC 7009, https://www.rfc-editor.org/rfc/rfc7009) and logout. A revoked login's
// access and refresh tokens stop working at once on every instance (cached principals are dropped everywhere).
import { sha256 } from '../fhir/repository/secrets.js';
import { InvalidTokenError } from './access-token.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import { revokeLogin } from './principal.js';

/** Marks the login revoked and clears every instance's principal cache. */
export async function endLogin(deps: AuthDeps, loginId: string): Promise<void> {
  if (!loginId) return;
  await revokeLogin(deps.db, loginId);
  await deps.principals.changed();
}

/** The login a token belongs to: one of our access tokens (even expired), or a refresh token. */
async function loginOfToken(deps: AuthDeps, token: string): Promise<string | undefined> {
  if (deps.tokens.isOwn(token)) {
    try {
      return (await deps.tokens.verify(token, nowSeconds(deps))).login_id;
    } catch (err) {
      // An expired or invalid access token no longer grants anything: nothing to revoke.
      if (err instanceof InvalidTokenError) return undefined;
      throw err;
    }
  }
  if (token.length > 512) return undefined;
  const r = await deps.db.query<{ login_id: string }>(
    'SELECT login_id FROM refresh_tokens WHERE token_hash = $1',
    [sha256(token)],
  );
  return r.rows[0]?.login_id;
}

/**
 * RFC 7009 §2.1: ends the login of an access or refresh token. Unknown, expired and foreign tokens are ignored
 * (§2.2: the answer is 200 either way), so the caller learns nothing about the token.
 */
export async function revokeToken(deps: AuthDeps, token: string): Promise<void> {
  const loginId = await loginOfToken(deps, token);
  if (loginId) await endLogin(deps, loginId);
}
