// OAuth 2.0 / OpenID Connect endpoints (API.md §2): the token endpoint (RFC 6749 §3.2) and its grants (client
// credentials by secret or by SMART Backend Services assertion, RFC 7523; codes and refresh tokens, which a
// confidential client redeems only authenticated: client-auth.ts), the browser authorization endpoint
// (oauth-authorize.ts) and the JSON password login that start the code flow, revocation (RFC 7009) and logout, userinfo, and the login's own /auth/me.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authorizationCodeGrant } from '../../auth/authorization-code.js';
import { assertionIssuer, clientAssertionGrant } from '../../auth/client-assertion.js';
import { authenticateClient, type ClientIdentity } from '../../auth/client-auth.js';
import { clientCredentialsGrant } from '../../auth/client-credentials.js';
import { createClientKeySets, type ClientKeySets } from '../../auth/client-jwks.js';
import type { AuthDeps } from '../../auth/deps.js';
import { createIdTokenSigner, keyRingSource } from '../../auth/id-token.js';
import type { KeyRing } from '../../auth/keys.js';
import { OAuthError } from '../../auth/oauth-error.js';
import { passwordLogin } from '../../auth/password-login.js';
import { refreshTokenGrant } from '../../auth/refresh-token.js';
import { endLogin, revokeToken } from '../../auth/revoke.js';
import { TOKEN_EXCHANGE_GRANT, tokenExchangeGrant } from '../../auth/token-exchange.js';
import { loginResources, userinfo } from '../../auth/userinfo.js';
import { FhirError } from '../../fhir/outcome.js';
import type { FormBody } from '../plugins/content-types.js';
import type { LoginGuard } from '../plugins/rate-limit.js';
import { sendOAuthError } from '../reply.js';
import { principalOf } from '../plugins/auth.js';
import { adminUserRoutes } from './admin-users.js';
import { authorizeRoutes } from './oauth-authorize.js';

function one(body: FormBody, key: string): string | undefined {
  const v = body[key];
  return Array.isArray(v) ? undefined : v;
}

/** HTTP Basic client authentication (RFC 6749 §2.3.1). */
function basicCredentials(header: string | undefined): { id?: string; secret?: string } {
  const m = header ? /^Basic\s+(\S+)$/i.exec(header) : null;
  if (!m) return {};
  const text = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) return {};
  try {
    return { id: decodeURIComponent(text.slice(0, i)), secret: decodeURIComponent(text.slice(i + 1)) };
  } catch {
    return {}; // malformed percent-encoding: no usable credentials
  }
}

function formBody(request: FastifyRequest): FormBody {
  const ct = request.headers['content-type'] ?? '';
  if (
    !ct.startsWith('application/x-www-form-urlencoded') ||
    typeof request.body !== 'object' ||
    request.body === null
  ) {
    throw new OAuthError('invalid_request', 'The body must be application/x-www-form-urlencoded');
  }
  return request.body as FormBody;
}

/** A form field, with an empty value counting as absent (MedplumClient sends `client_id=` when it has none). */
function field(body: FormBody, key: string): string | undefined {
  const v = one(body, key);
  return v === '' ? undefined : v;
}

/**
 * `keys` is the app's key ring, used to sign ID Tokens; without it the ring persisted in the database is loaded
 * once (the same keys: every instance signs with the oldest persisted key).
 */
