import { createHash, randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { compactVerify, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Cache } from '../../storage/cache/cache.js';
import { createMemoryCache } from '../../storage/cache/memory.js';
import { createRedisCache } from '../../storage/cache/redis.js';
import {
  createExternalValidator,
  ExternalAuthError,
  externalAuthCacheKey,
  forgetExternalToken,
  hashExternalToken,
  type ExternalAuthErrorReason,
  type ExternalProvider,
  type ExternalValidatorDeps,
} from './validate-external-token.js';

// ---------------------------------------------------------------------------------------------------------
// A mock identity provider: its own RS256 key pair, a userinfo endpoint that verifies the bearer token's
// signature and counts calls, a JWKS endpoint, and a switch for the userinfo behaviour.

type UserinfoMode = 'ok' | 'unauthorized' | 'server-error' | 'hang' | 'other-sub' | 'not-json';

interface MockIdp {
  issuer: string;
  userInfoUrl: string;
  jwksUrl: string;
  calls: { userinfo: number; jwks: number };
  mode: UserinfoMode;
  /** Extra members of the userinfo response. */
  userinfoExtra: Record<string, unknown>;
  lastHeaders?: http.IncomingHttpHeaders;
  /** Signs a JWT; expInSeconds null → no exp. */
  sign(
    claims: Record<string, unknown>,
    opts?: { expInSeconds?: number | null; key?: CryptoKey },
  ): Promise<string>;
  close(): Promise<void>;
}

let clockMs = 0;
const clock = () => new Date(clockMs);

async function startIdp(): Promise<MockIdp> {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const kid = randomUUID();
  const publicJwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'RS256', use: 'sig' };
  const idp = {
    calls: { userinfo: 0, jwks: 0 },
    mode: 'ok' as UserinfoMode,
    userinfoExtra: {} as Record<string, unknown>,
    lastHeaders: undefined as http.IncomingHttpHeaders | undefined,
  };
  const server = http.createServer((req, res) => {
    void (async () => {
      if (req.url === '/jwks') {
        idp.calls.jwks++;
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [publicJwk] }));
        return;
      }
      if (req.url !== '/userinfo') {
        res.writeHead(404).end();
        return;
      }
      idp.calls.userinfo++;
      idp.lastHeaders = req.headers;
      if (idp.mode === 'hang') return; // never answers
      const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
      let payload: Record<string, unknown>;
      try {
        if (!m?.[1]) throw new Error('no bearer token');
        const verified = await compactVerify(m[1], publicKey);
        payload = JSON.parse(new TextDecoder().decode(verified.payload)) as Record<string, unknown>;
      } catch {
        res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"' }).end();
        return;
      }
      if (idp.mode === 'unauthorized') return void res.writeHead(401).end();
      if (idp.mode === 'server-error') return void res.writeHead(503).end('down');
      if (idp.mode === 'not-json')
        return void res.writeHead(200, { 'content-type': 'text/plain' }).end('hello');
      const sub = idp.mode === 'other-sub' ? 'someone-else' : payload.sub;
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ sub, name: 'Alice Smith', ...idp.userinfoExtra }));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(idp, {
    issuer: base,
    userInfoUrl: `${base}/userinfo`,
    jwksUrl: `${base}/jwks`,
    async sign(
      claims: Record<string, unknown>,
      opts: { expInSeconds?: number | null; key?: CryptoKey } = {},
    ) {
      const jwt = new SignJWT({ iss: base, ...claims })
        .setProtectedHeader({ alg: 'RS256', kid })
        .setIssuedAt(Math.floor(clockMs / 1000));
      const expIn = opts.expInSeconds === undefined ? 7200 : opts.expInSeconds;
      if (expIn !== null) jwt.setExpirationTime(Math.floor(clockMs / 1000) + expIn);
      return jwt.sign(opts.key ?? privateKey);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

function fakeLog() {
  return {
    warn: vi.fn<(obj: object, msg: string) => void>(),
    info: vi.fn<(obj: object, msg: string) => void>(),
  };
}

/** A memory cache (on the test clock) that records what is written to it. */
function spyCache(): Cache & { sets: { key: string; value: string; ttlMs: number }[] } {
  const inner = createMemoryCache({ max: 1000, clock: () => clockMs });
  const sets: { key: string; value: string; ttlMs: number }[] = [];
  return {
    kind: 'memory',
    sets,
    get: (k) => inner.get(k),
    set: async (key, value, ttlMs) => {
      sets.push({ key, value, ttlMs });
      await inner.set(key, value, ttlMs);
    },
    delete: (k) => inner.delete(k),
    close: () => inner.close(),
  };
}

async function expectRefused(
  p: Promise<unknown>,
  reason: ExternalAuthErrorReason,
  token?: string,
): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ExternalAuthError);
  expect((err as ExternalAuthError).reason).toBe(reason);
  if (token) {
    expect((err as ExternalAuthError).message).not.toContain(token);
    expect(JSON.stringify(err)).not.toContain(token);
  }
}

let idp: MockIdp;

beforeAll(async () => {
  idp = await startIdp();
});
afterAll(async () => {
  await idp.close();
});
beforeEach(() => {
  clockMs = Math.floor(Date.now() / 1000) * 1000; // a whole second, so TTLs are exact
  idp.mode = 'ok';
  idp.userinfoExtra = {};
  idp.calls.userinfo = 0;
  idp.calls.jwks = 0;
});

function setup(overrides: Partial<ExternalValidatorDeps> & { provider?: Partial<ExternalProvider> } = {}) {
  const cache = spyCache();
  const log = fakeLog();
  const provider: ExternalProvider = {
    issuer: idp.issuer,
    userInfoUrl: idp.userInfoUrl,
    ...overrides.provider,
  };
  const validator = createExternalValidator({ providers: [provider], cache, clock, log, ...overrides });
  return { validator, cache, log };
}

// ---------------------------------------------------------------------------------------------------------

describe('token shape, issuer and exp (no provider call)', () => {
  it('refuses what is not a JWT', async () => {
    const { validator } = setup();
    for (const t of ['', 'garbage', 'a.b.c', 'eyJhbGciOiJSUzI1NiJ9.bm90LWpzb24.c2ln', 'a.b.c.d.e']) {
      expect(validator.isExternal(t)).toBe(false);
      await expectRefused(validator.validate(t), 'not-jwt');
    }
    expect(idp.calls.userinfo).toBe(0);
  });

  it('requires iss to equal a configured issuer exactly', async () => {
    const { validator } = setup();
    const good = await idp.sign({ sub: 'alice' });
    expect(validator.isExternal(good)).toBe(true);
    for (const iss of ['https://evil.example', `${idp.issuer}/`, idp.issuer.toUpperCase(), undefined]) {
      const t = await idp.sign({ sub: 'alice', iss });
      expect(validator.isExternal(t)).toBe(false);
      await expectRefused(validator.validate(t), 'unknown-issuer', t);
    }
    expect(idp.calls.userinfo).toBe(0);
  });

  it('refuses a token without exp', async () => {
    const { validator } = setup();
    const t = await idp.sign({ sub: 'alice' }, { expInSeconds: null });
    await expectRefused(validator.validate(t), 'no-exp', t);
    const t2 = await idp.sign({ sub: 'alice', exp: 'tomorrow' }, { expInSeconds: null });
    await expectRefused(validator.validate(t2), 'no-exp', t2);
    expect(idp.calls.userinfo).toBe(0);
  });

  it('refuses an expired token before calling the provider (against the injected clock)', async () => {
    const { validator } = setup();
    const t = await idp.sign({ sub: 'alice' }, { expInSeconds: 60 });
    clockMs += 60_000;
    await expectRefused(validator.validate(t), 'expired', t);
    expect(idp.calls.userinfo).toBe(0);
  });
});

describe('userinfo validation', () => {
  it('accepts a token the provider accepts and returns the identity', async () => {
    const { validator } = setup();
    const t = await idp.sign({ sub: 'alice', fhirUser: 'Practitioner/1', scope: 'openid' });
    const id = await validator.validate(t);
    expect(idp.calls.userinfo).toBe(1);
    expect(idp.lastHeaders?.authorization).toBe(`Bearer ${t}`);
    expect(idp.lastHeaders?.accept).toBe('application/json');
    expect(id).toMatchObject({
      issuer: idp.issuer,
      sub: 'alice',
      fhirUser: 'Practitioner/1',
      exp: Math.floor(clockMs / 1000) + 7200,
      claims: { sub: 'alice', scope: 'openid', iss: idp.issuer },
      userinfo: { sub: 'alice', name: 'Alice Smith' },
    });
  });

  it('reads fhirUser from the claim, then ext.fhirUser, then the userinfo body', async () => {
    const { validator } = setup();
    idp.userinfoExtra = { fhirUser: 'Practitioner/from-userinfo' };
    const a = await validator.validate(await idp.sign({ sub: 'a', fhirUser: 'Practitioner/claim' }));
    expect(a.fhirUser).toBe('Practitioner/claim');
    const b = await validator.validate(await idp.sign({ sub: 'b', ext: { fhirUser: 'Practitioner/ext' } }));
    expect(b.fhirUser).toBe('Practitioner/ext');
    const c = await validator.validate(await idp.sign({ sub: 'c' }));
    expect(c.fhirUser).toBe('Practitioner/from-userinfo');
    idp.userinfoExtra = { ext: { fhirUser: 'Practitioner/userinfo-ext' } };
    const d = await validator.validate(await idp.sign({ sub: 'd' }));
    expect(d.fhirUser).toBe('Practitioner/userinfo-ext');
    idp.userinfoExtra = {};
    const e = await validator.validate(await idp.sign({ sub: 'e', fhirUser: 42 }));
    expect(e.fhirUser).toBeUndefined();
  });

  it('refuses a token the provider answers non-2xx to', async () => {
    const { validator, log } = setup();
    idp.mode = 'unauthorized';
    const t = await idp.sign({ sub: 'alice' });
    await expectRefused(validator.validate(t), 'userinfo-rejected', t);
    idp.mode = 'server-error';
    await expectRefused(validator.validate(t), 'userinfo-rejected', t);
    expect(log.warn).toHaveBeenCalledTimes(1); // the 5xx, not the 401
    expect(JSON.stringify(log.warn.mock.calls)).not.toContain(t);
    // A token the provider did not sign is rejected by the provider itself.
    const { privateKey: otherKey } = await generateKeyPair('RS256');
    const forged = await idp.sign({ sub: 'alice' }, { key: otherKey });
    idp.mode = 'ok';
    await expectRefused(validator.validate(forged), 'userinfo-rejected', forged);
  });

  it('does not cache failures: the next attempt calls the provider again', async () => {
    const { validator, cache } = setup();
    const t = await idp.sign({ sub: 'alice' });
    idp.mode = 'unauthorized';
    await expectRefused(validator.validate(t), 'userinfo-rejected');
    expect(idp.calls.userinfo).toBe(1);
    expect(cache.sets).toHaveLength(0);
    idp.mode = 'ok';
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(2);
  });

  it('times out on a provider that does not answer, and logs a warning without the token', async () => {
    const { validator, log } = setup({ timeoutMs: 200 });
    idp.mode = 'hang';
    const t = await idp.sign({ sub: 'alice' });
    const started = Date.now();
    await expectRefused(validator.validate(t), 'userinfo-unreachable', t);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(log.warn.mock.calls[0]?.[0]).toMatchObject({ issuer: idp.issuer });
    expect(JSON.stringify(log.warn.mock.calls)).not.toContain(t);
  });

  it('reports an unreachable provider', async () => {
    const { validator, log } = setup({ provider: { userInfoUrl: 'http://127.0.0.1:1/userinfo' } });
    const t = await idp.sign({ sub: 'alice' });
    await expectRefused(validator.validate(t), 'userinfo-unreachable', t);
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(log.warn.mock.calls[0]?.[0]).toMatchObject({ issuer: idp.issuer });
    expect(JSON.stringify(log.warn.mock.calls)).not.toContain(t);
  });

  it('refuses when the userinfo sub differs from the token sub', async () => {
    const { validator, cache } = setup();
    idp.mode = 'other-sub';
    const t = await idp.sign({ sub: 'alice' });
    await expectRefused(validator.validate(t), 'sub-mismatch', t);
    expect(cache.sets).toHaveLength(0);
    // Without a sub in the token there is nothing to compare.
    const id = await validator.validate(await idp.sign({ fhirUser: 'Practitioner/1' }));
    expect(id.sub).toBeUndefined();
    expect(id.userinfo.sub).toBe('someone-else');
  });

  it('treats a non-JSON 2xx body as {}', async () => {
    const { validator } = setup();
    idp.mode = 'not-json';
    const id = await validator.validate(await idp.sign({ sub: 'alice' }));
    expect(id.userinfo).toEqual({});
    expect(id.sub).toBe('alice');
  });
});

describe('cache', () => {
  it('caches under extauth:<sha256 of the token>, never the token itself', async () => {
    const { validator, cache } = setup();
    const t = await idp.sign({ sub: 'alice' });
    await validator.validate(t);
    const hash = createHash('sha256').update(t).digest('hex');
    expect(hashExternalToken(t)).toBe(hash);
    expect(cache.sets).toHaveLength(1);
    expect(cache.sets[0]?.key).toBe(`extauth:${hash}`);
    expect(externalAuthCacheKey(hash)).toBe(`extauth:${hash}`);
    for (const part of t.split('.')) expect(cache.sets[0]?.value).not.toContain(part);
  });

  it('serves a second validate from the cache, and calls again after one hour', async () => {
    const { validator, cache } = setup();
    const t = await idp.sign({ sub: 'alice' }, { expInSeconds: 7200 });
    const first = await validator.validate(t);
    expect(cache.sets[0]?.ttlMs).toBe(3_600_000);
    clockMs += 30 * 60_000;
    expect(await validator.validate(t)).toEqual(first);
    expect(idp.calls.userinfo).toBe(1);
    clockMs += 30 * 60_000 + 1000;
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(2);
  });

  it('never serves a cached result past the token exp', async () => {
    // A cache that ignores TTLs: the validator itself must refuse past exp.
    const store = new Map<string, string>();
    const cache: Cache = {
      kind: 'memory',
      get: async (k) => store.get(k),
      set: async (k, v) => void store.set(k, v),
      delete: async (k) => void store.delete(k),
      close: async () => undefined,
    };
    const spy = spyCache();
    const { validator } = setup({ cache });
    const { validator: v2 } = setup({ cache: spy });
    const t = await idp.sign({ sub: 'alice' }, { expInSeconds: 600 });
    await validator.validate(t);
    await v2.validate(t);
    expect(spy.sets[0]?.ttlMs).toBe(600_000);
    clockMs += 9 * 60_000;
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(2);
    clockMs += 60_000;
    await expectRefused(validator.validate(t), 'expired', t);
    await expectRefused(v2.validate(t), 'expired', t);
    expect(idp.calls.userinfo).toBe(2);
  });

  it('shares one provider call between 10 concurrent validations', async () => {
    const { validator } = setup();
    const t = await idp.sign({ sub: 'alice' });
    const results = await Promise.all(Array.from({ length: 10 }, () => validator.validate(t)));
    expect(idp.calls.userinfo).toBe(1);
    for (const r of results) expect(r).toEqual(results[0]);
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(1);
  });

  it('shares one failing call too, and the next attempt calls again', async () => {
    const { validator } = setup();
    idp.mode = 'unauthorized';
    const t = await idp.sign({ sub: 'alice' });
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => validator.validate(t)));
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(idp.calls.userinfo).toBe(1);
    await expectRefused(validator.validate(t), 'userinfo-rejected');
    expect(idp.calls.userinfo).toBe(2);
  });

  it('forgets a token (by token or by hash)', async () => {
    const { validator, cache } = setup();
    const t = await idp.sign({ sub: 'alice' });
    await validator.validate(t);
    await validator.forget(t);
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(2);
    await validator.invalidate(hashExternalToken(t));
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(3);
    await forgetExternalToken(cache, t);
    await validator.validate(t);
    expect(idp.calls.userinfo).toBe(4);
  });
});

