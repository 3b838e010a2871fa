// The `<code>$<k>` rows that the index writer wrote before migration 027 for the composites now read from other rows
// (src/fhir/search/composite-sources.ts): migration tests put them back to play a database written by older versions.
import type { Queryable } from '../../src/storage/db.js';
import { derivedComposites } from '../../src/fhir/search/composite-sources.js';
import { compositeValuesOf } from '../../src/fhir/search/extract-composite.js';
import { getSearchParam } from '../../src/fhir/search/registry.js';
import type { Resource } from '../../src/fhir/types.js';

/** Inserts those rows for each resource (by rid); answers how many. Token rows keep their display, as they did. */
export async function insertOldCompositeRows(
  db: Queryable,
  resources: readonly { rid: number; resource: Resource }[],
): Promise<number> {
  let n = 0;
  for (const { rid, resource } of resources) {
    for (const code of derivedComposites(resource.resourceType)) {
      const param = getSearchParam(resource.resourceType, code);
      if (!param) throw new Error(`no ${code}`);
      for (const { code: c, values, grp } of compositeValuesOf(resource, param)) {
        for (const v of values) {
          n++;
          if (v.t === 'token')
            await db.query(
              `INSERT INTO sp_token (rid, resource_type, code, system, value, text_norm, grp)
               VALUES ($1, $2, $3, $4, $5, $6, $7)`,
              [rid, resource.resourceType, c, v.system, v.value, v.text, grp],
            );
          else if (v.t === 'quantity')
            await db.query(
              `INSERT INTO sp_quantity (rid, resource_type, code, value, system, unit_code, unit, grp)
               VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
              [rid, resource.resourceType, c, v.value, v.system, v.code, v.unit, grp],
            );
          else throw new Error(`unexpected ${v.t}`);
        }
      }
    }
  }
  return n;
}
