// Discovery: JWKS (RFC 7517) and OpenID Provider metadata (OpenID Connect Discovery 1.0 §3).
import type { FastifyInstance } from 'fastify';
import type { KeyRing } from '../../auth/keys.js';

export function wellKnownRoutes(app: FastifyInstance, deps: { keys: KeyRing; baseUrl: string }): void {
  const b = deps.baseUrl;
  app.get('/.well-known/jwks.json', { config: { public: true } }, async () => deps.keys.jwks);
  app.get('/.well-known/openid-configuration', { config: { public: true } }, async () => ({
    issuer: b,
    authorization_endpoint: `${b}oauth2/authorize`,
    token_endpoint: `${b}oauth2/token`,
    userinfo_endpoint: `${b}oauth2/userinfo`,
    jwks_uri: `${b}.well-known/jwks.json`,
    response_types_supported: ['code'],
    grant_types_supported: ['client_credentials'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    scopes_supported: ['openid'],
  }));
}
