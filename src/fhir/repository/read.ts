// read and vread: https://hl7.org/fhir/R4/http.html#read, #vread
import { AUDIT_EVENT, readAuditEvent } from './audit-events.js';
import type { Queryable } from '../../storage/db.js';
import { assertRead } from '../access.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import { binaryBytes, binaryJson } from './binary-content.js';
import { visible, type RepoContext } from './context.js';
import { inReach, versionRowInReach } from './reach.js';
import { sharedReadResult, sharedResource } from './shared-conformance.js';
import { selectCurrent, selectVersion, type StoredRow } from './store.js';

const notFound = (type: string, id: string): FhirError =>
  new FhirError('not-found', `Not found: ${type}/${id}`, 'rest.read.not-found');

/** The current row when it exists and the caller may see it; deleted rows are returned (callers decide). */
export async function readVisibleRow(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  forUpdate = false,
): Promise<StoredRow | undefined> {
  const row = await selectCurrent(db, resourceType, id, forUpdate);
  return row && visible(ctx, row.project_id) && (await inReach(db, ctx.scope.patient, row)) ? row : undefined;
}

/** The current version the caller may read, or the read's 403, 404 or 410. */
export async function readLiveRow(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
): Promise<StoredRow> {
  assertRead(ctx.actor, resourceType, 'read', id);
  const row = await readVisibleRow(db, ctx, resourceType, id);
  if (!row) throw notFound(resourceType, id);
  if (row.deleted) {
    throw new FhirError('deleted', `Deleted: ${resourceType}/${id}`, 'rest.read.gone', {
      headers: { etag: `W/"${row.version_id}"` },
    });
  }
  return row;
}

/** Version `versionId` when the caller may read it, or the vread's 403, 404 or 410. */
export async function readVersionRow(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  versionId: string,
): Promise<StoredRow> {
  assertRead(ctx.actor, resourceType, 'read', id);
  const v = Number(versionId);
  if (!Number.isInteger(v) || v < 1) throw notFound(resourceType, `${id}/_history/${versionId}`);
  const row = await selectVersion(db, resourceType, id, v);
  // A version is judged on its own content (a resource moved between patients), a deletion on what it deleted.
  const judged = row?.deleted && v > 1 ? await selectVersion(db, resourceType, id, v - 1) : row;
  if (!row || !judged || !visible(ctx, row.project_id) || !versionRowInReach(ctx.scope.patient, judged))
    throw notFound(resourceType, `${id}/_history/${versionId}`);
  if (row.deleted || row.json === null) {
    throw new FhirError('deleted', `Deleted: ${resourceType}/${id}/_history/${versionId}`, 'rest.vread.gone');
  }
  return row as StoredRow;
}

/** A row as the answer of a read: its JSON as stored, a Binary with its content as `data`. */
export async function rowResult(
  ctx: RepoContext,
  row: StoredRow,
  body?: FhirResult['body'],
): Promise<FhirResult> {
  return {
    status: 200,
    body: body ?? (row.resource_type === 'Binary' ? await binaryJson(ctx, row) : new RawJson(row.json)),
    versionId: String(row.version_id),
    lastModified: row.last_updated,
  };
}

export async function readResource(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
): Promise<FhirResult> {
  if (resourceType === AUDIT_EVENT) return readAuditEvent(db, ctx, id);
  try {
    return await rowResult(ctx, await readLiveRow(db, ctx, resourceType, id));
  } catch (err) {
    // Not the caller's: a shared conformance resource with that id answers (API.md §9).
    const shared =
      err instanceof FhirError && err.code === 'rest.read.not-found'
        ? await sharedResource(ctx, resourceType, id)
        : undefined;
    if (shared) return sharedReadResult(shared);
    throw err;
  }
}

export async function vreadResource(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  versionId: string,
): Promise<FhirResult> {
  if (resourceType === AUDIT_EVENT) return readAuditEvent(db, ctx, id, versionId);
  return rowResult(ctx, await readVersionRow(db, ctx, resourceType, id, versionId));
}

/**
 * Read (no `versionId`) or vread of a Binary answered with its raw content and contentType
 * (https://hl7.org/fhir/R4/binary.html#rest), with the access, 404 and 410 of any read.
 */
export async function readBinaryContent(
  db: Queryable,
  ctx: RepoContext,
  id: string,
  versionId?: string,
): Promise<FhirResult> {
  const row =
    versionId === undefined
      ? await readLiveRow(db, ctx, 'Binary', id)
      : await readVersionRow(db, ctx, 'Binary', id, versionId);
  return rowResult(ctx, row, await binaryBytes(ctx, row));
}
