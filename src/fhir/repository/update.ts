// update (PUT), including update-as-create and version-aware update: https://hl7.org/fhir/R4/http.html#update
import type { Db, Queryable } from '../../storage/db.js';
import { assertWrite } from '../access.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import { visible, type RepoContext } from './context.js';
import { commitCreates, createdResult } from './create.js';
import { storeBinaryContent } from './binary-content.js';
import { assertId, prepareWrite } from './prepare.js';
import { storeSecrets } from './secrets.js';
import { assertWriteReach, inReach } from './reach.js';
import { selectCurrent, writeVersion, type StoredRow } from './store.js';
import { checkWriteRules } from './write-rules.js';
import { prepareCustomIndex } from './custom-index.js';
import { assertNotShared, warmShared } from './shared-conformance.js';
import { writeChange } from '../subscriptions/outbox.js';

/** Parses `W/"3"` or `"3"` or `3`; a malformed If-Match is a 400. */
export function parseIfMatch(value: string): number {
  const m = /^(?:W\/)?"?(\d+)"?$/.exec(value.trim());
  if (!m)
    throw new FhirError(
      'invalid',
      `Malformed If-Match header: ${value.slice(0, 60)}`,
      'rest.if-match-format',
    );
  return Number(m[1]);
}

export function assertVersion(row: StoredRow, ifMatch: string | undefined): void {
  if (ifMatch === undefined) return;
  const wanted = parseIfMatch(ifMatch);
  if (wanted !== row.version_id) {
    throw new FhirError(
      'conflict',
      `Version conflict: If-Match asked for version ${wanted}, the current version is ${row.version_id}`,
      'rest.version-conflict',
      { status: 412 },
    );
  }
}

/** Writes `input` as the next version of the row (the row is locked by the caller). */
export async function writeNextVersion(
  tx: Queryable,
  ctx: RepoContext,
  row: StoredRow,
  input: Resource,
): Promise<FhirResult> {
  // What the write changes must be the caller's to change, as what it leaves (prepareWrite) must be. A deleted
  // resource's next version creates it again: a create, with nothing to change.
  if (!row.deleted) assertWriteReach(ctx, row.json, row.resource_type, 'update');
  const prepared = prepareWrite(
    ctx,
    input,
    row.id,
    row.version_id + 1,
    ctx.clock(),
    row.project_id,
    row.deleted ? 'create' : 'update',
  );
  await checkWriteRules(tx, ctx, [prepared]);
  await prepareCustomIndex(tx, ctx, [prepared]);
  await storeBinaryContent(ctx, [prepared]);
  const change = writeChange(
    row.deleted ? 'create' : 'update',
    row.project_id,
    row.resource_type,
    row.id,
    prepared.versionId,
    prepared.resource,
    row.deleted ? null : row.json,
  );
  const events = ctx.subscriptions ? await ctx.subscriptions.eventsFor(tx, [change]) : [];
  await writeVersion(tx, row.rid, row.resource_type, row.id, prepared, events);
  ctx.audit?.wrote([
    {
      resourceType: row.resource_type,
      id: row.id,
      versionId: prepared.versionId,
      interaction: row.deleted ? 'create' : 'update',
      resource: prepared.resource,
    },
  ]);
  if (prepared.secrets.length) await storeSecrets(tx, row.resource_type, row.id, prepared.secrets);
  return { ...createdResult(prepared), status: 200 };
}

/** Update inside an open transaction (used by PUT and by transaction Bundles). */
export async function updateInTx(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  input: Resource,
  ifMatch?: string,
): Promise<FhirResult> {
  // Before any lookup, as patch and delete do: whether the id exists elsewhere must not change the answer.
  assertWrite(ctx.actor, resourceType, 'update');
  assertId(id);
  if (input.id !== id) {
    throw new FhirError(
      'invalid',
      `The resource id (${String(input.id)}) must equal the URL id (${id})`,
      'rest.update.id',
      {
        expression: [`${resourceType}.id`],
      },
    );
  }
  const locked = await selectCurrent(tx, resourceType, id, true);
  const own = locked && visible(ctx, locked.project_id) && (await inReach(tx, ctx.scope.patient, locked));
  if (!own) await assertNotShared(ctx, resourceType, id, 'update');
  if (locked && !own) {
    // The id belongs to another project: answer as if it did not exist, and create nothing.
    throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'rest.update.not-found');
  }
  if (!locked) {
    if (ifMatch !== undefined) {
      throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'rest.update.if-match-missing');
    }
    const prepared = prepareWrite(ctx, input, id, 1, ctx.clock());
    await commitCreates(tx, ctx, [prepared]);
    return createdResult(prepared);
  }
  assertVersion(locked, ifMatch);
  return writeNextVersion(tx, ctx, locked, input);
}

export async function updateResource(
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  input: Resource,
  opts: { ifMatch?: string } = {},
): Promise<FhirResult> {
  await warmShared(ctx, resourceType);
  // A unique violation (concurrent update-as-create, a taken externalId) is mapped by the HTTP error handler.
  return db.transaction((tx) => updateInTx(tx, ctx, resourceType, id, input, opts.ifMatch));
}
