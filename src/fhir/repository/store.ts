// SQL of the resource tables: rows in, rows out. Index rows are written beside each version by the search module.
import type { Queryable } from '../../storage/db.js';
import { stringifyJson, stringifyOnce } from '../json/stringify.js';
import type { Resource } from '../types.js';
import { indexCtes, replaceIndexCtes } from '../search/index-writer.js';
import type { ExtractedValues } from '../search/extract-composite.js';
import type { OutboxEvent } from '../subscriptions/model.js';
import { outboxCte } from '../subscriptions/outbox.js';
import type { AuditRow } from '../../audit/model.js';
import { auditCte, insertAuditRows } from '../../audit/writer.js';

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
    { prepare: true },
  );
  return r.rows[0];
}

export async function selectVersion(
  db: Queryable,
  resourceType: string,
  id: string,
  versionId: number,
): Promise<(StoredRow & { json: string | null }) | undefined> {
  // By rid, the history's key: resource_history has no index on (resource_type, id), and a type's history rows are
  // many (a scan of five million took 27 s). A resource keeps its rid for life (resources_type_id is unique).
  const r = await db.query<StoredRow & { json: string | null }>(
    `SELECT ${ROW_COLUMNS} FROM resource_history
     WHERE rid = (SELECT rid FROM resources WHERE resource_type = $1 AND id = $2) AND version_id = $3`,
    [resourceType, id, versionId],
    { prepare: true },
  );
  return r.rows[0];
}

export interface NewVersion {
  resource: Resource;
  projectId: string;
  versionId: number;
  lastUpdated: Date;
  /** Index values of the project's (and shared) SearchParameters, by index code (search/custom-params.ts). */
  index?: readonly ExtractedValues[];
}

/**
 * Inserts first versions of many resources — current row, history row and search index — in ONE statement, so a
 * create is one round trip (a single statement is atomic on its own; callers needing more wrap it in a transaction).
 */
export async function insertResources(
  tx: Queryable,
  items: readonly NewVersion[],
  events: readonly OutboxEvent[] = [],
  audit: readonly AuditRow[] = [],
): Promise<void> {
  if (items.length === 0) return insertAuditRows(tx, audit);
  // Each resource is serialised once, here: the row around it is small, and the answer (stringifyJson of the same
  // object, reply.ts or a Bundle entry) reuses the text.
  const rows = items.map((it) => {
    const text = stringifyOnce(it.resource);
    const head = JSON.stringify({
      resource_type: it.resource.resourceType,
      id: it.resource.id,
      project_id: it.projectId,
      version_id: it.versionId,
      last_updated: it.lastUpdated.toISOString(),
    });
    return `${head.slice(0, -1)},"content":${text}}`;
  });
  const params: unknown[] = [`[${rows.join(',')}]`];
  const index = indexCtes(items, params, 'ins');
  // The subscription events of these versions, in the same statement: stored exactly when the versions are.
  const outbox = outboxCte(events, params);
  if (outbox) index.push(outbox);
  // The AuditEvent of the request that writes them (API.md §10), in the same statement too.
  const audited = auditCte(audit, params);
  if (audited) index.push(audited);
  await tx.query(
    `WITH ins AS (
       INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
       SELECT x.resource_type, x.id, x.project_id, x.version_id, x.last_updated, false, x.content
       FROM json_to_recordset($1::json) AS x(resource_type text, id text, project_id text, version_id int, last_updated timestamptz, content json)
       RETURNING rid, resource_type, id, project_id, version_id, last_updated, content
     ), hist AS (
       INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       SELECT rid, resource_type, id, version_id, project_id, last_updated, false, content FROM ins
     )${index.length ? `, ${index.join(', ')}` : ''}
     SELECT count(*)::int AS n FROM ins`,
    params,
    { prepare: true },
  );
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
    index?: readonly ExtractedValues[];
  },
  events: readonly OutboxEvent[] = [],
): Promise<void> {
  const deleted = v.resource === null;
  const lastUpdated = v.lastUpdated.toISOString();
  // A deleted row keeps its last content so the id stays reserved; history records the deletion with no content.
  // Current row, history row and index are written by one statement (one round trip).
  const content = deleted ? null : stringifyJson(v.resource);
  const params: unknown[] = [rid, v.versionId, lastUpdated, content, resourceType, id, v.projectId, deleted];
  const index = replaceIndexCtes(rid, v.resource, params, v.index);
  const outbox = outboxCte(events, params);
  if (outbox) index.push(outbox);
  await tx.query(
    `WITH upd AS (
       UPDATE resources SET version_id = $2, last_updated = $3, deleted = $8,
         content = COALESCE($4::json, content) WHERE rid = $1 RETURNING rid
     ), hist AS (
       INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       VALUES ($1, $5, $6, $2, $7, $3, $8, $4::json)
     ), ${index.join(', ')}
     SELECT count(*)::int AS n FROM upd`,
    params,
    { prepare: true },
  );
}
