// Conditional update, patch and delete (https://hl7.org/fhir/R4/http.html#cond-update, #patch, #3.1.0.7.1): the
// search criteria of the URL pick the resource. Update: no match creates (with the body's id, as an update as
// create), one match is updated (a different id in the body is 400); patch: one match is patched, none is 404;
// delete: one match is deleted, none changes nothing (200). Several matches are 412 for all three. The match and the
// write share one transaction, and the match runs with the caller's read access.
import type { Db, Queryable } from '../../storage/db.js';
import { FhirError, outcome } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import type { RepoContext } from './context.js';
import { commitCreates, createdResult, matchCondition } from './create.js';
import { deleteInTx } from './delete.js';
import { patchInTx } from './patch.js';
import { prepareWrite } from './prepare.js';
import { updateInTx } from './update.js';

/** The one resource the criteria match, or undefined; several matches are `412 multiple-matches`. */
async function singleMatch(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  interaction: 'update' | 'patch' | 'delete',
): Promise<{ id: string } | undefined> {
  const found = await matchCondition(
    tx,
    ctx,
    resourceType,
    condition,
    interaction === 'delete' ? 'delete' : 'update',
  );
  if (found.length > 1)
    throw new FhirError(
      'multiple-matches',
      `The criteria of the conditional ${interaction} matched more than one resource`,
      `rest.c${interaction}-multiple`,
    );
  return found[0];
}

/**
 * The id a conditional update writes: the one resource the criteria match (a different id in the body is 400), or,
 * with no match, the body's id (update as create) or undefined (a plain create). Several matches are 412.
 */
export async function conditionalUpdateTarget(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  input: Resource,
): Promise<string | undefined> {
  const hit = await singleMatch(tx, ctx, resourceType, condition, 'update');
  if (!hit) return typeof input.id === 'string' ? input.id : undefined;
  if (input.id !== undefined && input.id !== hit.id)
    throw new FhirError(
      'invalid',
      `The resource id (${String(input.id).slice(0, 64)}) is not the id of the resource the criteria match`,
      'rest.cupdate-id',
      { expression: [`${resourceType}.id`] },
    );
  return hit.id;
}

export async function conditionalUpdateInTx(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  input: Resource,
): Promise<FhirResult> {
  const id = await conditionalUpdateTarget(tx, ctx, resourceType, condition, input);
  if (id !== undefined) return updateInTx(tx, ctx, resourceType, id, { ...input, id });
  const prepared = prepareWrite(ctx, input, ctx.newId(), 1, ctx.clock());
  await commitCreates(tx, ctx, [prepared]);
  return createdResult(prepared);
}

export async function conditionalPatchInTx(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  ops: unknown,
): Promise<FhirResult> {
  const hit = await singleMatch(tx, ctx, resourceType, condition, 'patch');
  if (!hit)
    throw new FhirError(
      'not-found',
      'The criteria of the conditional patch matched nothing',
      'rest.cpatch-none',
    );
  return patchInTx(tx, ctx, resourceType, hit.id, ops);
}

export async function conditionalDeleteInTx(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
): Promise<FhirResult> {
  const hit = await singleMatch(tx, ctx, resourceType, condition, 'delete');
  if (!hit)
    return {
      status: 200,
      body: outcome('information', 'informational', 'Nothing matched: nothing was deleted'),
    };
  return deleteInTx(tx, ctx, resourceType, hit.id);
}

export const conditionalUpdate = (
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  input: Resource,
): Promise<FhirResult> =>
  db.transaction((tx) => conditionalUpdateInTx(tx, ctx, resourceType, condition, input));

export const conditionalPatch = (
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  ops: unknown,
): Promise<FhirResult> => db.transaction((tx) => conditionalPatchInTx(tx, ctx, resourceType, condition, ops));

export const conditionalDelete = (
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
): Promise<FhirResult> => db.transaction((tx) => conditionalDeleteInTx(tx, ctx, resourceType, condition));
