// What terminology remembers between requests: compiled code systems by content identity, and expansions by the
// value set's identity in a project, each with the identities of everything it was computed from (the code systems
// and imported value sets). A hit is used only while every one of those still has the same stamp (resolver.ts: a
// query on the rows' small columns, no content read), so a write to any input is seen at once, on every instance.
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

/** What a stamp that resolves to no code system is remembered as. */
const MISSING = { missing: true } as const;

/** A resource given inline: identified by its content. */
export const contentStamp = (r: Resource): string =>
  `h:${createHash('sha256').update(JSON.stringify(r)).digest('base64url')}`;

export interface TerminologyCache {
  /** The stamp of what a canonical resolves to now, and the resource when it had to be read to know. */
  current(at: At, type: ConformanceType, canonical: string): Promise<{ stamp: string; resource?: Resource }>;
  /** A code system compiled once per stamp (`null`: the stamp resolves to nothing). */
  index(stamp: string, resource: Resource | undefined): CodeSystemIndex | null;
  /** The code system compiled for a stamp (`null`: nothing resolves), or undefined when not known yet. */
  compiled(stamp: string): CodeSystemIndex | null | undefined;
  /** A cached expansion whose inputs are all unchanged. */
  expansion(at: At, key: string): Promise<CachedExpansion | undefined>;
  remember(key: string, e: CachedExpansion): void;
}

export function createTerminologyCache(resolver: ConformanceResolver): TerminologyCache {
  const indexes = new LRUCache<string, CodeSystemIndex | typeof MISSING>({
    maxSize: MAX_CACHED_CONCEPTS,
    sizeCalculation: (i) => ('concepts' in i ? i.concepts.length : 0) + 1,
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
    if (resolver.stamp) return { stamp: await resolver.stamp(at, type, canonical) };
    const resource = await resolver.resolve(at, type, canonical);
    return resource
      ? { stamp: stampOf(type, resource), resource }
      : { stamp: `none|${at.projectId ?? ''}|${type}|${canonical}` };
  };
  return {
    current,
    index(stamp, resource) {
      let i = indexes.get(stamp);
      if (!i) indexes.set(stamp, (i = resource ? buildCodeSystemIndex(resource) : MISSING));
      return 'concepts' in i ? i : null;
    },
    compiled(stamp) {
      const i = indexes.get(stamp);
      return i === undefined ? undefined : 'concepts' in i ? i : null;
    },
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
