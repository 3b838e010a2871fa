// Guards of the login endpoints against guessing (config `rateLimit`), with @fastify/rate-limit over the shared
// counters (Redis when configured, so every instance counts together; in-process otherwise or while Redis is down):
// - every request to /auth/login, /oauth2/token and /oauth2/authorize counts against the client IP (a flood guard);
// - failed password logins and client authentications count against (client IP, email or client_id); once
//   `failedLogins` is reached, that pair is refused, even with the right secret, until the window ends. A
//   success clears the count. Successful requests therefore never lock out a well-behaved client.
// Refusals are 429 with Retry-After: an OAuth error on /oauth2/token, an OperationOutcome on /auth/login.
import { createHash } from 'node:crypto';
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { OAuthError } from '../../auth/oauth-error.js';
import type { Config } from '../../config/config.js';
import { FhirError } from '../../fhir/outcome.js';
import type { Counters } from '../../storage/cache/cache.js';

export interface LoginGuard {
  /** onRequest hook of the login endpoints: the per-IP request limit. */
  perIp: onRequestAsyncHookHandler;
  /** Throws a 429 error when this client IP has used up its failed attempts for `identity`. */
  check(request: FastifyRequest, identity: string): Promise<void>;
  /** Counts a failed attempt (wrong password or client secret). */
  failed(request: FastifyRequest, identity: string): Promise<void>;
  /** Clears the failed attempts after a success. */
  succeeded(request: FastifyRequest, identity: string): Promise<void>;
}

type Callback = (err: Error | null, result?: { current: number; ttl: number }) => void;

/** The rate-limit plugin's store interface over our counters (keys are already distinct per limiter). */
function counterStore(counters: Counters) {
  const reply = (cb: Callback) => [
    (v: { count: number; ttlMs: number }) => cb(null, { current: v.count, ttl: v.ttlMs }),
    (err: unknown) => cb(err instanceof Error ? err : new Error(String(err))),
  ];
  return class CounterStore {
    incr(key: string, cb: Callback, timeWindow: number): void {
      const [ok, fail] = reply(cb);
      counters.increment(`rl:${key}`, timeWindow).then(ok, fail);
    }
    read(key: string, cb: Callback): void {
      const [ok, fail] = reply(cb);
      counters.peek(`rl:${key}`).then(ok, fail);
    }
    child(): CounterStore {
      return this;
    }
  };
}

function isTokenEndpoint(request: FastifyRequest): boolean {
  return request.routeOptions.url === '/oauth2/token';
}

function refusal(request: FastifyRequest, retryAfter: number, what: string): Error {
  const headers = { 'retry-after': String(Math.max(1, retryAfter)) };
  const message = `${what}; retry in ${Math.max(1, retryAfter)} seconds`;
  return isTokenEndpoint(request)
    ? new OAuthError('temporarily_unavailable', message, { status: 429, headers })
    : new FhirError('throttled', message, 'auth.rate-limited', { headers });
}

export async function registerLoginGuard(
  app: FastifyInstance,
  deps: { counters: Counters; limits: Config['rateLimit'] },
): Promise<LoginGuard> {
  const { limits } = deps;
  await app.register(rateLimit, {
    global: false,
    skipOnError: true,
    store: counterStore(deps.counters),
    // Only refusals carry the limit headers (and Retry-After).
    addHeadersOnExceeding: {
      'x-ratelimit-limit': false,
      'x-ratelimit-remaining': false,
      'x-ratelimit-reset': false,
    },
  });

  const perIpLimit = app.rateLimit({
    max: limits.authRequests,
    timeWindow: limits.authRequestWindow * 1000,
    errorResponseBuilder: (request, ctx) =>
      refusal(request, Math.ceil(ctx.ttl / 1000), 'Too many login requests from this address'),
  });
  const perIp: onRequestAsyncHookHandler = async (request, reply) => {
    if (limits.authRequests > 0) await perIpLimit.call(app, request, reply);
  };

  const identities = new WeakMap<FastifyRequest, string>();
  const keyOf = (request: FastifyRequest): string =>
    `fail:${request.ip}:${createHash('sha256')
      .update(identities.get(request) ?? '')
      .digest('base64url')}`;
  const failures = app.createRateLimit({
    max: limits.failedLogins,
    timeWindow: limits.failedLoginWindow * 1000,
    keyGenerator: keyOf,
  });
  const on = limits.failedLogins > 0;

  return {
    perIp,
    async check(request, identity) {
      if (!on) return;
      identities.set(request, identity);
      const r = await failures(request, { increment: false });
      if (!r.isAllowed && r.remaining <= 0 && r.ttl > 0) {
        request.log.warn({ ip: request.ip }, 'login refused: too many failed attempts');
        throw refusal(request, r.ttlInSeconds, 'Too many failed attempts');
      }
    },
    async failed(request, identity) {
      if (!on) return;
      identities.set(request, identity);
      await failures(request);
    },
    async succeeded(request, identity) {
      if (!on) return;
      identities.set(request, identity);
      await deps.counters.reset(`rl:${keyOf(request)}`);
    },
  };
}
