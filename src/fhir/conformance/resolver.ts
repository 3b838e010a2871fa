// Canonical resolution (API.md §9, https://hl7.org/fhir/R4/references.html#canonical): a conformance resource by
// `url` or `url|version`, in the caller's project first, then in the shared set. Without a version the latest of the
// project's (by `version`, then the last written) wins.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import {
  splitCanonical,
  type At,
  type ConformanceResolver,
  type ConformanceType,
  type SharedSet,
} from './model.js';

const PROJECT_MATCH = `FROM resources
  WHERE resource_type = $1 AND project_id = $2 AND NOT deleted AND content->>'url' = $3
    AND ($4::text IS NULL OR content->>'version' = $4)
  ORDER BY content->>'version' DESC NULLS LAST, last_updated DESC LIMIT 1`;

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
  return {
    async resolve(at: At, type: ConformanceType, canonical: string) {
      const { url, version } = splitCanonical(canonical);
      if (at.projectId !== null) {
        const r = await (at.db ?? db).query<{ json: string }>(
          `SELECT content::text AS json ${PROJECT_MATCH}`,
          [type, at.projectId, url, version ?? null],
        );
        const row = r.rows[0];
        if (row) return parseJson(row.json) as Resource;
      }
      return shared.byUrl(type, url, version);
    },
    async stamp(at: At, type: ConformanceType, canonical: string) {
      const { url, version } = splitCanonical(canonical);
      if (at.projectId !== null) {
        const r = await (at.db ?? db).query<{ id: string; version_id: number | string }>(
          `SELECT id, version_id ${PROJECT_MATCH}`,
          [type, at.projectId, url, version ?? null],
        );
        const row = r.rows[0];
        if (row) return `p:${at.projectId}:${type}/${row.id}:${String(row.version_id)}`;
      }
      const s = shared.byUrl(type, url, version);
      return s ? stampOf(type, s) : undefined;
    },
  };
}
