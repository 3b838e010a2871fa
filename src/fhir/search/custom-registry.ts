// Each project's custom search parameters (its active SearchParameters, and the shared packages' that are not built
// in), compiled once and kept in memory, as subscriptions/registry.ts keeps subscriptions: dropped when the project
// writes a SearchParameter (on every instance, through the signals) and after MAX_AGE_MS whatever happens, as a
// safety net for a signal lost with its connection. API.md §9 "Search".
import { LRUCache } from 'lru-cache';
import type { Queryable } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import type { SharedSet } from '../conformance/model.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import {
  CUSTOM_TYPES,
  isActive,
  paramSet,
  readSearchParameter,
  type CustomParam,
  type ParamSet,
} from './custom-params.js';
import { isResourceType, resourceTypes, searchParamsOf } from './registry.js';
import { isSharedIndex } from '../conformance/shared-set.js';

export const SEARCH_PARAMETERS_CHANNEL = 'search-parameters';
const MAX_AGE_MS = 30_000;
/**
 * Projects whose parameters are kept: the least recently used beyond this are dropped (and loaded again when
 * searched), so that a server with many projects does not keep one entry for every project ever searched.
 */
export const MAX_CACHED_PROJECTS = 10_000;
/** Active SearchParameters a project may hold (each runs on every write of its bases). */
export const MAX_PROJECT_SEARCH_PARAMETERS = 500;

export interface SearchParamRegistry {
  /** The custom parameters of a project (`db`: the caller's transaction when it has one). */
  forProject(db: Queryable, projectId: string): Promise<ParamSet>;
  /** The shared packages' parameters that are not built in (every project has them). */
  shared(): Promise<readonly CustomParam[]>;
  /** Forget what is known of a project (`*`: of all), here and on every other instance. */
  changed(projectId: string): Promise<void>;
}

type Warn = (obj: unknown, msg: string) => void;

let builtInUrls: Set<string> | undefined;

/** The canonical URLs of the built-in parameters (the R4 base's among them). */
function builtIn(): Set<string> {
  if (builtInUrls) return builtInUrls;
  const urls = new Set<string>();
  for (const t of resourceTypes()) for (const p of searchParamsOf(t)) if (p.url) urls.add(p.url);
  return (builtInUrls = urls);
}

/**
 * The shared SearchParameters that become parameters: active, of resource types, of an indexed type, with an
 * expression, and not built in (by url, or by code on a base).
 */
export function sharedParams(shared: SharedSet | undefined, warn: Warn): CustomParam[] {
  const out: CustomParam[] = [];
  for (const sp of shared?.all('SearchParameter') ?? []) {
    if (!isActive(sp) || typeof sp.url !== 'string' || builtIn().has(sp.url)) continue;
    if (typeof sp.type !== 'string' || !CUSTOM_TYPES.has(sp.type) || typeof sp.expression !== 'string')
      continue;
    const bases = Array.isArray(sp.base)
      ? (sp.base as unknown[]).filter((b) => typeof b === 'string' && isResourceType(b))
      : [];
    if (bases.length === 0) continue;
    try {
      const params = readSearchParameter({ ...sp, base: bases }, false);
      out.push(...params.filter((p) => !searchParamsOf(p.base).some((b) => b.code === p.code)));
    } catch (err) {
      warn({ url: sp.url, err: (err as Error).message }, 'shared SearchParameter cannot be indexed; skipped');
    }
  }
  return out;
}

/** The project's active SearchParameters, oldest first; one that no longer compiles is skipped (and logged). */
export async function loadProjectParams(
  db: Queryable,
  projectId: string,
  warn: Warn,
): Promise<CustomParam[]> {
  const r = await db.query<{ json: string }>(
    `SELECT content::text AS json FROM resources
     WHERE resource_type = 'SearchParameter' AND project_id = $1 AND NOT deleted AND content->>'status' = 'active'
     ORDER BY rid LIMIT ${MAX_PROJECT_SEARCH_PARAMETERS}`,
    [projectId],
  );
  const out: CustomParam[] = [];
  for (const row of r.rows) {
    const sp = parseJson(row.json) as Resource;
    try {
      out.push(...readSearchParameter(sp));
    } catch (err) {
      warn(
        { projectId, id: sp.id, err: (err as Error).message },
        'SearchParameter cannot be indexed; skipped',
      );
    }
  }
  return out;
}

interface Entry {
  loadedAt: number;
  set: ParamSet;
}

export function createSearchParamRegistry(deps: {
  signals: Signals;
  shared?: SharedSet;
  log?: { warn(obj: unknown, msg: string): void };
  /** MAX_CACHED_PROJECTS unless given (tests). */
  maxProjects?: number;
}): SearchParamRegistry {
  const projects = new LRUCache<string, Promise<Entry>>({ max: deps.maxProjects ?? MAX_CACHED_PROJECTS });
  const warn: Warn = (obj, msg) => deps.log?.warn(obj, msg);
  let shared: Promise<CustomParam[]> | undefined;
  // The shared set loads giving way to other work (its own ready()), once; then its parameters are read.
  const sharedList = (): Promise<CustomParam[]> =>
    (shared ??= (async () => {
      const set = deps.shared;
      if (set && isSharedIndex(set)) await set.ready();
      return sharedParams(set, warn);
    })());
  const forget = (projectId: string): void => {
    if (projectId === '*') projects.clear();
    else projects.delete(projectId);
  };
  deps.signals.subscribe(SEARCH_PARAMETERS_CHANNEL, (payload) => {
    if (payload === '*') forget('*');
    else if (payload.startsWith('changed ')) forget(payload.slice(8));
  });
  const load = async (db: Queryable, projectId: string): Promise<Entry> => {
    const own = await loadProjectParams(db, projectId, warn);
    return { loadedAt: Date.now(), set: paramSet([...(await sharedList()), ...own]) };
  };
  return {
    async forProject(db, projectId) {
      const known = projects.get(projectId);
      if (known) {
        const e = await known.catch(() => undefined);
        if (e && Date.now() - e.loadedAt < MAX_AGE_MS) return e.set;
        if (projects.get(projectId) === known) projects.delete(projectId);
      }
      let loading = projects.get(projectId);
      if (!loading) {
        loading = load(db, projectId);
        projects.set(projectId, loading);
        loading.catch(() => {
          if (projects.get(projectId) === loading) projects.delete(projectId);
        });
      }
      return (await loading).set;
    },
    shared: sharedList,
    async changed(projectId) {
      forget(projectId);
      await deps.signals.publish(SEARCH_PARAMETERS_CHANNEL, `changed ${projectId}`).catch(() => undefined);
    },
  };
}
