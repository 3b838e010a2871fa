// Issue 25 point 8 (password guessing per account): besides the limit per (address, email), an account's failed
// passwords, counted from every address (and every instance, through Redis), make addresses that never signed in to
// it wait between attempts, the wait doubling with each further failure up to a cap; a waiting address's password is
// not even checked. An attacker cannot turn this into a lockout: an address the user signed in from before is never
// delayed, and a new address waits its turn once (at most the cap), however many failures others add meanwhile.
// Addresses are set with inject's remoteAddress (the app does not trust proxies); time moves with an injected clock.
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryCache, createRedisCache } from '../../src/storage/cache/index.js';
import { inviteRequest, setUserPassword, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';

const PASSWORD = 'the right password 0123';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
const REDIS_URL = process.env.TEST_REDIS_URL;
/** failedLogins: the per-(address, email) limit and the number of account failures before delays begin. */
const N = 3;

function expectThrottled(res: LightMyRequestResponse, seconds?: number): number {
  expect(res.statusCode, res.body).toBe(429);
  const outcome = res.json() as { issue: { code: string; details: { text: string } }[] };
  expect(outcome.issue[0]?.code).toBe('throttled');
  expect(outcome.issue[0]?.details.text).toMatch(/this account/);
  const retryAfter = Number(res.headers['retry-after']);
  if (seconds !== undefined) expect(retryAfter).toBe(seconds);
  return retryAfter;
}

function expectBadPassword(res: LightMyRequestResponse): void {
  expect(res.statusCode, res.body).toBe(400);
  expect(res.json().issue[0]).toMatchObject({
    code: 'invalid',
    details: { text: 'Email or password is invalid' },
  });
}

describe.each(testDatabases())('password guessing per account on $name', (database) => {
  let t: TestApp;
  let now = Date.now();
  const advance = (seconds: number) => void (now += seconds * 1000);
  let projectId: string;
  let projectToken: string;

  const login = (email: string, password: string, address: string) =>
    t.app.inject({
      method: 'POST',
      url: '/auth/login',
      remoteAddress: address,
      headers: { 'content-type': 'application/json' },
      payload: { email, password, codeChallenge: CHALLENGE, codeChallengeMethod: 'S256' },
    });
  /** A user of the project with PASSWORD; answers its email. */
  const newUser = async (): Promise<string> => {
    const email = `victim-${randomUUID().slice(0, 8)}@guess.example`;
    const res = await inviteRequest(t, projectToken, projectId, {
      resourceType: 'Practitioner',
      firstName: 'Vic',
      lastName: 'Tim',
      email,
    });
    expect(res.statusCode, res.body).toBe(200);
    await setUserPassword(t, (res.json().user.reference as string).split('/')[1] as string, PASSWORD);
    return email;
  };

  beforeAll(async () => {
    const clock = () => new Date(now);
    t = await startTestApp(
      database,
      { rateLimit: { failedLogins: N, failedLoginWindow: 60 } },
      { clock, counters: createMemoryCache({ max: 10_000, clock: () => now }) },
    );
    const p = await t.newProject('Guessing');
    projectId = p.projectId;
    projectToken = p.adminToken;
  });
  afterAll(async () => t?.close());

  it('an attacker rotating addresses gets growing delays per account, and waiting addresses are not checked', async () => {
    const email = await newUser();
    // N failures from N addresses: each under the per-address limit.
    for (let i = 1; i <= N; i++) expectBadPassword(await login(email, `guess ${i}`, `10.1.0.${i}`));
    // From now on a new address waits before its first attempt: 1 s, then 2 s, 4 s... as failures grow.
    expectThrottled(await login(email, 'guess 4', '10.1.0.4'), 1);
    advance(1);
    expectBadPassword(await login(email, 'guess 4', '10.1.0.4'));
    expectThrottled(await login(email, 'guess 5', '10.1.0.4'), 2);
    expectThrottled(await login(email, 'guess 5', '10.1.0.5'), 2);
    advance(2);
    expectBadPassword(await login(email, 'guess 5', '10.1.0.5'));
    expectThrottled(await login(email, 'guess 6', '10.1.0.6'), 4);
    // The right password from a waiting address is refused unchecked: a guess cannot be tested early.
    expectThrottled(await login(email, PASSWORD, '10.1.0.6'));
    expectThrottled(await login(email, PASSWORD, '10.1.0.7'));
    // Another account is not affected.
    const other = await newUser();
    expect((await login(other, PASSWORD, '10.1.0.8')).statusCode).toBe(200);
  });

  it('the delay doubles up to a cap of 300 s', async () => {
    const email = await newUser();
    for (let i = 1; i <= N; i++) expectBadPassword(await login(email, `guess ${i}`, `10.2.0.${i}`));
    const waits: number[] = [];
    for (let i = 0; i < 12; i++) {
      const address = `10.2.1.${i}`;
      const wait = expectThrottled(await login(email, 'guess', address));
      waits.push(wait);
      advance(wait);
      expectBadPassword(await login(email, 'guess', address));
    }
    expect(waits).toEqual([1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
  });

  it('cannot lock the real user out: a known address is never delayed, a new one waits once', async () => {
    const email = await newUser();
    expect((await login(email, PASSWORD, '10.3.9.9')).statusCode).toBe(200);
    for (let i = 1; i <= N + 2; i++) {
      const address = `10.3.0.${i}`;
      if (i > N) advance(expectThrottled(await login(email, 'guess', address)));
      expectBadPassword(await login(email, 'guess', address));
    }
    // The address the user signed in from before: at once.
    expect((await login(email, PASSWORD, '10.3.9.9')).statusCode).toBe(200);
    // A new address (a phone on another network): one wait, which the attacker's further failures do not extend.
    const wait = expectThrottled(await login(email, PASSWORD, '10.3.8.8'));
    expect(wait).toBeLessThanOrEqual(300);
    for (let i = 0; i < 4; i++) {
      const address = `10.3.1.${i}`;
      advance(expectThrottled(await login(email, 'guess', address)));
      expectBadPassword(await login(email, 'guess', address));
    }
    // The attacker's own waits (4 + 8 + 16 + 32 s) have passed the user's 4 s: the user's turn has come.
    expect((await login(email, PASSWORD, '10.3.8.8')).statusCode).toBe(200);
    // Having signed in, that address is known too.
    expectBadPassword(await login(email, 'typo', '10.3.8.8'));
    expect((await login(email, PASSWORD, '10.3.8.8')).statusCode).toBe(200);
  });

  it('a new address waits no longer than its Retry-After, even while failures go on', async () => {
    const email = await newUser();
    for (let i = 1; i <= N; i++) expectBadPassword(await login(email, `guess ${i}`, `10.4.0.${i}`));
    // The attacker gets three addresses through their wait first...
    for (let i = 1; i <= 3; i++) expectThrottled(await login(email, 'guess', `10.4.1.${i}`), 1);
    advance(1);
    const wait = expectThrottled(await login(email, PASSWORD, '10.4.8.8'), 1);
    // ...and fails from them while the user waits: the failures grow, the user's wait does not.
    for (let i = 1; i <= 3; i++) expectBadPassword(await login(email, 'guess', `10.4.1.${i}`));
    expectThrottled(await login(email, 'guess', '10.4.2.1'), 8);
    advance(wait);
    expect((await login(email, PASSWORD, '10.4.8.8')).statusCode).toBe(200);
  });
});

// Two instances sharing Redis: the account's failures counted on one make new addresses wait on the other.
describe.skipIf(!REDIS_URL)('password guessing per account across instances (Redis)', () => {
  const pglite = testDatabases()[0];
  let a: TestApp;
  let b: TestApp;
  const prefix = `cinder-test:acct:${randomUUID()}:`;
  const log = { warn: () => undefined };
  const ca = createRedisCache(REDIS_URL as string, { keyPrefix: prefix, log });
  const cb = createRedisCache(REDIS_URL as string, { keyPrefix: prefix, log });

  beforeAll(async () => {
    const overrides = { rateLimit: { failedLogins: N, failedLoginWindow: 60 } };
    a = await startTestApp(pglite as NonNullable<typeof pglite>, overrides, { counters: ca });
    b = await startTestApp(pglite as NonNullable<typeof pglite>, overrides, { counters: cb, db: a.db });
  });
  afterAll(async () => {
    await b?.close();
    await a?.close();
    await ca.close();
    await cb.close();
  });

  const login = (t: TestApp, password: string, address: string) =>
    t.app.inject({
      method: 'POST',
      url: '/auth/login',
      remoteAddress: address,
      headers: { 'content-type': 'application/json' },
      payload: {
        email: 'admin@example.com',
        password,
        codeChallenge: CHALLENGE,
        codeChallengeMethod: 'S256',
      },
    });

  it('counts an account’s failures on every instance', async () => {
    expect((await login(b, 'admin-password-1', '10.5.9.9')).statusCode).toBe(200);
    for (let i = 1; i <= N; i++) expectBadPassword(await login(i % 2 ? a : b, 'guess', `10.5.0.${i}`));
    expectThrottled(await login(b, 'guess', '10.5.0.9'), 1);
    expectThrottled(await login(a, 'admin-password-1', '10.5.0.10'), 1);
    // The known address signs in on either instance.
    expect((await login(a, 'admin-password-1', '10.5.9.9')).statusCode).toBe(200);
  });
});
