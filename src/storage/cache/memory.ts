// In-process cache: bounded LRU (lru-cache) with per-entry expiry checked against an injectable clock.
import { LRUCache } from 'lru-cache';
import type { CacheStore, CounterValue } from './cache.js';

export interface MemoryCacheOptions {
  /** Largest number of entries kept; the least recently used entry is evicted beyond it. */
  max: number;
  /** Milliseconds since the epoch; defaults to Date.now. Injectable so tests can move time. */
  clock?: () => number;
}

interface Entry {
  value: string;
  expiresAt: number;
}

export function createMemoryCache(opts: MemoryCacheOptions): CacheStore {
  if (!Number.isInteger(opts.max) || opts.max < 1)
    throw new RangeError('memory cache max must be a positive integer');
  const now = opts.clock ?? Date.now;
  // Expiry is kept in the entry (not lru-cache's own ttl) so it is measured against the injected clock.
  const lru = new LRUCache<string, Entry>({ max: opts.max });
  return {
    kind: 'memory',
    async get(key) {
      const entry = lru.get(key);
      if (entry === undefined) return undefined;
      if (entry.expiresAt <= now()) {
        lru.delete(key);
        return undefined;
      }
      return entry.value;
    },
    async set(key, value, ttlMs) {
      if (!(ttlMs > 0)) {
        lru.delete(key);
        return;
      }
      lru.set(key, { value, expiresAt: now() + ttlMs });
    },
    async delete(key) {
      lru.delete(key);
    },
    async health() {
      return 'ok';
    },
    async increment(key, windowMs) {
      const t = now();
      const entry = lru.get(key);
      if (entry === undefined || entry.expiresAt <= t) {
        lru.set(key, { value: '1', expiresAt: t + windowMs });
        return { count: 1, ttlMs: windowMs };
      }
      const count = Number(entry.value) + 1;
      entry.value = String(count);
      return { count, ttlMs: entry.expiresAt - t };
    },
    async peek(key): Promise<CounterValue> {
      const t = now();
      const entry = lru.get(key);
      if (entry === undefined || entry.expiresAt <= t) return { count: 0, ttlMs: 0 };
      return { count: Number(entry.value), ttlMs: entry.expiresAt - t };
    },
    async reset(key) {
      lru.delete(key);
    },
    async close() {
      lru.clear();
    },
  };
}
