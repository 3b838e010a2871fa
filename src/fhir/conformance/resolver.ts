// Canonical resolution (API.md §9, https://hl7.org/fhir/R4/references.html#canonical): a conformance resource by
// `url` or `url|version`, in the caller's project first, then in the shared set. Without a version the latest of the
// project's (by `version`, compared numerically part by part as the shared set does, then the last written) wins.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import { compareVersions } from './shared-set.js';
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
      return shared.byUrl(type, url, version);
    },
  };
}
