// Canonical resolution (API.md §9, https://hl7.org/fhir/R4/references.html#canonical): a conformance resource by
// `url` or `url|version`, in the caller's project first, then in the shared set. Without a version the latest of the
// project's (by `version`, compared numerically part by part as the shared set does, then the last written) wins.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import { compareVersions, isSharedIndex } from './shared-set.js';
import type { Resource } from '../types.js';
import {
  splitCanonical,
  type At,
  type ConformanceResolver,
  type ConformanceType,
  type SharedSet,
} from './model.js';

/** Shared resources are the same objects for the process's life: numbered once, by identity. */
const sharedNumbers = new WeakMap<object, number>();
let nextShared = 0;

/**
 * A resolved resource's identity: a project's version (`p:` project, type, id and version id, which change with every
 * write) or a shared resource's number (`s:`). Equal stamps mean equal content.
 */
export function stampOf(type: ConformanceType, r: Resource): string {
  const project = r.meta?.project;
  if (typeof project === 'string' && r.id !== undefined && r.meta?.versionId !== undefined)
    return `p:${project}:${type}/${r.id}:${r.meta.versionId}`;
  let n = sharedNumbers.get(r);
  if (n === undefined) sharedNumbers.set(r, (n = ++nextShared));
  return `s:${n}`;
}

export function createResolver(db: Queryable, shared: SharedSet): ConformanceResolver {
  // The shared set loads on first use in steps that give way to other requests; its synchronous look-ups would load
  // it in one go, holding the event loop for most of a second.
  const sharedReady = async (): Promise<SharedSet> => {
    if (isSharedIndex(shared)) await shared.ready();
    return shared;
  };
  return {
    async resolve(at: At, type: ConformanceType, canonical: string) {
      const { url, version } = splitCanonical(canonical);
      if (at.projectId !== null) {
        // Every version of the canonical the project holds (few), newest written first: `9.0.0` and `10.0.0` are
        // ordered here, not by SQL's text order.
        const r = await (at.db ?? db).query<{ json: string; version: string | null }>(
          `SELECT content::text AS json, content->>'version' AS version FROM resources
           WHERE resource_type = $1 AND project_id = $2 AND NOT deleted AND content->>'url' = $3
             AND ($4::text IS NULL OR content->>'version' = $4)
           ORDER BY last_updated DESC LIMIT 200`,
          [type, at.projectId, url, version ?? null],
        );
        let best: { json: string; version: string | null } | undefined;
        for (const row of r.rows) {
          if (!best || compareVersions(row.version ?? undefined, best.version ?? undefined) > 0) best = row;
        }
        if (best) return parseJson(best.json) as Resource;
      }
      return (await sharedReady()).byUrl(type, url, version);
    },
    async stamp(at: At, type: ConformanceType, canonical: string) {
      // The project's generation of this type: any write of one (create, update, delete, expunge) changes the count,
      // the sum of version ids or the latest rid, so it is found from the rows' small columns alone (a large
      // CodeSystem's content is never read). Otherwise, the shared set's answer, fixed for the process's life.
      if (at.projectId !== null) {
        const r = await (at.db ?? db).query<{ n: string; v: string | null; r: string | null }>(
          `SELECT count(*)::text AS n, sum(version_id)::text AS v, max(rid)::text AS r FROM resources
           WHERE resource_type = $1 AND project_id = $2`,
          [type, at.projectId],
        );
        const g = r.rows[0];
        if (g && g.n !== '0')
          return `g:${at.projectId}:${type}:${g.n}:${g.v ?? ''}:${g.r ?? ''}|${canonical}`;
      }
      const { url, version } = splitCanonical(canonical);
      const s = (await sharedReady()).byUrl(type, url, version);
      return s ? stampOf(type, s) : `s:none|${type}|${canonical}`;
    },
  };
}
