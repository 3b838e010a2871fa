// delete: https://hl7.org/fhir/R4/http.html#delete
import type { Db, Queryable } from '../../storage/db.js';
import { assertWrite } from '../access.js';
import { FhirError, outcome } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { RepoContext } from './context.js';
import { assertWriteReach } from './reach.js';
import { readVisibleRow } from './read.js';
import { assertNotShared, warmShared } from './shared-conformance.js';
import { writeVersion } from './store.js';
import { writeChange } from '../subscriptions/outbox.js';

export async function deleteInTx(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
): Promise<FhirResult> {
  assertWrite(ctx.actor, resourceType, 'delete');
  const row = await readVisibleRow(tx, ctx, resourceType, id, true);
  if (!row) await assertNotShared(ctx, resourceType, id, 'delete');
  if (!row) throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'rest.delete.not-found');
  if (row.deleted) {
    return {
      status: 200,
      body: outcome('information', 'informational', `${resourceType}/${id} was already deleted`),
    };
  }
  assertWriteReach(ctx, row.json, resourceType, 'delete');
  const versionId = row.version_id + 1;
  const change = writeChange('delete', row.project_id, resourceType, id, versionId, null, row.json);
  const events = ctx.subscriptions ? await ctx.subscriptions.eventsFor(tx, [change]) : [];
  if (resourceType === 'Subscription') await ctx.subscriptions?.deleted(tx, id);
  await writeVersion(
    tx,
    row.rid,
    resourceType,
    id,
    { resource: null, projectId: row.project_id, versionId, lastUpdated: ctx.clock() },
    events,
  );
  ctx.audit?.wrote([{ resourceType, id, versionId, interaction: 'delete', resource: row.json }]);
  return {
    status: 200,
    body: outcome('information', 'informational', `Deleted ${resourceType}/${id}`),
    versionId: String(versionId),
  };
}

export async function deleteResource(
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  id: string,
): Promise<FhirResult> {
  await warmShared(ctx, resourceType);
  return db.transaction((tx) => deleteInTx(tx, ctx, resourceType, id));
}
