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
import { FhirError } from '../outcome.js';

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

/**
 * The current row of `resources` as the version it is (ROW_COLUMNS): a deletion has no content, though the row keeps
 * its last content (the id stays reserved).
 */
export const CURRENT_AS_VERSION =
  'rid, resource_type, id, project_id, version_id, last_updated, deleted, CASE WHEN deleted THEN NULL ELSE content::text END AS json';

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
  // resource_history holds the versions that are no longer current; the current one is the row in resources (a
  // deleted row keeps its last content to reserve the id, but the version it stands for is the deletion: no content).
  // By rid, the history's key: resource_history has no index on (resource_type, id), and a type's history rows are
  // many (a scan of five million took 27 s). A resource keeps its rid for life (resources_type_id is unique).
  const r = await db.query<StoredRow & { json: string | null }>(
    `SELECT ${ROW_COLUMNS} FROM resource_history
     WHERE rid = (SELECT rid FROM resources WHERE resource_type = $1 AND id = $2) AND version_id = $3
     UNION ALL
     SELECT ${CURRENT_AS_VERSION} FROM resources WHERE resource_type = $1 AND id = $2 AND version_id = $3`,
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
 * Inserts first versions of many resources — current row and search index — in ONE statement, so a create is one
 * round trip (the history gets a version when it stops being current: writeVersion) (a single statement is atomic on its own; callers needing more wrap it in a transaction).
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
  // The version being replaced moves to resource_history (which holds only versions no longer current), the row
  // takes the new one, the index follows: one statement (one round trip). Every caller holds the row's lock (FOR
  // UPDATE) since it read the version it replaces, so this statement's snapshot sees that version and history stays
  // gap-free. A caller whose version is not the one before `versionId` changes nothing: the statement moves and
  // updates only that version, and the caller's transaction fails (its index rows are rolled back with it).
  const content = deleted ? null : stringifyJson(v.resource);
  const params: unknown[] = [rid, v.versionId, lastUpdated, content, deleted];
  const index = replaceIndexCtes(rid, v.resource, params, v.index);
  const outbox = outboxCte(events, params);
  if (outbox) index.push(outbox);
  const r = await tx.query<{ n: number }>(
    `WITH prev AS (
       INSERT INTO resource_history (rid, resource_type, id, version_id, project_id, last_updated, deleted, content)
       SELECT rid, resource_type, id, version_id, project_id, last_updated, deleted,
         CASE WHEN deleted THEN NULL ELSE content END
       FROM resources WHERE rid = $1 AND version_id = $2::int - 1
     ), upd AS (
       UPDATE resources SET version_id = $2, last_updated = $3, deleted = $5,
         content = COALESCE($4::json, content) WHERE rid = $1 AND version_id = $2::int - 1 RETURNING rid
     ), ${index.join(', ')}
     SELECT count(*)::int AS n FROM upd`,
    params,
    { prepare: true },
  );
  if (r.rows[0]?.n !== 1)
    throw new FhirError(
      'conflict',
      `${resourceType}/${id} changed while it was written (version ${v.versionId - 1} is not current)`,
      'store.version-moved',
      { status: 409 },
    );
}
