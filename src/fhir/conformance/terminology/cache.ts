// What terminology remembers between requests: compiled code systems by content identity, and expansions by the
// value set's identity in a project, each with the identities of everything it was computed from (the code systems
// and imported value sets). A hit is used only while every one of those still resolves to the same identity (a
// `stamp` query each, no content read), so a write to any input is seen at once, on every instance.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Resource } from '../../types.js';
import type { At, ConformanceResolver, ConformanceType } from '../model.js';
import { stampOf } from '../resolver.js';
import { buildCodeSystemIndex, type CodeSystemIndex } from './code-system-index.js';
import type { Code, CodeSet } from './expand.js';

/** Concepts the compiled code systems of this process hold at most, and codes its cached expansions hold at most. */
const MAX_CACHED_CONCEPTS = 2_000_000;
const MAX_CACHED_CODES = 2_000_000;

/** One input of an expansion: what a canonical resolved to (`none`: nothing). */
export interface Dependency {
  type: ConformanceType;
  canonical: string;
  stamp: string;
}

export interface CachedExpansion {
  codes: CodeSet;
  list: Code[];
  deps: Dependency[];
}

/** A resource given inline: identified by its content. */
export const contentStamp = (r: Resource): string =>
  `h:${createHash('sha256').update(JSON.stringify(r)).digest('base64url')}`;

export interface TerminologyCache {
  /** What a canonical resolves to now: its stamp (`none` when nothing), and the resource when it had to be read. */
  current(at: At, type: ConformanceType, canonical: string): Promise<{ stamp: string; resource?: Resource }>;
  /** A code system compiled once per stamp. */
  index(stamp: string, resource: Resource): CodeSystemIndex;
  compiled(stamp: string): CodeSystemIndex | undefined;
  /** A cached expansion whose inputs are all unchanged. */
  expansion(at: At, key: string): Promise<CachedExpansion | undefined>;
  remember(key: string, e: CachedExpansion): void;
}

export function createTerminologyCache(resolver: ConformanceResolver): TerminologyCache {
  const indexes = new LRUCache<string, CodeSystemIndex>({
    maxSize: MAX_CACHED_CONCEPTS,
    sizeCalculation: (i) => i.concepts.length + 1,
  });
  const expansions = new LRUCache<string, CachedExpansion>({
    maxSize: MAX_CACHED_CODES,
    sizeCalculation: (e) => e.list.length + e.deps.length + 1,
  });
  const current = async (
    at: At,
    type: ConformanceType,
    canonical: string,
  ): Promise<{ stamp: string; resource?: Resource }> => {
    if (resolver.stamp) return { stamp: (await resolver.stamp(at, type, canonical)) ?? 'none' };
    const resource = await resolver.resolve(at, type, canonical);
    return resource ? { stamp: stampOf(type, resource), resource } : { stamp: 'none' };
  };
  return {
    current,
    index(stamp, resource) {
      let i = indexes.get(stamp);
      if (!i) indexes.set(stamp, (i = buildCodeSystemIndex(resource)));
      return i;
    },
    compiled: (stamp) => indexes.get(stamp),
    async expansion(at, key) {
      const hit = expansions.get(key);
      if (!hit) return undefined;
      for (const d of hit.deps)
        if ((await current(at, d.type, d.canonical)).stamp !== d.stamp) return undefined;
      return hit;
    },
    remember: (key, e) => void expansions.set(key, e),
  };
}
