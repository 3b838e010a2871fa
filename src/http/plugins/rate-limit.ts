// Guards of the login endpoints against guessing (config `rateLimit`), with @fastify/rate-limit over the shared
// counters (Redis when configured, so every instance counts together; in-process otherwise or while Redis is down):
// - every request to /auth/login, /oauth2/token and /oauth2/authorize counts against the client IP (a flood guard);
// - failed password logins and client authentications count against (client IP, email or client_id); once
//   `failedLogins` is reached, that pair is refused, even with the right secret, until the window ends. A
//   success clears the count. Successful requests therefore never lock out a well-behaved client.
// - failed passwords also count against the account (the email), from every address, for a day (ACCOUNT_WINDOW_MS).
//   Once the account has `failedLogins` failures, an address that has not signed in to it (within KNOWN_MS) must
//   wait before each attempt for it: its first attempt opens a wait of 2^(failures − failedLogins) s, capped at
//   MAX_DELAY_S, and answers 429; after the wait one password is checked; a failure makes that address wait again,
//   the wait doubling with the account's failures. A waiting address's password is not checked, so an attacker
//   rotating addresses gets one guess per address per wait. It cannot lock the real user out: an address that signed
//   in to the account is never delayed, and a new address waits once, for the wait set when it first asked (at most
//   MAX_DELAY_S) — failures from other addresses never lengthen it (waits are kept per (account, address)).
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

/** How long an account's failures are counted (a fixed window from the first one). */
const ACCOUNT_WINDOW_MS = 24 * 3600 * 1000;
/** How long an address that signed in to an account is never delayed for it. */
const KNOWN_MS = 30 * 24 * 3600 * 1000;
/** The longest wait between two attempts of one address at an account under attack. */
export const MAX_DELAY_S = 300;

/** Identities counted per account as well: passwords (client secrets are generated, not guessable). */
const isAccount = (identity: string): boolean => identity.startsWith('email:');

/** The wait after the account's `failures`-th failure, `threshold` being the first that delays (seconds). */
function delayAfter(failures: number, threshold: number): number {
  return Math.min(MAX_DELAY_S, 2 ** Math.min(30, Math.max(0, failures - threshold)));
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

  // Per account (see the head of this file). Keys carry a hash of the identity, never the email itself.
  const { counters } = deps;
  const hashOf = (identity: string) => createHash('sha256').update(identity).digest('base64url');
  const accountKeys = (request: FastifyRequest, identity: string) => {
    const h = hashOf(identity);
    return {
      failures: `acct:${h}`,
      /** Present while this address must wait (its TTL is the wait left). */
      wait: `acct-wait:${h}:${request.ip}`,
      /** This address has had its turn: after its wait, its next password is checked. */
      turn: `acct-turn:${h}:${request.ip}`,
      known: `acct-known:${h}:${request.ip}`,
    };
  };
  const accountRefusal = (request: FastifyRequest, seconds: number) => {
    request.log.warn({ ip: request.ip }, 'login delayed: failed attempts for this account');
    return refusal(request, seconds, 'Too many failed attempts for this account');
  };
  /** Makes this address wait `seconds` from now (a fresh window: the counter's window is the wait). */
  const startWait = async (key: string, seconds: number) => {
    await counters.reset(key);
    await counters.increment(key, seconds * 1000);
  };
  const accountCheck = async (request: FastifyRequest, identity: string) => {
    const k = accountKeys(request, identity);
    const failures = (await counters.peek(k.failures)).count;
    if (failures < limits.failedLogins) return;
    if ((await counters.peek(k.known)).count > 0) return;
    const wait = await counters.peek(k.wait);
    if (wait.count > 0 && wait.ttlMs > 0) throw accountRefusal(request, Math.ceil(wait.ttlMs / 1000));
    if ((await counters.peek(k.turn)).count > 0) return;
    // A new address: its first attempt opens its wait; no password is checked before the wait is over.
    const seconds = delayAfter(failures, limits.failedLogins);
    await startWait(k.wait, seconds);
    await counters.increment(k.turn, ACCOUNT_WINDOW_MS);
    throw accountRefusal(request, seconds);
  };
  const accountFailed = async (request: FastifyRequest, identity: string) => {
    const k = accountKeys(request, identity);
    const failures = (await counters.increment(k.failures, ACCOUNT_WINDOW_MS)).count;
    if (failures < limits.failedLogins || (await counters.peek(k.known)).count > 0) return;
    await startWait(k.wait, delayAfter(failures, limits.failedLogins));
    await counters.increment(k.turn, ACCOUNT_WINDOW_MS);
  };
  const accountSucceeded = async (request: FastifyRequest, identity: string) => {
    // The account's failures stay: a success (which an attacker cannot cause) must not give them new free guesses.
    const k = accountKeys(request, identity);
    await counters.reset(k.wait);
    await counters.reset(k.known);
    await counters.increment(k.known, KNOWN_MS);
  };

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
      if (isAccount(identity)) await accountCheck(request, identity);
    },
    async failed(request, identity) {
      if (!on) return;
      identities.set(request, identity);
      await failures(request);
      if (isAccount(identity)) await accountFailed(request, identity);
    },
    async succeeded(request, identity) {
      if (!on) return;
      identities.set(request, identity);
      await deps.counters.reset(`rl:${keyOf(request)}`);
      if (isAccount(identity)) await accountSucceeded(request, identity);
    },
  };
}
