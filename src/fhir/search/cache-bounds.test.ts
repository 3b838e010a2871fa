// Caches keyed by what requests and projects bring stay bounded (issue 30 point 7, the soak's memory): the
// per-project registries of subscriptions and of custom SearchParameters keep the most recently used projects
// only, and the common parameters (`_tag`, ...) are kept only when they exist, not for every `_x` a client sends.
import { describe, expect, it } from 'vitest';
import type { Queryable } from '../../storage/db.js';
import { localSignals } from '../../storage/signals.js';
import { createSubscriptionRegistry } from '../subscriptions/registry.js';
import { createSearchParamRegistry } from './custom-registry.js';
import { cachedCommonParams, getSearchParam } from './registry.js';

/** A database with no rows that records the project of each query (its first parameter). */
function countingDb(): Queryable & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    async query<T>(_sql: string, params?: readonly unknown[]) {
      asked.push(String(params?.[0]));
      return { rows: [] as T[], rowCount: 0 } as never;
    },
  };
}

describe('bounded caches', () => {
  it('the subscription registry keeps the most recently used projects and reloads one dropped', async () => {
    const db = countingDb();
    const registry = createSubscriptionRegistry({ signals: localSignals(), maxProjects: 2 });
    for (const p of ['p1', 'p2', 'p3']) await registry.candidates(db, p, 'Patient');
    expect(db.asked).toEqual(['p1', 'p2', 'p3']);
    await registry.candidates(db, 'p3', 'Patient');
    await registry.candidates(db, 'p2', 'Patient');
    expect(db.asked).toEqual(['p1', 'p2', 'p3']); // still cached
    await registry.candidates(db, 'p1', 'Patient');
    expect(db.asked).toEqual(['p1', 'p2', 'p3', 'p1']); // dropped as the least recently used, loaded again
  });

  it('the custom SearchParameter registry keeps the most recently used projects and reloads one dropped', async () => {
    const db = countingDb();
    const registry = createSearchParamRegistry({ signals: localSignals(), maxProjects: 2 });
    for (const p of ['p1', 'p2', 'p3']) await registry.forProject(db, p);
    await registry.forProject(db, 'p3');
    await registry.forProject(db, 'p2');
    expect(db.asked).toEqual(['p1', 'p2', 'p3']);
    await registry.forProject(db, 'p1');
    expect(db.asked).toEqual(['p1', 'p2', 'p3', 'p1']);
  });

  it('keeps common parameters that exist, and none of the unknown `_` codes a client sends', () => {
    expect(getSearchParam('Observation', '_tag')?.expression).toBe('Observation.meta.tag');
    const kept = cachedCommonParams();
    for (let i = 0; i < 1000; i++) expect(getSearchParam('Observation', `_nothing${i}`)).toBeUndefined();
    expect(getSearchParam('Observation', '_tag')?.code).toBe('_tag');
    expect(cachedCommonParams()).toBe(kept);
  });
});
