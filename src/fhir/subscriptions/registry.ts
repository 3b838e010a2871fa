// Each project's subscriptions that are not `off`, compiled once and kept in memory (API.md §8), so that a write is
// matched by type with a map lookup: most writes concern no subscription and pay nothing more. Dropped when a
// Subscription or SubscriptionTopic of the project is written (on every instance, through the signals), and after
// MAX_AGE_MS whatever happens, as a safety net for a signal lost with its connection.
import { LRUCache } from 'lru-cache';
import type { Queryable } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import { compileCriteria } from './match-search.js';
import type { ActiveSubscription, CompiledCriteria, SubscriptionAuthor, WriteChange } from './model.js';
import { readSubscription } from './subscription-resource.js';
import { compileTopic } from './topic.js';
import { compileFilters } from './topic-filters.js';

export const SUBSCRIPTIONS_CHANNEL = 'subscriptions';
const MAX_AGE_MS = 30_000;
/**
 * Projects whose subscriptions are kept: the least recently used beyond this are dropped (and loaded again when
 * written to), so that a server with many projects does not keep one entry for every project ever written to.
 */
export const MAX_CACHED_PROJECTS = 10_000;

/** A topic-based subscription also carries its compiled topic. */
export interface RegisteredSubscription extends ActiveSubscription {
  triggers?: (change: WriteChange) => boolean;
}

interface ProjectEntry {
  loadedAt: number;
  byType: Map<string, RegisteredSubscription[]>;
}

export interface SubscriptionRegistry {
  /** The project's subscriptions that a change of `resourceType` may concern. */
  candidates(
    db: Queryable,
    projectId: string,
    resourceType: string,
  ): Promise<readonly RegisteredSubscription[]>;
  /** Forget what is known of a project (`*`: of all), here and on every other instance. */
  changed(projectId: string): Promise<void>;
}

export const compileFor = (query: string, resourceType: string): CompiledCriteria =>
  compileCriteria(query, { resourceType });

interface Row {
  id: string;
  version_id: number;
  json: string;
  author: SubscriptionAuthor | null;
}

/** The project's topics by canonical URL (`url|version` resolves to that version, a bare URL to the newest). */
async function loadTopics(db: Queryable, projectId: string): Promise<Map<string, Resource>> {
  const r = await db.query<{ json: string }>(
    `SELECT content::text AS json FROM resources
     WHERE resource_type = 'SubscriptionTopic' AND project_id = $1 AND NOT deleted ORDER BY last_updated`,
    [projectId],
  );
  const out = new Map<string, Resource>();
  for (const row of r.rows) {
    const topic = parseJson(row.json) as Resource;
    if (typeof topic.url !== 'string') continue;
    out.set(topic.url, topic);
    if (typeof topic.version === 'string') out.set(`${topic.url}|${topic.version}`, topic);
  }
  return out;
}

/** The subscription as the matcher uses it; undefined (and a warning) when it no longer compiles. */
function register(
  row: Row,
  projectId: string,
  topics: Map<string, Resource>,
  warn: (obj: unknown, msg: string) => void,
): RegisteredSubscription | undefined {
  const resource = parseJson(row.json) as Resource;
  try {
    const shape = readSubscription(resource);
    const author = row.author ?? { projectId, projectAdmin: false, superAdmin: false, scopes: [] };
    const base = {
      id: row.id,
      projectId,
      versionId: row.version_id,
      status: shape.status as ActiveSubscription['status'],
      form: shape.form,
      channel: shape.channel,
      ...(shape.endpoint !== undefined ? { endpoint: shape.endpoint } : {}),
      content: shape.content,
      ...(shape.heartbeatPeriod !== undefined ? { heartbeatPeriod: shape.heartbeatPeriod } : {}),
      ...(shape.timeout !== undefined ? { timeout: shape.timeout } : {}),
      ...(shape.maxCount !== undefined ? { maxCount: shape.maxCount } : {}),
      author,
    };
    if (shape.form === 'classic') {
      const criteria = compileCriteria(shape.criteria);
      return { ...base, criteria, resourceTypes: [criteria.resourceType], filters: [] };
    }
    const topicResource = topics.get(shape.criteria);
    if (!topicResource) throw new Error(`topic ${shape.criteria} is not stored in the project`);
    const topic = compileTopic(topicResource, compileFor);
    const filters = compileFilters(resource, topic, compileFor);
    return {
      ...base,
      topicUrl: shape.criteria,
      resourceTypes: topic.resourceTypes,
      filters,
      triggers: (change) => topic.triggers(change),
    };
  } catch (err) {
    warn({ subscriptionId: row.id, err: (err as Error).message }, 'subscription cannot be matched; skipped');
    return undefined;
  }
}

async function loadProject(
  db: Queryable,
  projectId: string,
  warn: (obj: unknown, msg: string) => void,
): Promise<ProjectEntry> {
  const r = await db.query<Row>(
    `SELECT r.id, r.version_id, r.content::text AS json, s.author
     FROM resources r LEFT JOIN subscription_state s ON s.subscription_id = r.id
     WHERE r.resource_type = 'Subscription' AND r.project_id = $1 AND NOT r.deleted
       AND r.content->>'status' IN ('requested', 'active')`,
    [projectId],
  );
  const byType = new Map<string, RegisteredSubscription[]>();
  if (r.rows.length > 0) {
    const topics = r.rows.length ? await loadTopics(db, projectId) : new Map<string, Resource>();
    for (const row of r.rows) {
      const sub = register(row, projectId, topics, warn);
      for (const type of sub?.resourceTypes ?? []) {
        const list = byType.get(type) ?? [];
        list.push(sub as RegisteredSubscription);
        byType.set(type, list);
      }
    }
  }
  return { loadedAt: Date.now(), byType };
}

export function createSubscriptionRegistry(deps: {
  signals: Signals;
  log?: { warn(obj: unknown, msg: string): void };
  /** MAX_CACHED_PROJECTS unless given (tests). */
  maxProjects?: number;
}): SubscriptionRegistry {
  const projects = new LRUCache<string, Promise<ProjectEntry>>({
    max: deps.maxProjects ?? MAX_CACHED_PROJECTS,
  });
  const warn = (obj: unknown, msg: string): void => deps.log?.warn(obj, msg);
  const forget = (projectId: string): void => {
    if (projectId === '*') projects.clear();
    else projects.delete(projectId);
  };
  deps.signals.subscribe(SUBSCRIPTIONS_CHANNEL, (payload) => {
    if (payload.startsWith('changed ')) forget(payload.slice(8));
  });
  const entry = async (db: Queryable, projectId: string): Promise<ProjectEntry> => {
    const known = projects.get(projectId);
    if (known) {
      const e = await known.catch(() => undefined);
      if (e && Date.now() - e.loadedAt < MAX_AGE_MS) return e;
      if (projects.get(projectId) === known) projects.delete(projectId);
    }
    let loading = projects.get(projectId);
    if (!loading) {
      loading = loadProject(db, projectId, warn);
      projects.set(projectId, loading);
      loading.catch(() => {
        if (projects.get(projectId) === loading) projects.delete(projectId);
      });
    }
    return loading;
  };
  return {
    async candidates(db, projectId, resourceType) {
      return (await entry(db, projectId)).byType.get(resourceType) ?? [];
    },
    async changed(projectId) {
      forget(projectId);
      await deps.signals.publish(SUBSCRIPTIONS_CHANNEL, `changed ${projectId}`).catch(() => undefined);
    },
  };
}