export function oauthRoutes(
  app: FastifyInstance,
  deps: AuthDeps,
  opts: { keys?: KeyRing; loginGuard?: LoginGuard; clientKeys?: ClientKeySets; baseUrl?: string } = {},
): void {
  const signIdToken = createIdTokenSigner(deps.tokens.issuer, keyRingSource(deps.db, opts.keys));
  const guard = opts.loginGuard;
  const clientKeys =
    opts.clientKeys ??
    createClientKeySets({
      policy: { allowedHosts: deps.allowedOutboundHosts ?? [] },
      now: () => deps.clock().getTime(),
    });
  const guarded = { config: { public: true }, ...(guard ? { onRequest: guard.perIp } : {}) };

  /**
   * The client of an authorization_code or refresh_token request (client-auth.ts): HTTP Basic, client_id +
   * client_secret, or a client assertion, one method per request (RFC 6749 §2.3). A presented secret or assertion is
   * checked (and counted by the login guard, as for client_credentials) before the grant runs.
   */
  const clientOf = async (request: FastifyRequest, body: FormBody): Promise<ClientIdentity> => {
    const basic = basicCredentials(request.headers.authorization);
    const postSecret = field(body, 'client_secret');
    const assertion = field(body, 'client_assertion');
    const assertionType = field(body, 'client_assertion_type');
    const byAssertion = assertion !== undefined || assertionType !== undefined;
    const methods = [basic.secret !== undefined, postSecret !== undefined, byAssertion].filter(
      Boolean,
    ).length;
    if (methods > 1) throw new OAuthError('invalid_request', 'Use one client authentication method');
    const postId = field(body, 'client_id');
    if (basic.id !== undefined && postId !== undefined && basic.id !== postId)
      throw new OAuthError('invalid_request', 'client_id differs from the HTTP Basic client');
    const clientId = basic.id ?? postId;
    const secret = basic.secret ?? postSecret;
    const creds = {
      ...(clientId !== undefined ? { clientId } : {}),
      ...(secret !== undefined ? { secret } : {}),
      ...(assertion !== undefined ? { assertion } : {}),
      ...(assertionType !== undefined ? { assertionType } : {}),
    };
    if (methods === 0) return authenticateClient(deps, clientKeys, creds);
    const identity = `client:${clientId ?? (byAssertion ? (assertionIssuer(assertion) ?? '') : '')}`;
    await guard?.check(request, identity);
    try {
      const client = await authenticateClient(deps, clientKeys, creds, { log: request.log });
      await guard?.succeeded(request, identity);
      return client;
    } catch (err) {
      if (err instanceof OAuthError && err.error === 'invalid_client') await guard?.failed(request, identity);
      throw err;
    }
  };
  const proven = (client: ClientIdentity) => ({
    ...(client.clientId !== undefined ? { clientId: client.clientId } : {}),
    ...(client.authenticated !== undefined ? { authenticatedClient: client.authenticated } : {}),
  });

  app.post('/oauth2/token', guarded, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    reply.header('pragma', 'no-cache');
    try {
      const body = formBody(request);
      const grant = one(body, 'grant_type');
      if (!grant) throw new OAuthError('invalid_request', 'grant_type is required');
      if (grant === 'client_credentials') {
        const basic = basicCredentials(request.headers.authorization);
        const assertion = field(body, 'client_assertion');
        const assertionType = field(body, 'client_assertion_type');
        const byAssertion = assertion !== undefined || assertionType !== undefined;
        const secret = basic.secret ?? one(body, 'client_secret');
        // RFC 6749 §2.3: a client uses one authentication method per request.
        if (byAssertion && secret !== undefined)
          throw new OAuthError('invalid_request', 'Use either a client secret or a client assertion');
        const clientId = basic.id ?? field(body, 'client_id');
        // Client secrets can be guessed; codes, refresh tokens and subject tokens are not guessable. Failed assertions
        // count against the client they name too.
        const identity = `client:${clientId ?? (byAssertion ? (assertionIssuer(assertion) ?? '') : '')}`;
        await guard?.check(request, identity);
        try {
          const scope = one(body, 'scope');
          const answer = byAssertion
            ? await clientAssertionGrant(
                deps,
                clientKeys,
                {
                  ...(assertionType !== undefined ? { assertionType } : {}),
                  ...(assertion !== undefined ? { assertion } : {}),
                  ...(clientId !== undefined ? { clientId } : {}),
                  ...(scope !== undefined ? { scope } : {}),
                },
                { log: request.log },
              )
            : await clientCredentialsGrant(deps, clientId, secret, scope);
          await guard?.succeeded(request, identity);
          return answer;
        } catch (err) {
          if (err instanceof OAuthError && err.error === 'invalid_client')
            await guard?.failed(request, identity);
          throw err;
        }
      }
      if (grant === 'authorization_code') {
        const redirectUri = field(body, 'redirect_uri');
        return await authorizationCodeGrant(deps, signIdToken, {
          code: field(body, 'code'),
          codeVerifier: field(body, 'code_verifier'),
          ...proven(await clientOf(request, body)),
          ...(redirectUri !== undefined ? { redirectUri } : {}),
        });
      }
      if (grant === 'refresh_token') {
        return await refreshTokenGrant(deps, signIdToken, {
          refreshToken: field(body, 'refresh_token'),
          ...proven(await clientOf(request, body)),
          scope: one(body, 'scope'),
        });
      }
      if (grant === TOKEN_EXCHANGE_GRANT) {
        return await tokenExchangeGrant(
          deps,
          {
            subjectToken: field(body, 'subject_token'),
            subjectTokenType: field(body, 'subject_token_type'),
            clientId: field(body, 'client_id'),
          },
          { log: request.log },
        );
      }
      throw new OAuthError('unsupported_grant_type', `Unsupported grant_type: ${grant.slice(0, 80)}`);
    } catch (err) {
      if (!(err instanceof OAuthError)) throw err;
      // RFC 6749 §5.2: a client that tried HTTP Basic is answered with the scheme it used.
      if (err.error === 'invalid_client' && /^Basic\s/i.test(request.headers.authorization ?? ''))
        reply.header('www-authenticate', 'Basic realm="oauth2/token", charset="UTF-8"');
      return sendOAuthError(reply, err);
    }
  });

  // The start of the code flow: email, password and a PKCE S256 challenge give {login, code} (API.md §2).
  app.post('/auth/login', guarded, async (request, reply) => {
    const ct = request.headers['content-type'] ?? '';
    if (!/^application\/(fhir\+)?json/.test(ct)) {
      throw new FhirError('invalid', 'The body must be JSON', 'login.content-type', { status: 415 });
    }
    reply.header('cache-control', 'no-store');
    const email = (request.body as { email?: unknown } | undefined)?.email;
    const identity = `email:${typeof email === 'string' ? email.trim().toLowerCase() : ''}`;
    await guard?.check(request, identity);
    try {
      const answer = await passwordLogin(deps, request.body);
      await guard?.succeeded(request, identity);
      return answer;
    } catch (err) {
      if (err instanceof FhirError && err.code === 'login.bad-credentials')
        await guard?.failed(request, identity);
      throw err;
    }
  });

  // RFC 7009: 200 for every well-formed request, whether or not the token was known.
  app.post('/oauth2/revoke', { config: { public: true } }, async (request, reply) => {
    try {
      const token = field(formBody(request), 'token');
      if (!token) throw new OAuthError('invalid_request', 'token is required');
      await revokeToken(deps, token);
      return reply.code(200).header('cache-control', 'no-store').send();
    } catch (err) {
      if (err instanceof OAuthError) return sendOAuthError(reply, err);
      throw err;
    }
  });

  // Ends the login of the bearer token (MedplumClient.signOut posts to oauth2/logout).
  const logout = async (request: FastifyRequest): Promise<{ ok: true }> => {
    await endLogin(deps, principalOf(request).loginId);
    return { ok: true };
  };
  app.post('/auth/logout', logout);
  app.post('/oauth2/logout', logout);

  adminUserRoutes(app, deps);
  if (opts.baseUrl !== undefined) {
    authorizeRoutes(app, deps, { baseUrl: opts.baseUrl, ...(guard ? { loginGuard: guard } : {}) });
  }

  const userinfoHandler = async (request: FastifyRequest): Promise<Record<string, unknown>> =>
    userinfo(deps, principalOf(request));
  app.get('/oauth2/userinfo', userinfoHandler);
  app.post('/oauth2/userinfo', userinfoHandler);

  app.get('/auth/me', async (request) => loginResources(deps, principalOf(request)));
}
