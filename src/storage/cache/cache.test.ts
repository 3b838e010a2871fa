import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { createMemoryCache, createRedisCache, openCache, type Cache, type CacheStore } from './index.js';

function fakeLog() {
  return {
    warn: vi.fn<(obj: object, msg: string) => void>(),
    info: vi.fn<(obj: object, msg: string) => void>(),
  };
}

async function waitFor(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('memory cache', () => {
  it('honours the TTL against the injected clock', async () => {
    let now = 1_000_000;
    const cache = createMemoryCache({ max: 10, clock: () => now });
    expect(cache.kind).toBe('memory');
    await cache.set('a', 'A', 1000);
    expect(await cache.get('a')).toBe('A');
    now += 999;
    expect(await cache.get('a')).toBe('A');
    now += 1;
    expect(await cache.get('a')).toBeUndefined();
    expect(await cache.get('missing')).toBeUndefined();
  });

  it('a TTL of zero or less stores nothing and removes an existing entry', async () => {
    const cache = createMemoryCache({ max: 10 });
    await cache.set('a', 'A', 60_000);
    await cache.set('a', 'B', 0);
    expect(await cache.get('a')).toBeUndefined();
    await cache.set('b', 'B', -5);
    expect(await cache.get('b')).toBeUndefined();
  });

  it('deletes', async () => {
    const cache = createMemoryCache({ max: 10 });
    await cache.set('a', 'A', 60_000);
    await cache.delete('a');
    expect(await cache.get('a')).toBeUndefined();
    await cache.delete('never-set');
  });

  it('is bounded: the least recently used entry is evicted', async () => {
    const cache = createMemoryCache({ max: 3 });
    await cache.set('a', 'A', 60_000);
    await cache.set('b', 'B', 60_000);
    await cache.set('c', 'C', 60_000);
    expect(await cache.get('a')).toBe('A'); // a is now the most recently used
    await cache.set('d', 'D', 60_000);
    expect(await cache.get('b')).toBeUndefined();
    expect(await cache.get('a')).toBe('A');
    expect(await cache.get('c')).toBe('C');
    expect(await cache.get('d')).toBe('D');
  });

  it('counts within a fixed window that starts at the first increment', async () => {
    let now = 1_000_000;
    const cache = createMemoryCache({ max: 10, clock: () => now });
    expect(await cache.peek('c')).toEqual({ count: 0, ttlMs: 0 });
    expect(await cache.increment('c', 1000)).toEqual({ count: 1, ttlMs: 1000 });
    now += 400;
    expect(await cache.increment('c', 1000)).toEqual({ count: 2, ttlMs: 600 });
    expect(await cache.peek('c')).toEqual({ count: 2, ttlMs: 600 });
    now += 600;
    expect(await cache.peek('c')).toEqual({ count: 0, ttlMs: 0 });
    expect(await cache.increment('c', 1000)).toEqual({ count: 1, ttlMs: 1000 });
    await cache.reset('c');
    expect(await cache.peek('c')).toEqual({ count: 0, ttlMs: 0 });
    expect(await cache.health()).toBe('ok');
  });

  it('openCache without a Redis URL opens a memory cache', async () => {
    const cache = openCache({ log: fakeLog() });
    expect(cache.kind).toBe('memory');
    await cache.close();
  });
});

describe('Redis cache fallback when Redis is unreachable', () => {
  it('serves calls from memory and logs exactly one warning', async () => {
    const log = fakeLog();
    const cache = createRedisCache('redis://127.0.0.1:1', {
      keyPrefix: `t:${randomUUID()}:`,
      log,
      timeoutMs: 500,
    });
    try {
      expect(cache.kind).toBe('redis');
      expect(await cache.health()).toBe('unreachable');
      expect(await cache.increment('n', 60_000)).toEqual({ count: 1, ttlMs: 60_000 });
      await cache.set('a', 'A', 60_000);
      expect(await cache.get('a')).toBe('A');
      await cache.set('b', 'B', 60_000);
      await cache.delete('b');
      expect(await cache.get('b')).toBeUndefined();
      for (let i = 0; i < 20; i++) expect(await cache.get('a')).toBe('A');
      // Reconnection attempts keep failing in the background; still one warning for the whole outage.
      await new Promise((r) => setTimeout(r, 700));
      expect(await cache.get('a')).toBe('A');
      expect(log.warn).toHaveBeenCalledTimes(1);
      expect(log.info).not.toHaveBeenCalled();
      expect(JSON.stringify(log.warn.mock.calls)).not.toMatch(/"A"|"B"/);
    } finally {
      await cache.close();
    }
  });
});

// These tests need a real Redis server; they run only when TEST_REDIS_URL is set
// (e.g. TEST_REDIS_URL=redis://127.0.0.1:6379 npx vitest run src/storage/cache).
describe.skipIf(!process.env.TEST_REDIS_URL)('Redis cache against a real Redis', () => {
  const url = process.env.TEST_REDIS_URL ?? '';
  const prefix = `cinder-test:cache:${randomUUID()}:`;
  const caches: Cache[] = [];
  let raw: Redis | undefined;

  function rawClient(): Redis {
    raw ??= new Redis(url, { lazyConnect: false });
    return raw;
  }

  function open(log = fakeLog(), redisUrl = url): CacheStore {
    const cache = createRedisCache(redisUrl, { keyPrefix: prefix, log });
    caches.push(cache);
    return cache;
  }

  afterAll(async () => {
    for (const c of caches) await c.close();
    const r = rawClient();
    const keys = await r.keys(`${prefix}*`);
    if (keys.length > 0) await r.del(...keys);
    expect(await r.keys(`${prefix}*`)).toEqual([]);
    await r.quit();
  });

  it('sets, gets, expires (PX) and deletes, under the key prefix', async () => {
    const log = fakeLog();
    const cache = open(log);
    await cache.set('k1', 'v1', 60_000);
    expect(await cache.get('k1')).toBe('v1');
    const pttl = await rawClient().pttl(`${prefix}k1`);
    expect(pttl).toBeGreaterThan(59_000);
    expect(pttl).toBeLessThanOrEqual(60_000);
    await cache.delete('k1');
    expect(await cache.get('k1')).toBeUndefined();
    expect(await rawClient().exists(`${prefix}k1`)).toBe(0);

    await cache.set('short', 'v', 50);
    await new Promise((r) => setTimeout(r, 120));
    expect(await cache.get('short')).toBeUndefined();
    expect(log.warn).not.toHaveBeenCalled();
  });

  it('counts in Redis under the key prefix, shared by instances, with the window as expiry', async () => {
    const a = open();
    const b = open();
    expect(await a.health()).toBe('ok');
    expect(await a.increment('n', 60_000)).toMatchObject({ count: 1 });
    const second = await b.increment('n', 60_000);
    expect(second.count).toBe(2);
    expect(second.ttlMs).toBeGreaterThan(59_000);
    expect(await a.peek('n')).toMatchObject({ count: 2 });
    expect(await rawClient().get(`${prefix}n`)).toBe('2');
    const pttl = await rawClient().pttl(`${prefix}n`);
    expect(pttl).toBeGreaterThan(59_000);
    await b.reset('n');
    expect(await a.peek('n')).toEqual({ count: 0, ttlMs: 0 });
  });

  it('shares entries between two instances', async () => {
    const a = open();
    const b = open();
    await a.set('shared', 'S', 60_000);
    expect(await b.get('shared')).toBe('S');
    await b.delete('shared');
    expect(await a.get('shared')).toBeUndefined();
  });

  it('openCache with a Redis URL opens a Redis cache', async () => {
    const cache = openCache({ redisUrl: url, log: fakeLog(), keyPrefix: prefix });
    caches.push(cache);
    expect(cache.kind).toBe('redis');
    await cache.set('oc', '1', 60_000);
    expect(await rawClient().get(`${prefix}oc`)).toBe('1');
  });

  it('falls back during an outage, warns once, logs recovery and replays deletes', async () => {
    // A TCP proxy in front of the real Redis, so the test can cut and restore the connection.
    const target = new URL(url);
    const sockets = new Set<net.Socket>();
    const startProxy = (port: number) =>
      new Promise<net.Server>((resolve) => {
        const server = net.createServer((client) => {
          const upstream = net.connect(Number(target.port || 6379), target.hostname);
          sockets.add(client).add(upstream);
          client.pipe(upstream).pipe(client);
          const end = () => {
            client.destroy();
            upstream.destroy();
          };
          client.on('error', end).on('close', end);
          upstream.on('error', end).on('close', end);
        });
        server.listen(port, '127.0.0.1', () => resolve(server));
      });
    const stopProxy = (server: net.Server) =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        sockets.clear();
        server.close(() => resolve());
      });

    let proxy = await startProxy(0);
    const port = (proxy.address() as net.AddressInfo).port;
    const proxied = new URL(url);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(port);
    const log = fakeLog();
    const cache = open(log, proxied.toString());
    try {
      await cache.set('before', 'B', 60_000);
      expect(await cache.get('before')).toBe('B');

      await stopProxy(proxy);
      await waitFor(() => log.warn.mock.calls.length > 0);
      await cache.set('during', 'D', 60_000);
      expect(await cache.get('during')).toBe('D'); // from memory
      await cache.delete('before'); // remembered, replayed on recovery
      for (let i = 0; i < 10; i++) await cache.get('during');
      expect(log.warn).toHaveBeenCalledTimes(1);
      expect(log.info).not.toHaveBeenCalled();

      proxy = await startProxy(port);
      await waitFor(() => log.info.mock.calls.length > 0);
      expect(await cache.get('before')).toBeUndefined();
      expect(await rawClient().exists(`${prefix}before`)).toBe(0);
      await cache.set('after', 'A', 60_000);
      expect(await rawClient().get(`${prefix}after`)).toBe('A');
      expect(log.warn).toHaveBeenCalledTimes(1);
      expect(log.info).toHaveBeenCalledTimes(1);
      expect(JSON.stringify([log.warn.mock.calls, log.info.mock.calls])).not.toMatch(/before|during|after/);
    } finally {
      await cache.close();
      await stopProxy(proxy);
    }
  });
});
