// Principals by login id, kept briefly in each process so that a request costs no extra query for its login.
// Any change to what a principal is made of (memberships, projects, clients, users, logins) clears every
// instance's cache through the `auth-changed` signal, so a revoked login or removed membership stops working at once;
// entries live 5 s at most, so changes made outside the HTTP API take effect within seconds too.
import { LRUCache } from 'lru-cache';
import type { Signals } from '../storage/signals.js';
import type { Principal } from './principal.js';

export const AUTH_CHANGED = 'auth-changed';
/** Resource types whose writes change principals. */
export const AUTH_TYPES = new Set(['ProjectMembership', 'Project', 'ClientApplication', 'User', 'Login']);

/** What /oauth2/userinfo answered for an external token: reused (with its service token) until it expires. */
export interface IssuedUserinfo {
  body: Record<string, unknown>;
  accessToken?: string;
  exp?: number;
}

export interface PrincipalCache {
  get(loginId: string): Principal | undefined;
  set(loginId: string, p: Principal): void;
  getIssued(key: string): IssuedUserinfo | undefined;
  setIssued(key: string, v: IssuedUserinfo): void;
  /** Clears this instance now and tells the others. */
  changed(): Promise<void>;
}

export function createPrincipalCache(
  signals: Signals,
  opts: { ttlMs?: number; max?: number } = {},
): PrincipalCache {
  // The signal is the fast path; the short lifetime bounds what it cannot see (a restore, a job deleting a project,
  // a signal connection being re-established): a deleted or deactivated login ends within seconds regardless.
  const lru = new LRUCache<string, Principal>({ max: opts.max ?? 10_000, ttl: opts.ttlMs ?? 5_000 });
  // Service tokens minted for external tokens stay in this process's memory only, never in a shared cache store.
  const issued = new LRUCache<string, IssuedUserinfo>({ max: opts.max ?? 10_000, ttl: opts.ttlMs ?? 30_000 });
  signals.subscribe(AUTH_CHANGED, () => {
    lru.clear();
    issued.clear();
  });
  return {
    get: (id) => lru.get(id),
    set: (id, p) => void lru.set(id, p),
    getIssued: (key) => issued.get(key),
    setIssued: (key, v) => void issued.set(key, v),
    async changed() {
      lru.clear();
      issued.clear();
      await signals.publish(AUTH_CHANGED, '*');
    },
  };
}
