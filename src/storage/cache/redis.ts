// Redis-backed cache shared by every instance. Commands fail fast (no offline queue, short timeouts); when
// Redis is down or a command fails, that call is served by an in-process memory cache instead, with one
// warning per outage and one info line on recovery. Keys and values are never logged.
import { Redis } from 'ioredis';
import type { CacheLogger, CacheStore, CounterValue } from './cache.js';
import { createMemoryCache } from './memory.js';

export interface RedisCacheOptions {
  /** Prepended to every key in Redis (e.g. 'cinder:'). */
  keyPrefix: string;
  log: CacheLogger;
  /** Entries kept by the in-process fallback during an outage (default 10 000). */
  fallbackMax?: number;
  /** Connect and command timeout in milliseconds (default 2000). */
  timeoutMs?: number;
}

// A fixed window: the first increment starts it (a key left without expiry by an interrupted script gets one).
const INCREMENT = `local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {c, ttl}`;

/** Deletes made during an outage are replayed on recovery; at most this many are remembered. */
const MAX_PENDING_DELETES = 10_000;

function describe(err: unknown): { message: string; code?: string } {
  // Only message and code: ioredis attaches the failed command (with its keys and values) to its errors.
  if (err instanceof Error) {
    const code = (err as { code?: unknown }).code;
    return typeof code === 'string' ? { message: err.message, code } : { message: err.message };
  }
  return { message: String(err) };
}

export function createRedisCache(url: string, opts: RedisCacheOptions): CacheStore {
  const { log } = opts;
  const timeoutMs = opts.timeoutMs ?? 2000;
  const fallback = createMemoryCache({ max: opts.fallbackMax ?? 10_000 });
  const pendingDeletes = new Set<string>();
  let down = false;
  let closed = false;

  const client = new Redis(url, {
    keyPrefix: opts.keyPrefix,
    lazyConnect: false,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
    retryStrategy: (times) => Math.min(times * 200, 5000),
  });

  // Commands issued before the first connection attempt has finished wait for it (bounded), so that a
  // healthy Redis is not reported as down just because the process has only just started.
  let firstAttemptDone!: () => void;
  const firstAttempt = new Promise<void>((resolve) => (firstAttemptDone = resolve));
  const firstAttemptTimer = setTimeout(() => firstAttemptDone(), timeoutMs + 500);
  firstAttemptTimer.unref();

  function markDown(err: unknown): void {
    if (down || closed) return;
    down = true;
    log.warn(
      { err: describe(err) },
      'Redis cache unavailable; using an in-process memory cache until it recovers',
    );
  }

  function markUp(): void {
    if (!down || closed) return;
    down = false;
    log.info?.({}, 'Redis cache available again');
    // Entries written during the outage are not read any more; deletes made during it are replayed.
    void fallback.close();
    const keys = [...pendingDeletes];
    pendingDeletes.clear();
    if (keys.length > 0) client.del(...keys).catch(() => undefined);
  }

  client.on('ready', () => {
    firstAttemptDone();
    markUp();
  });
  client.on('error', (err: unknown) => {
    // A listener is required: without one ioredis prints every connection error to the console.
    firstAttemptDone();
    markDown(err);
  });
  client.on('end', () => firstAttemptDone());

  async function run<T>(op: () => Promise<T>, fb: () => Promise<T>): Promise<T> {
    if (closed) return fb();
    await firstAttempt;
    if (client.status !== 'ready') {
      markDown(new Error(`Redis connection is ${client.status}`));
      return fb();
    }
    try {
      const result = await op();
      markUp();
      return result;
    } catch (err) {
      markDown(err);
      return fb();
    }
  }

  async function del(key: string): Promise<void> {
    await fallback.delete(key);
    await run(
      async () => {
        await client.del(key);
      },
      async () => {
        if (pendingDeletes.size >= MAX_PENDING_DELETES) {
          const oldest = pendingDeletes.values().next();
          if (!oldest.done) pendingDeletes.delete(oldest.value);
        }
        pendingDeletes.add(key);
      },
    );
  }

  return {
    kind: 'redis',
    async get(key) {
      return run(
        async () => (await client.get(key)) ?? undefined,
        () => fallback.get(key),
      );
    },
    async set(key, value, ttlMs) {
      if (!(ttlMs > 0)) return del(key);
      const px = Math.max(1, Math.ceil(ttlMs));
      await run(
        async () => {
          await client.set(key, value, 'PX', px);
        },
        () => fallback.set(key, value, px),
      );
    },
    delete: del,
    async health() {
      if (!closed) await firstAttempt;
      if (closed || client.status !== 'ready') return 'unreachable';
      try {
        await client.ping();
        return 'ok';
      } catch {
        return 'unreachable';
      }
    },
    async increment(key, windowMs): Promise<CounterValue> {
      const ms = Math.max(1, Math.ceil(windowMs));
      return run(
        async () => {
          const [count, ttlMs] = (await client.eval(INCREMENT, 1, key, ms)) as [number, number];
          return { count, ttlMs };
        },
        () => fallback.increment(key, ms),
      );
    },
    async peek(key): Promise<CounterValue> {
      return run(
        async () => {
          const r = await client.multi().get(key).pttl(key).exec();
          const count = Number(r?.[0]?.[1] ?? 0);
          const ttlMs = Number(r?.[1]?.[1] ?? 0);
          return count > 0 && ttlMs > 0 ? { count, ttlMs } : { count: 0, ttlMs: 0 };
        },
        () => fallback.peek(key),
      );
    },
    reset: del,
    async close() {
      if (closed) return;
      closed = true;
      clearTimeout(firstAttemptTimer);
      firstAttemptDone();
      if (client.status === 'ready') {
        await client.quit().catch(() => client.disconnect());
      } else {
        client.disconnect();
      }
      await fallback.close();
    },
  };
}
