// Two server instances on one database share the external-token cache through Redis (API.md §4, issue 3 §5):
// the provider is called once for both, and Redis holds no token text.
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedisCache } from '../../src/storage/cache/index.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp } from '../support/app.js';

const redisUrl = process.env.TEST_REDIS_URL;
const log = { warn: () => undefined, info: () => undefined };

// Needs a real Redis: CI sets TEST_REDIS_URL; a laptop without Redis skips this file.
describe.skipIf(!redisUrl)('external-token cache in Redis', () => {
  const prefix = `cinder-test:${randomUUID()}:`;
  let idp: MockIdp;
  let a: TestApp;
  let b: TestApp;
  beforeAll(async () => {
    idp = await startMockIdp();
    const config = { externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }] };
    const database = testDatabases()[0] as never;
    a = await startTestApp(database, config, {
      cache: createRedisCache(redisUrl as string, { keyPrefix: prefix, log }),
    });
    b = await startTestApp(database, config, {
      db: a.db,
      cache: createRedisCache(redisUrl as string, { keyPrefix: prefix, log }),
    });
    const project = await a.newProject('Redis');
    const res = await a.request({
      method: 'POST',
      url: `/admin/projects/${project.projectId}/invite`,
      token: project.adminToken,
      headers: { 'content-type': 'application/json' },
      payload: { resourceType: 'Practitioner', firstName: 'Rae', lastName: 'Dis', externalId: 'redis|rae' },
    });
    expect(res.statusCode).toBe(200);
  });
  afterAll(async () => {
    const redis = new Redis(redisUrl as string);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await b?.close();
    await a?.close();
    await idp?.close();
  });

  it('calls the provider once for two instances and stores no token text', async () => {
    const token = await idp.token({ sub: 'redis|rae' });
    const before = idp.calls;
    expect((await a.request({ method: 'GET', url: '/oauth2/userinfo', token })).statusCode).toBe(200);
    expect((await b.request({ method: 'GET', url: '/oauth2/userinfo', token })).statusCode).toBe(200);
    expect(idp.calls).toBe(before + 1);
    const redis = new Redis(redisUrl as string);
    try {
      const keys = await redis.keys(`${prefix}*`);
      expect(keys.length).toBeGreaterThan(0);
      for (const k of keys) {
        expect(k).not.toContain(token);
        const value = (await redis.get(k)) ?? '';
        expect(value).not.toContain(token);
        expect(value).not.toContain(token.split('.')[2] as string);
      }
    } finally {
      await redis.quit();
    }
  });
});
