// SQL of the resource tables: rows in, rows out. Index rows are written beside each version by the search module.
import type { Queryable } from '../../storage/db.js';
import type { Resource } from '../types.js';
import { deleteIndex, writeIndex } from '../search/index-writer.js';

export interface StoredRow {
  rid: number;
  resource_type: string;
  id: string;
  project_id: string;
  version_id: number;
  last_updated: Date;
  deleted: boolean;
  json: string;
}

const ROW_COLUMNS =
  'rid, resource_type, id, project_id, version_id, last_updated, deleted, content::text AS json';

export async function selectCurrent(
  db: Queryable,
  resourceType: string,
  id: string,
  forUpdate = false,
): Promise<StoredRow | undefined> {
  const r = await db.query<StoredRow>(
    `SELECT ${ROW_COLUMNS} FROM resources WHERE resource_type = $1 AND id = $2${forUpdate ? ' FOR UPDATE' : ''}`,
    [resourceType, id],
  );
  return r.rows[0];
}

export async function selectVersion(
  db: Queryable,
  resourceType: string,
  id: string,
  versionId: number,
): Promise<(StoredRow & { json: string | null }) | undefined> {
  const r = await db.query<StoredRow & { json: string | null }>(
    `SELECT ${ROW_COLUMNS} FROM resource_history WHERE resource_type = $1 AND id = $2 AND version_id = $3`,
    [resourceType, id, versionId],
  );
  return r.rows[0];
}

export interface NewVersion {
  resource: Resource;
  projectId: string;
  versionId: number;
  lastUpdated: Date;
}

/** Inserts first versions of many resources in three statements (resources, history, index). */
export async function insertResources(tx: Queryable, items: readonly NewVersion[]): Promise<number[]> {
  if (items.length === 0) return [];
  const rows = items.map((it) => ({
    resource_type: it.resource.resourceType,
    id: it.resource.id,
    project_id: it.projectId,
    version_id: it.versionId,
    last_updated: it.lastUpdated.toISOString(),
    content: it.resource,
  }));
  const r = await tx.query<{ rid: number; id: string; resource_type: string }>(
    `WITH ins AS (
       INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, x.project_id, x.version_id, x.last_updated, false, x.content
       FROM jsonb_to_recordset($1::jsonb) AS x(resource_type text, id text, project_id text, version_id int, last_updated timestamptz, content jsonb)
       RETURNING rid, resource_type, id, project_id, version_id, last_updated, content
     ), hist AS (
       INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       SELECT rid, resource_type, id, version_id, project_id, last_updated, false, content FROM ins
     )
     SELECT rid, resource_type, id FROM ins`,
    [JSON.stringify(rows)],
  );
  const ridByKey = new Map(r.rows.map((row) => [`${row.resource_type}/${row.id}`, row.rid]));
  const rids = items.map((it) => ridByKey.get(`${it.resource.resourceType}/${it.resource.id}`) as number);
  await writeIndex(
    tx,
    items.map((it, i) => ({ rid: rids[i] as number, resource: it.resource })),
  );
  return rids;
}

/** Writes a new version of an existing row (update, or delete when `resource` is null). */
export async function writeVersion(
  tx: Queryable,
  rid: number,
  resourceType: string,
  id: string,
  v: {
    resource: Resource | null;
    projectId: string;
    versionId: number;
    lastUpdated: Date;
    previous?: string;
  },
): Promise<void> {
  const deleted = v.resource === null;
  const lastUpdated = v.lastUpdated.toISOString();
  // A deleted row keeps its last content so the id stays reserved; history records the deletion with no content.
  await tx.query(
    deleted
      ? `UPDATE resources SET version_id = $2, last_updated = $3, deleted = true WHERE rid = $1`
      : `UPDATE resources SET version_id = $2, last_updated = $3, deleted = false, content = $4::jsonb WHERE rid = $1`,
    deleted ? [rid, v.versionId, lastUpdated] : [rid, v.versionId, lastUpdated, JSON.stringify(v.resource)],
  );
  await tx.query(
    `INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb)`,
    [
      rid,
      resourceType,
      id,
      v.versionId,
      v.projectId,
      lastUpdated,
      deleted,
      deleted ? null : JSON.stringify(v.resource),
    ],
  );
  await deleteIndex(tx, [rid]);
  if (v.resource) await writeIndex(tx, [{ rid, resource: v.resource }]);
}
