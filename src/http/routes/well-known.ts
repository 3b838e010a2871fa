// Discovery: JWKS (RFC 7517), OpenID Provider metadata (OpenID Connect Discovery 1.0 §3, RFC 8414) and SMART
// configuration (https://hl7.org/fhir/smart-app-launch/conformance.html): only the grants and endpoints that work.
import type { FastifyInstance } from 'fastify';
import { ASSERTION_ALGORITHMS } from '../../auth/client-assertion.js';
import type { KeyRing } from '../../auth/keys.js';
import { SUPPORTED_SCOPES } from '../../auth/password-login.js';
import { SYSTEM_SCOPES_SUPPORTED } from '../../auth/smart-scopes.js';
import { USER_RESOURCE_SCOPES_SUPPORTED, USER_SCOPES_SUPPORTED } from '../../auth/smart-user-scopes.js';
import { TOKEN_EXCHANGE_GRANT } from '../../auth/token-exchange.js';

const GRANTS = ['authorization_code', 'refresh_token', 'client_credentials', TOKEN_EXCHANGE_GRANT];
const TOKEN_AUTH_METHODS = ['private_key_jwt', 'client_secret_basic', 'client_secret_post'];
/** Scopes users (authorize endpoint, /auth/login) and clients may ask for. */
const SCOPES = [
  ...new Set([
    ...USER_SCOPES_SUPPORTED,
    ...SUPPORTED_SCOPES,
    ...USER_RESOURCE_SCOPES_SUPPORTED,
    ...SYSTEM_SCOPES_SUPPORTED,
  ]),
];

/** SMART metadata (conformance.html §"Metadata"); public, served at {base} and at {fhir} (API.md §2). */
function smartConfiguration(b: string): Record<string, unknown> {
  return {
    issuer: b,
    jwks_uri: `${b}.well-known/jwks.json`,
    authorization_endpoint: `${b}oauth2/authorize`,
    token_endpoint: `${b}oauth2/token`,
    revocation_endpoint: `${b}oauth2/revoke`,
    userinfo_endpoint: `${b}oauth2/userinfo`,
    grant_types_supported: GRANTS,
    token_endpoint_auth_methods_supported: TOKEN_AUTH_METHODS,
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    scopes_supported: SCOPES,
    response_types_supported: ['code'],
    code_challenge_methods_supported: ['S256'],
    // EHR launch (`ClientApplication/<id>/$launch`, API.md §11) with patient and encounter, and standalone launch
    // with a patient picker for users who are not a Patient; no `context-standalone-encounter`.
    capabilities: [
      'launch-standalone',
      'launch-ehr',
      'context-ehr-patient',
      'context-ehr-encounter',
      'client-public',
      'client-confidential-symmetric',
      'client-confidential-asymmetric',
      'context-standalone-patient',
      'sso-openid-connect',
      'permission-offline',
      // patient/ scopes reach only the patient in context's compartment (fhir/access.ts scopeReach).
      'permission-patient',
      'permission-user',
      'permission-v1',
      'permission-v2',
    ],
  };
}

export function wellKnownRoutes(app: FastifyInstance, deps: { keys: KeyRing; baseUrl: string }): void {
  const b = deps.baseUrl;
  app.get('/.well-known/jwks.json', { config: { public: true } }, async () => deps.keys.jwks);
  app.get('/.well-known/openid-configuration', { config: { public: true } }, async () => ({
    issuer: b,
    // The browser endpoint (RFC 6749 §4.1.1). POST {b}auth/login, the JSON password login, still starts the code
    // flow for clients such as MedplumClient (API.md §2).
    authorization_endpoint: `${b}oauth2/authorize`,
    token_endpoint: `${b}oauth2/token`,
    userinfo_endpoint: `${b}oauth2/userinfo`,
    revocation_endpoint: `${b}oauth2/revoke`,
    end_session_endpoint: `${b}oauth2/logout`,
    jwks_uri: `${b}.well-known/jwks.json`,
    response_types_supported: ['code'],
    grant_types_supported: GRANTS,
    code_challenge_methods_supported: ['S256'],
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256'],
    token_endpoint_auth_methods_supported: [...TOKEN_AUTH_METHODS, 'none'],
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    revocation_endpoint_auth_methods_supported: ['none'],
    scopes_supported: SCOPES,
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'at_hash', 'fhirUser'],
  }));
  const smart = JSON.stringify(smartConfiguration(b));
  // Registered here, outside the /fhir/R4 plugin: a static path wins over its `/:type/:id` routes, and the FHIR
  // content-type rules do not apply to this plain JSON document.
  for (const url of ['/.well-known/smart-configuration', '/fhir/R4/.well-known/smart-configuration']) {
    app.get(url, { config: { public: true } }, async (_req, reply) =>
      reply.type('application/json').send(smart),
    );
  }
}
