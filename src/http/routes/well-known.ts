// Discovery: JWKS (RFC 7517) and OpenID Provider metadata (OpenID Connect Discovery 1.0 §3, RFC 8414): only the
// grants and endpoints that work.
import type { FastifyInstance } from 'fastify';
import type { KeyRing } from '../../auth/keys.js';
import { SUPPORTED_SCOPES } from '../../auth/password-login.js';
import { TOKEN_EXCHANGE_GRANT } from '../../auth/token-exchange.js';

export function wellKnownRoutes(app: FastifyInstance, deps: { keys: KeyRing; baseUrl: string }): void {
  const b = deps.baseUrl;
  app.get('/.well-known/jwks.json', { config: { public: true } }, async () => deps.keys.jwks);
  app.get('/.well-known/openid-configuration', { config: { public: true } }, async () => ({
    issuer: b,
    // Not a browser redirect endpoint: a JSON POST of {email, password, codeChallenge, codeChallengeMethod}
    // answering {login, code} (API.md §2).
    authorization_endpoint: `${b}auth/login`,
    token_endpoint: `${b}oauth2/token`,
    userinfo_endpoint: `${b}oauth2/userinfo`,
    revocation_endpoint: `${b}oauth2/revoke`,
    end_session_endpoint: `${b}oauth2/logout`,
    jwks_uri: `${b}.well-known/jwks.json`,
    response_types_supported: ['code'],
    grant_types_supported: [
      'authorization_code',
      'refresh_token',
      'client_credentials',
      TOKEN_EXCHANGE_GRANT,
    ],
    code_challenge_methods_supported: ['S256'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    scopes_supported: SUPPORTED_SCOPES,
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'fhirUser'],
  }));
}
