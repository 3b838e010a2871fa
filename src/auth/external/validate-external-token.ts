// Validation of a JWT issued by a configured external identity provider (API.md §4, seed spec §5): the
// token's `iss` selects the provider, the token must carry an unexpired `exp`, its signature is checked
// against the provider's JWKS when one is configured, and the provider's userinfo endpoint must accept it.
// Successes are cached for at most one hour and never past `exp`, under a SHA-256 of the token (the token
// itself is never stored or logged); failures are not cached; concurrent validations of one token share
// one provider call. Mapping the identity to a ProjectMembership is the caller's job.
import { createHash } from 'node:crypto';
import { createRemoteJWKSet, customFetch, decodeJwt, errors, jwtVerify, type JWTPayload } from 'jose';
import type { Cache } from '../../storage/cache/cache.js';

export interface ExternalProvider {
  issuer: string;
  userInfoUrl: string;
  jwksUrl?: string;
}

export interface ExternalIdentity {
  /** The configured issuer that matched the token's `iss`. */
  issuer: string;
  /** The token's `sub` claim, when it has one. */
  sub?: string;
  /** The token's `exp` (seconds since the epoch). */
  exp: number;
  /** `fhirUser` (or `ext.fhirUser`) of the token, else of the userinfo response. */
  fhirUser?: string;
  /** The token's claims. */
  claims: Record<string, unknown>;
  /** The userinfo response body ({} when it was not a JSON object). */
  userinfo: Record<string, unknown>;
}

export type ExternalAuthErrorReason =
  | 'not-jwt'
  | 'unknown-issuer'
  | 'no-exp'
  | 'expired'
  | 'bad-signature'
  | 'invalid-claims'
  | 'jwks-unreachable'
  | 'userinfo-rejected'
  | 'userinfo-unreachable'
  | 'sub-mismatch';

const MESSAGES: Record<ExternalAuthErrorReason, string> = {
  'not-jwt': 'The bearer token is not a JWT',
  'unknown-issuer': 'The token issuer is not a configured identity provider',
  'no-exp': 'The token has no valid exp claim',
  expired: 'The token has expired',
  'bad-signature': 'The token signature is not valid',
  'invalid-claims': 'The token is not valid yet or its claims are invalid',
  'jwks-unreachable': 'The identity provider signing keys could not be retrieved',
  'userinfo-rejected': 'The identity provider rejected the token',
  'userinfo-unreachable': 'The identity provider could not be reached',
  'sub-mismatch': 'The identity provider returned a different subject than the token',
};

/** A refused external token. `message` is safe to show to the client and never contains the token. */
export class ExternalAuthError extends Error {
  readonly reason: ExternalAuthErrorReason;
  constructor(reason: ExternalAuthErrorReason) {
    super(MESSAGES[reason]);
    this.name = 'ExternalAuthError';
    this.reason = reason;
  }
}

export interface ExternalAuthLogger {
  warn(obj: object, msg: string): void;
  info?(obj: object, msg: string): void;
}

export interface ExternalValidatorDeps {
  providers: readonly ExternalProvider[];
  cache: Cache;
  /** Used for userinfo and JWKS requests; defaults to the global fetch. */
  fetch?: typeof fetch;
  clock: () => Date;
  /** Timeout of each userinfo / JWKS request in milliseconds (default 5000). */
  timeoutMs?: number;
  log: ExternalAuthLogger;
}

export interface ExternalValidator {
  /** True when the token is a JWT whose `iss` names a configured provider (no other check). */
  isExternal(token: string): boolean;
  /** Validates the token; throws ExternalAuthError when it is refused. */
  validate(token: string): Promise<ExternalIdentity>;
  /** Drops the cached result for this token (e.g. a revoked login). */
  forget(token: string): Promise<void>;
  /** Drops the cached result for a token hash (see hashExternalToken). */
  invalidate(tokenHash: string): Promise<void>;
}

/** Longest time a successful validation is cached. */
export const EXTERNAL_AUTH_CACHE_TTL_MS = 60 * 60 * 1000;

/** SHA-256 (hex) of the token: the only form in which a token is used as a key. */
export function hashExternalToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** The cache key of a token hash. */
export function externalAuthCacheKey(tokenHash: string): string {
  return `extauth:${tokenHash}`;
}

