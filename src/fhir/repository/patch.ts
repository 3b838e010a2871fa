// patch with JSON Patch (RFC 6902): https://hl7.org/fhir/R4/http.html#patch
import jsonpatch from 'fast-json-patch';
import type { Db, Queryable } from '../../storage/db.js';
import { assertWrite } from '../access.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import { assertDepth, MAX_RESOURCE_DEPTH, tooDeepElement } from '../validation/depth.js';
import { binaryWithData } from './binary-content.js';
import type { RepoContext } from './context.js';
import { readVisibleRow } from './read.js';
import { assertVersion, writeNextVersion } from './update.js';

export async function patchInTx(
  tx: Queryable,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  ops: unknown,
  ifMatch?: string,
): Promise<FhirResult> {
  assertWrite(ctx.actor, resourceType, 'update');
  if (!Array.isArray(ops)) {
    throw new FhirError('invalid', 'A JSON Patch body must be an array of operations', 'rest.patch.shape');
  }
  // Before fast-json-patch walks the values (recursively): a value deeper than a resource may be is refused.
  // The operations array and an operation object add two levels; a value at the top of the resource adds one.
  const deep = tooDeepElement(ops, MAX_RESOURCE_DEPTH + 1);
  if (deep !== undefined) {
    throw new FhirError(
      'structure',
      `JSON Patch operation ${deep} holds a value deeper than a resource may nest (${MAX_RESOURCE_DEPTH} levels of JSON objects and arrays)`,
      'rest.patch.too-deep',
    );
  }
  const row = await readVisibleRow(tx, ctx, resourceType, id, true);
  if (!row) throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'rest.patch.not-found');
  if (row.deleted) throw new FhirError('deleted', `Deleted: ${resourceType}/${id}`, 'rest.patch.gone');
  assertVersion(row, ifMatch);
  // A Binary is patched as clients see it: with its content as `data`.
  const current =
    resourceType === 'Binary' ? await binaryWithData(ctx, row) : (JSON.parse(row.json) as Resource);
  let patched: Resource;
  try {
    const err = jsonpatch.validate(ops as jsonpatch.Operation[], current);
    if (err) throw err;
    patched = jsonpatch.applyPatch(current, ops as jsonpatch.Operation[], true, false).newDocument;
  } catch (err) {
    const e = err as { name?: string; message?: string };
    const failedTest = e.name === 'TEST_OPERATION_FAILED';
    throw new FhirError(
      failedTest ? 'conflict' : 'invalid',
      `JSON Patch failed: ${(e.message ?? String(err)).split('\n')[0]}`,
      failedTest ? 'rest.patch.test-failed' : 'rest.patch.invalid',
      failedTest ? { status: 412 } : {},
    );
  }
  if (
    patched === null ||
    typeof patched !== 'object' ||
    patched.resourceType !== resourceType ||
    patched.id !== id
  ) {
    throw new FhirError('invalid', 'JSON Patch must not change resourceType or id', 'rest.patch.identity');
  }
  // A small value added deep inside the resource can make it deeper than the bound.
  assertDepth(patched, MAX_RESOURCE_DEPTH, resourceType);
  return writeNextVersion(tx, ctx, row, patched);
}

export function patchResource(
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  ops: unknown,
  opts: { ifMatch?: string } = {},
): Promise<FhirResult> {
  return db.transaction((tx) => patchInTx(tx, ctx, resourceType, id, ops, opts.ifMatch));
}
