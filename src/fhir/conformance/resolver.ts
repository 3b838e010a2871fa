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

export function createResolver(db: Queryable, shared: SharedSet): ConformanceResolver {
  return {
    async resolve(at: At, type: ConformanceType, canonical: string) {
      const { url, version } = splitCanonical(canonical);
      if (at.projectId !== null) {
        const r = await (at.db ?? db).query<{ json: string }>(
          `SELECT content::text AS json FROM resources
           WHERE resource_type = $1 AND project_id = $2 AND NOT deleted AND content->>'url' = $3
             AND ($4::text IS NULL OR content->>'version' = $4)
           ORDER BY content->>'version' DESC NULLS LAST, last_updated DESC LIMIT 1`,
          [type, at.projectId, url, version ?? null],
        );
        const row = r.rows[0];
        if (row) return parseJson(row.json) as Resource;
      }
      return shared.byUrl(type, url, version);
    },
  };
}
