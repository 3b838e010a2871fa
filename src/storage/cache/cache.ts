// A small string key/value cache with per-entry TTL, shared by features that must not repeat expensive work
// (e.g. external token validation, API.md §4). Values are opaque strings: callers JSON-encode and namespace
// their keys. Implementations: in-process LRU (memory.ts) and Redis with an in-process fallback (redis.ts).

export interface Cache {
  readonly kind: 'memory' | 'redis';
  /** The value, or undefined when absent or expired. */
  get(key: string): Promise<string | undefined>;
  /** Stores the value for ttlMs milliseconds; a ttlMs ≤ 0 removes the key instead. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  delete(key: string): Promise<void>;
  /** Whether the backing store answers now ('unreachable' while Redis is down); absent means always 'ok'. */
  health?(): Promise<'ok' | 'unreachable'>;
  close(): Promise<void>;
}

/** A counter within a fixed window: its value and the milliseconds left until the window ends. */
export interface CounterValue {
  count: number;
  ttlMs: number;
}

/**
 * Fixed-window counters (rate limits), kept beside the cache entries and shared by every instance with Redis.
 * The window starts at the first increment and the counter vanishes when it ends.
 */
export interface Counters {
  increment(key: string, windowMs: number): Promise<CounterValue>;
  /** The counter without changing it ({count: 0, ttlMs: 0} when absent). */
  peek(key: string): Promise<CounterValue>;
  reset(key: string): Promise<void>;
}

/** The subset of a pino logger the caches use. Keys and values are never logged. */
export interface CacheLogger {
  warn(obj: object, msg: string): void;
  info?(obj: object, msg: string): void;
}

/** What memory.ts and redis.ts implement: a cache, counters, and a health check. */
export type CacheStore = Cache & Counters & { health(): Promise<'ok' | 'unreachable'> };
