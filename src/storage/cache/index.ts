// Opens the configured cache: Redis when a URL is configured (shared by every instance), else in-process.
import type { CacheLogger, CacheStore } from './cache.js';
import { createMemoryCache } from './memory.js';
import { createRedisCache } from './redis.js';

export type { Cache, CacheLogger, CacheStore, CounterValue, Counters } from './cache.js';
export { createMemoryCache, type MemoryCacheOptions } from './memory.js';
export { createRedisCache, type RedisCacheOptions } from './redis.js';

export interface OpenCacheOptions {
  redisUrl?: string;
  log: CacheLogger;
  /** Entries kept by the memory cache (and by the Redis fallback); default 10 000. */
  memoryMax?: number;
  /** Prefix of every Redis key; default 'cinder:'. */
  keyPrefix?: string;
  /** Redis connect and command timeout in milliseconds (default 2000). */
  timeoutMs?: number;
}

export function openCache(opts: OpenCacheOptions): CacheStore {
  const max = opts.memoryMax ?? 10_000;
  if (opts.redisUrl) {
    return createRedisCache(opts.redisUrl, {
      keyPrefix: opts.keyPrefix ?? 'cinder:',
      log: opts.log,
      fallbackMax: max,
      ...(opts.timeoutMs !== undefined ? { timeoutMs: opts.timeoutMs } : {}),
    });
  }
  return createMemoryCache({ max });
}
