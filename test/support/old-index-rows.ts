// Index rows as the index writer wrote them before migration 027: the `<code>$<k>` rows of the composites now read
// from other rows (src/fhir/search/composite-sources.ts), the rows of union parameters (union-params.ts), and code
// systems as URIs (src/fhir/search/system-key.ts). Migration tests put them back to play an older database.
import type { Queryable } from '../../src/storage/db.js';
import { derivedComposites } from '../../src/fhir/search/composite-sources.js';
import { compositeValuesOf } from '../../src/fhir/search/extract-composite.js';
import { getSearchParam } from '../../src/fhir/search/registry.js';
import { SYSTEM_PREFIXES } from '../../src/fhir/search/system-key.js';
import { extractAll } from '../../src/fhir/search/extract.js';
import { unionOf } from '../../src/fhir/search/union-params.js';
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

/** The URI a stored system key stands for (the inverse of system-key.ts's systemKey). */
export function systemOfKey(key: string): string {
  const c = key.charCodeAt(0);
  if (c === 0x1f) return key.slice(1);
  if (c >= 1 && c <= SYSTEM_PREFIXES.length) return (SYSTEM_PREFIXES[c - 1] as string) + key.slice(1);
  return key;
}

/** Rewrites the stored system keys of the index to the URIs themselves, as the writer before migration 027 did. */
export async function insertOldSystems(db: Queryable): Promise<number> {
  let n = 0;
  for (const [table, column] of [
    ['sp_token', 'system'],
    ['sp_quantity', 'system'],
    ['sp_identifier', 'system'],
    ['sp_identifier', 'type_system'],
  ] as const) {
    const rows = await db.query<{ k: string }>(
      `SELECT DISTINCT ${column} AS k FROM ${table} WHERE ${column} IS NOT NULL`,
    );
    for (const { k } of rows.rows) {
      if (systemOfKey(k) === k) continue;
      const r = await db.query(`UPDATE ${table} SET ${column} = $1 WHERE ${column} = $2`, [
        systemOfKey(k),
        k,
      ]);
      n += r.rowCount ?? 0;
    }
  }
  return n;
}

/** The rows of union parameters (`combo-code`, union-params.ts) for each resource, as written before migration 027. */
export async function insertOldUnionRows(
  db: Queryable,
  resources: readonly { rid: number; resource: Resource }[],
): Promise<number> {
  let n = 0;
  for (const { rid, resource } of resources) {
    for (const { code, values, grp } of extractAll(resource)) {
      if (grp !== undefined || !unionOf(resource.resourceType, code)) continue;
      for (const v of values) {
        n++;
        if (v.t === 'token')
          await db.query(
            `INSERT INTO sp_token (rid, resource_type, code, system, value, text_norm) VALUES ($1, $2, $3, $4, $5, $6)`,
            [rid, resource.resourceType, code, v.system, v.value, v.text],
          );
        else if (v.t === 'quantity')
          await db.query(
            `INSERT INTO sp_quantity (rid, resource_type, code, value, system, unit_code, unit)
             VALUES ($1, $2, $3, $4, $5, $6, $7)`,
            [rid, resource.resourceType, code, v.value, v.system, v.code, v.unit],
          );
        else throw new Error(`unexpected ${v.t}`);
      }
    }
  }
  return n;
}
