// Turns an Authorization header into a Principal or a 401 (RFC 6750 §3 WWW-Authenticate).
import { FhirError } from '../fhir/outcome.js';
import { InvalidTokenError } from './access-token.js';
import { nowSeconds, type AuthDeps } from './deps.js';
import { IdentifyError, identifyExternal } from './external/identify.js';
import {
  ExternalAuthError,
  hashExternalToken,
  type ExternalValidator,
} from './external/validate-external-token.js';
import { loadMembershipPrincipal, loadPrincipal, type Principal } from './principal.js';
import { resourceScopesOf } from './smart-scopes.js';

/**
 * The principal as this token may act: principals are cached per login, while scopes belong to each token (its
 * signed `scope` claim), so they are attached per request.
 */
function withTokenScopes(principal: Principal, scopeClaim: unknown): Principal {
  const scopes = resourceScopesOf(scopeClaim);
  return scopes ? { ...principal, scopes } : principal;
}

export function unauthorized(message: string, code: string, invalidToken = true): FhirError {
  return new FhirError('login', message, code, {
    status: 401,
    headers: {
      'www-authenticate': invalidToken
        ? `Bearer error="invalid_token", error_description="${message.replace(/"/g, "'")}"`
        : 'Bearer',
    },
  });
}

export function bearerToken(header: string | undefined): string {
  if (!header) throw unauthorized('Authentication required', 'auth.missing', false);
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m) throw unauthorized('Authorization must be a Bearer token', 'auth.scheme');
  return m[1] as string;
}

/** An external provider's JWT presented directly: validated (cached) and mapped to its membership. */
async function authenticateExternal(
  deps: AuthDeps,
  token: string,
  external: ExternalValidator,
): Promise<Principal> {
  let identity;
  try {
    identity = await external.validate(token);
  } catch (err) {
    if (err instanceof ExternalAuthError) throw unauthorized(err.message, `auth.external.${err.reason}`);
    throw err;
  }
  const tokenHash = hashExternalToken(token);
  const key = `ext:${tokenHash}`;
  const cached = deps.principals.get(key);
  if (cached) return cached;
  let match;
  try {
    match = await identifyExternal(deps.db, identity);
  } catch (err) {
    if (err instanceof IdentifyError) throw unauthorized(err.message, `auth.external.${err.reason}`);
    throw err;
  }
  const principal = await loadMembershipPrincipal(
    deps.db,
    match.membershipId,
    match.profile,
    identity.sub ?? '',
    {
      exp: identity.exp,
      tokenHash,
    },
  );
  if (!principal)
    throw unauthorized('The matched project membership is not active', 'auth.external.inactive');
  deps.principals.set(key, principal);
  return principal;
}

export async function authenticate(deps: AuthDeps, header: string | undefined): Promise<Principal> {
  const token = bearerToken(header);
  if (deps.external && !deps.tokens.isOwn(token) && deps.external.isExternal(token)) {
    return authenticateExternal(deps, token, deps.external);
  }
  let claims;
  try {
    claims = await deps.tokens.verify(token, nowSeconds(deps));
  } catch (err) {
    if (err instanceof InvalidTokenError) throw unauthorized(err.message, 'auth.invalid-token');
    throw err;
  }
  const cached = deps.principals.get(claims.login_id);
  if (cached) return withTokenScopes(cached, claims.scope);
  const principal = await loadPrincipal(deps.db, claims.login_id, claims.sub);
  if (!principal) throw unauthorized('The login of this token has ended', 'auth.login-ended');
  deps.principals.set(claims.login_id, principal);
  return withTokenScopes(principal, claims.scope);
}