/** Drops the cached validation of a token from a cache. */
export async function forgetExternalToken(cache: Cache, token: string): Promise<void> {
  await cache.delete(externalAuthCacheKey(hashExternalToken(token)));
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function decode(token: string): JWTPayload | undefined {
  try {
    return decodeJwt(token);
  } catch {
    return undefined;
  }
}

function fhirUserOf(obj: Record<string, unknown>): string | undefined {
  if (typeof obj.fhirUser === 'string' && obj.fhirUser !== '') return obj.fhirUser;
  const ext = obj.ext;
  if (isRecord(ext) && typeof ext.fhirUser === 'string' && ext.fhirUser !== '') return ext.fhirUser;
  return undefined;
}

/** A loggable description of an error, with any occurrence of the token removed. */
function describe(err: unknown, token: string): { name: string; message: string; cause?: string } {
  const scrub = (s: string) => (token !== '' ? s.split(token).join('[token]') : s);
  if (!(err instanceof Error)) return { name: 'Error', message: scrub(String(err)) };
  const out: { name: string; message: string; cause?: string } = {
    name: err.name,
    message: scrub(err.message),
  };
  const cause: unknown = err.cause;
  if (cause instanceof Error) {
    const code = (cause as { code?: unknown }).code;
    out.cause = scrub(typeof code === 'string' ? `${code}: ${cause.message}` : cause.message);
  }
  return out;
}

function isIdentity(v: unknown): v is ExternalIdentity {
  return (
    isRecord(v) &&
    typeof v.issuer === 'string' &&
    typeof v.exp === 'number' &&
    (v.sub === undefined || typeof v.sub === 'string') &&
    (v.fhirUser === undefined || typeof v.fhirUser === 'string') &&
    isRecord(v.claims) &&
    isRecord(v.userinfo)
  );
}

const SIGNATURE_ERROR_CODES = new Set([
  'ERR_JWS_SIGNATURE_VERIFICATION_FAILED',
  'ERR_JWS_INVALID',
  'ERR_JWT_INVALID',
  'ERR_JWKS_NO_MATCHING_KEY',
  'ERR_JWKS_MULTIPLE_MATCHING_KEYS',
  'ERR_JOSE_ALG_NOT_ALLOWED',
  'ERR_JOSE_NOT_SUPPORTED',
]);

export function createExternalValidator(deps: ExternalValidatorDeps): ExternalValidator {
  const { cache, clock, log } = deps;
  const fetchImpl = deps.fetch ?? globalThis.fetch;
  const timeoutMs = deps.timeoutMs ?? 5000;
  const providers = new Map<string, ExternalProvider>();
  for (const p of deps.providers) providers.set(p.issuer, p);
  const jwksByIssuer = new Map<string, ReturnType<typeof createRemoteJWKSet>>();
  const inFlight = new Map<string, Promise<ExternalIdentity>>();

  function jwksOf(provider: ExternalProvider & { jwksUrl: string }) {
    let jwks = jwksByIssuer.get(provider.issuer);
    if (!jwks) {
      jwks = createRemoteJWKSet(new URL(provider.jwksUrl), {
        timeoutDuration: timeoutMs,
        [customFetch]: (url, options) => fetchImpl(url, options),
      });
      jwksByIssuer.set(provider.issuer, jwks);
    }
    return jwks;
  }

  /** Checks that need no provider: JWT shape, issuer, exp. */
  function precheck(token: string): { provider: ExternalProvider; claims: JWTPayload & { exp: number } } {
    const claims = decode(token);
    if (!claims) throw new ExternalAuthError('not-jwt');
    const provider = typeof claims.iss === 'string' ? providers.get(claims.iss) : undefined;
    if (!provider) throw new ExternalAuthError('unknown-issuer');
    const exp = claims.exp;
    if (typeof exp !== 'number' || !Number.isFinite(exp)) throw new ExternalAuthError('no-exp');
    if (exp * 1000 <= clock().getTime()) throw new ExternalAuthError('expired');
    return { provider, claims: { ...claims, exp } };
  }

  async function verifySignature(token: string, provider: ExternalProvider & { jwksUrl: string }) {
    try {
      await jwtVerify(token, jwksOf(provider), { issuer: provider.issuer, currentDate: clock() });
    } catch (err) {
      const code = err instanceof errors.JOSEError ? err.code : undefined;
      if (code === 'ERR_JWT_EXPIRED') throw new ExternalAuthError('expired');
      if (code === 'ERR_JWT_CLAIM_VALIDATION_FAILED') throw new ExternalAuthError('invalid-claims');
      if (code !== undefined && SIGNATURE_ERROR_CODES.has(code)) throw new ExternalAuthError('bad-signature');
      log.warn(
        { issuer: provider.issuer, err: describe(err, token) },
        'External identity provider JWKS could not be retrieved',
      );
      throw new ExternalAuthError('jwks-unreachable');
    }
  }

  async function callUserinfo(token: string, provider: ExternalProvider): Promise<Record<string, unknown>> {
    let res: Response;
    let text: string;
    try {
      res = await fetchImpl(provider.userInfoUrl, {
        method: 'GET',
        headers: { Authorization: `Bearer ${token}`, Accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs),
        // Never forward the token to wherever a redirect points; a redirect is not a 2xx answer.
        redirect: 'manual',
      });
      if (res.status < 200 || res.status > 299) {
        await res.body?.cancel().catch(() => undefined);
        if (res.status >= 500) {
          log.warn(
            { issuer: provider.issuer, status: res.status },
            'External identity provider userinfo failed',
          );
        }
        throw new ExternalAuthError('userinfo-rejected');
      }
      text = await res.text();
    } catch (err) {
      if (err instanceof ExternalAuthError) throw err;
      log.warn(
        { issuer: provider.issuer, err: describe(err, token) },
        'External identity provider userinfo unreachable',
      );
      throw new ExternalAuthError('userinfo-unreachable');
    }
    try {
      const body: unknown = JSON.parse(text);
      return isRecord(body) ? body : {};
    } catch {
      return {};
    }
  }

  async function readCache(key: string): Promise<ExternalIdentity | undefined> {
    let raw: string | undefined;
    try {
      raw = await cache.get(key);
    } catch (err) {
      log.warn({ err: describe(err, '') }, 'External auth cache read failed');
      return undefined;
    }
    if (raw === undefined) return undefined;
    try {
      const v: unknown = JSON.parse(raw);
      return isIdentity(v) ? v : undefined;
    } catch {
      return undefined;
    }
  }

  async function run(
    token: string,
    key: string,
    provider: ExternalProvider,
    claims: JWTPayload & { exp: number },
  ): Promise<ExternalIdentity> {
    const cached = await readCache(key);
    if (cached && cached.issuer === provider.issuer) {
      // Never served past exp, whatever the cache's own TTL says.
      if (cached.exp * 1000 > clock().getTime()) return cached;
      await cache.delete(key).catch(() => undefined);
      throw new ExternalAuthError('expired');
    }

    if (provider.jwksUrl !== undefined)
      await verifySignature(token, { ...provider, jwksUrl: provider.jwksUrl });
    const userinfo = await callUserinfo(token, provider);
    const sub = typeof claims.sub === 'string' ? claims.sub : undefined;
    if (sub !== undefined && userinfo.sub !== undefined && userinfo.sub !== sub) {
      throw new ExternalAuthError('sub-mismatch');
    }
    const fhirUser = fhirUserOf(claims) ?? fhirUserOf(userinfo);
    const identity: ExternalIdentity = {
      issuer: provider.issuer,
      ...(sub !== undefined ? { sub } : {}),
      exp: claims.exp,
      ...(fhirUser !== undefined ? { fhirUser } : {}),
      claims: { ...claims },
      userinfo,
    };

    const now = clock().getTime();
    const ttl = Math.min(EXTERNAL_AUTH_CACHE_TTL_MS, claims.exp * 1000 - now);
    if (ttl <= 0) throw new ExternalAuthError('expired'); // expired while the provider was answering
    try {
      await cache.set(key, JSON.stringify(identity), ttl);
    } catch (err) {
      log.warn({ err: describe(err, token) }, 'External auth cache write failed');
    }
    return identity;
  }

  return {
    isExternal(token) {
      const claims = decode(token);
      return claims !== undefined && typeof claims.iss === 'string' && providers.has(claims.iss);
    },

    async validate(token) {
      const { provider, claims } = precheck(token);
      const hash = hashExternalToken(token);
      let flight = inFlight.get(hash);
      if (!flight) {
        flight = run(token, externalAuthCacheKey(hash), provider, claims).finally(() =>
          inFlight.delete(hash),
        );
        inFlight.set(hash, flight);
      }
      const identity = await flight;
      if (identity.exp * 1000 <= clock().getTime()) throw new ExternalAuthError('expired');
      return identity;
    },

    async forget(token) {
      await cache.delete(externalAuthCacheKey(hashExternalToken(token)));
    },

    async invalidate(tokenHash) {
      await cache.delete(externalAuthCacheKey(tokenHash));
    },
  };
}
