// Authentication hook: every route not marked `config: { public: true }` needs a valid bearer token;
// the principal is set on the request for the handlers (and the one access module) to use.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { authenticate } from '../../auth/authenticate.js';
import type { AuthDeps } from '../../auth/deps.js';
import { actorOf, scopeOf, type Principal } from '../../auth/principal.js';
import type { RepoContext } from '../../fhir/repository/context.js';
import { FhirError } from '../../fhir/outcome.js';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    public?: boolean;
    /** On a public route: a valid bearer token still sets the principal (an answer that varies by caller). */
    principalIfAny?: boolean;
  }
}

export function registerAuth(app: FastifyInstance, deps: AuthDeps): void {
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (request) => {
    const config = request.routeOptions.config;
    if (!request.routeOptions.url) return;
    if (config?.public) {
      if (config.principalIfAny && request.headers.authorization)
        request.principal = await authenticate(deps, request.headers.authorization).catch((err: unknown) => {
          // The route stays public: a token that does not authenticate is ignored rather than answered 401.
          if (err instanceof FhirError && err.status === 401) return null;
          throw err;
        });
      return;
    }
    request.principal = await authenticate(deps, request.headers.authorization);
  });
}

export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal)
    throw new FhirError('login', 'Authentication required', 'auth.no-principal', { status: 401 });
  return request.principal;
}

export function repoContext(
  request: FastifyRequest,
  env: Pick<
    RepoContext,
    | 'clock'
    | 'newId'
    | 'fhirBase'
    | 'allowedOutboundHosts'
    | 'binaries'
    | 'subscriptions'
    | 'conformance'
    | 'searchParams'
    | 'fhirpathPatch'
    | 'searchCountLimit'
  >,
): RepoContext {
  const p = principalOf(request);
  const actor = actorOf(p);
  return {
    actor,
    scope: scopeOf(p, actor),
    author: p.profile,
    ...env,
    ...(request.audit ? { audit: request.audit } : {}),
  };
}
