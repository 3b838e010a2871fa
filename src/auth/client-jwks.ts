// A ClientApplication's public keys at its `jwksUri` (a JWK Set, RFC 7517 §5; SMART client-confidential-asymmetric,
// https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html): fetched only through outbound.ts (the
// tenant's URL rule, deadline, size cap), kept for a few minutes, and fetched again early when an assertion names a
// key id the copy lacks (the client rotated its keys) — but at most once per cooldown for each URL, so that assertions
// with made-up key ids cannot make the server hammer the client's host. The copy is per process: key sets are public,
// and N instances fetch at most N times per cooldown.
import type { JSONWebKeySet } from 'jose';
import { LRUCache } from 'lru-cache';
import { outboundGet, OutboundError, type OutboundPolicy } from './outbound.js';

export interface ClientKeySetOptions {
  policy: OutboundPolicy;
  /** Milliseconds since the epoch (the app's clock). */
  now: () => number;
  /** How long a fetched set is used (default 5 minutes). */
  ttlMs?: number;
  /** The least time between two fetches of one URL, whatever the reason (default 30 s). */
  cooldownMs?: number;
  timeoutMs?: number;
  maxBytes?: number;
}

/** Why no key set could be had: for the operator's log only. */
export class KeySetError extends Error {
  constructor(readonly reason: string) {
    super(`JWK Set unavailable: ${reason}`);
    this.name = 'KeySetError';
  }
}

export interface ClientKeySets {
  /**
   * The key set at `url`. With `wantKid`, a cached set that lacks that key id is fetched again when the cooldown
   * allows; otherwise the cached set is answered as it is (and the caller's verification fails).
   */
  get(url: string, wantKid?: string): Promise<JSONWebKeySet>;
}

interface Entry {
  keys?: JSONWebKeySet;
  /** When `keys` were fetched. */
  fetchedAt: number;
  /** When a fetch was last tried, successful or not. */
  triedAt: number;
}

function parseKeySet(body: string): JSONWebKeySet {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    throw new KeySetError('not JSON');
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(keys) || !keys.every((k) => typeof k === 'object' && k !== null && !Array.isArray(k))) {
    throw new KeySetError('no keys array');
  }
  return { keys } as JSONWebKeySet;
}

export function createClientKeySets(opts: ClientKeySetOptions): ClientKeySets {
  const ttl = opts.ttlMs ?? 5 * 60_000;
  const cooldown = opts.cooldownMs ?? 30_000;
  const entries = new LRUCache<string, Entry>({ max: 1000 });
  // One fetch per URL at a time: concurrent assertions wait for the same answer.
  const inFlight = new Map<string, Promise<JSONWebKeySet>>();

  async function fetchSet(url: string, previous: Entry | undefined): Promise<JSONWebKeySet> {
    const started = opts.now();
    entries.set(url, { ...(previous ?? { fetchedAt: 0 }), triedAt: started });
    let res;
    try {
      res = await outboundGet(url, opts.policy, {
        headers: { Accept: 'application/json, application/jwk-set+json' },
        timeoutMs: opts.timeoutMs ?? 5000,
        maxBytes: opts.maxBytes ?? 256 * 1024,
      });
    } catch (err) {
      if (err instanceof OutboundError)
        throw new KeySetError(`fetch ${err.reason}${err.code ? ` ${err.code}` : ''}`);
      throw err;
    }
    if (res.status !== 200) throw new KeySetError(`answered ${res.status}`);
    const keys = parseKeySet(res.body);
    entries.set(url, { keys, fetchedAt: started, triedAt: started });
    return keys;
  }

  return {
    async get(url, wantKid) {
      const entry = entries.get(url);
      const now = opts.now();
      const fresh = entry?.keys !== undefined && now - entry.fetchedAt < ttl;
      const lacksKid = wantKid !== undefined && !entry?.keys?.keys.some((k) => k.kid === wantKid);
      if (entry?.keys && fresh && !lacksKid) return entry.keys;
      if (entry && now - entry.triedAt < cooldown) {
        // Too soon to ask the client's host again: a stale set is better than none until the cooldown ends.
        if (entry.keys) return entry.keys;
        throw new KeySetError('fetched recently without success');
      }
      let pending = inFlight.get(url);
      if (!pending) {
        pending = fetchSet(url, entry).finally(() => inFlight.delete(url));
        inFlight.set(url, pending);
      }
      return pending;
    },
  };
}