describe('local signature check with jwksUrl', () => {
  it('accepts a token signed by a key of the JWKS', async () => {
    const { validator } = setup({ provider: { jwksUrl: idp.jwksUrl } });
    const id = await validator.validate(await idp.sign({ sub: 'alice' }));
    expect(id.sub).toBe('alice');
    expect(idp.calls.jwks).toBe(1);
    expect(idp.calls.userinfo).toBe(1);
    await validator.validate(await idp.sign({ sub: 'bob' }));
    expect(idp.calls.jwks).toBe(1); // the key set is cached per provider
  });

  it('refuses a bad signature without calling userinfo', async () => {
    const { validator } = setup({ provider: { jwksUrl: idp.jwksUrl } });
    const { privateKey: otherKey } = await generateKeyPair('RS256');
    const forged = await idp.sign({ sub: 'alice' }, { key: otherKey });
    await expectRefused(validator.validate(forged), 'bad-signature', forged);
    const [h, p, s] = (await idp.sign({ sub: 'alice' })).split('.');
    const tampered = `${h}.${Buffer.from(JSON.stringify({ iss: idp.issuer, sub: 'mallory', exp: Math.floor(clockMs / 1000) + 60 })).toString('base64url')}.${s}`;
    expect(p).toBeDefined();
    await expectRefused(validator.validate(tampered), 'bad-signature', tampered);
    const unsigned = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ iss: idp.issuer, sub: 'alice', exp: Math.floor(clockMs / 1000) + 60 })).toString('base64url')}.`;
    expect(validator.isExternal(unsigned)).toBe(true);
    await expectRefused(validator.validate(unsigned), 'bad-signature', unsigned);
    expect(idp.calls.userinfo).toBe(0);
  });

  it('reports an unreachable JWKS without calling userinfo', async () => {
    const { validator, log } = setup({ provider: { jwksUrl: 'http://127.0.0.1:1/jwks' } });
    const t = await idp.sign({ sub: 'alice' });
    await expectRefused(validator.validate(t), 'jwks-unreachable', t);
    expect(idp.calls.userinfo).toBe(0);
    expect(log.warn).toHaveBeenCalledTimes(1);
    expect(JSON.stringify(log.warn.mock.calls)).not.toContain(t);
  });
});

// Needs a real Redis server; runs only when TEST_REDIS_URL is set
// (e.g. TEST_REDIS_URL=redis://127.0.0.1:6379 npx vitest run src/auth/external).
describe.skipIf(!process.env.TEST_REDIS_URL)('Redis-backed cache', () => {
  const url = process.env.TEST_REDIS_URL ?? '';
  const prefix = `cinder-test:extauth:${randomUUID()}:`;

  it('shares results between two validator instances; Redis holds no token text', async () => {
    const caches = [0, 1].map(() => createRedisCache(url, { keyPrefix: prefix, log: fakeLog() }));
    const raw = new Redis(url);
    try {
      const [a, b] = caches.map((cache) => setup({ cache }).validator);
      const t = await idp.sign({ sub: 'alice', fhirUser: 'Practitioner/1' });
      const first = await a!.validate(t);
      const second = await b!.validate(t);
      expect(second).toEqual(first);
      expect(idp.calls.userinfo).toBe(1);

      const keys = await raw.keys(`${prefix}*`);
      expect(keys).toEqual([`${prefix}extauth:${hashExternalToken(t)}`]);
      const value = (await raw.get(keys[0]!)) ?? '';
      const pttl = await raw.pttl(keys[0]!);
      expect(pttl).toBeGreaterThan(3_500_000);
      expect(pttl).toBeLessThanOrEqual(3_600_000);
      for (const part of t.split('.')) {
        expect(keys[0]).not.toContain(part);
        expect(value).not.toContain(part);
      }

      await b!.forget(t);
      expect(await raw.keys(`${prefix}*`)).toEqual([]);
    } finally {
      for (const c of caches) await c.close();
      const left = await raw.keys(`${prefix}*`);
      if (left.length > 0) await raw.del(...left);
      await raw.quit();
    }
  });
});
