// patch with JSON Patch (RFC 6902): https://hl7.org/fhir/R4/http.html#patch
import jsonpatch from 'fast-json-patch';
import type { Db, Queryable } from '../../storage/db.js';
import { assertWrite } from '../access.js';
import { parseJson } from '../json/parse.js';
import { rawNumberText, setRawNumber } from '../json/raw-numbers.js';
import { FhirError } from '../outcome.js';
import type { FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import { assertDepth, MAX_RESOURCE_DEPTH, tooDeepElement } from '../validation/depth.js';
import { binaryWithData } from './binary-content.js';
import type { RepoContext } from './context.js';
import { readVisibleRow } from './read.js';
import { assertNotShared, warmShared } from './shared-conformance.js';
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
  if (!row) await assertNotShared(ctx, resourceType, id, 'patch');
  if (!row) throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'rest.patch.not-found');
  if (row.deleted) throw new FhirError('deleted', `Deleted: ${resourceType}/${id}`, 'rest.patch.gone');
  assertVersion(row, ifMatch);
  // A Binary is patched as clients see it: with its content as `data`.
  const current =
    resourceType === 'Binary' ? await binaryWithData(ctx, row) : (parseJson(row.json) as Resource);
  let patched: Resource;
  try {
    const err = jsonpatch.validate(ops as jsonpatch.Operation[], current);
    if (err) throw err;
    // Applied in place on our own parsed copy: fast-json-patch's copy of the document would drop the number texts.
    patched = jsonpatch.applyPatch(current, ops as jsonpatch.Operation[], true, true).newDocument;
    for (const op of ops as jsonpatch.Operation[]) keepValueText(patched, op);
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

/**
 * A number an `add` or `replace` puts in place keeps the text it had in the patch (`"value": 1.50`); objects and arrays
 * are put in place as they are, with their own number texts.
 */
function keepValueText(doc: unknown, op: jsonpatch.Operation): void {
  if ((op.op !== 'add' && op.op !== 'replace') || typeof op.value !== 'number') return;
  const text = rawNumberText(op, 'value');
  if (text === undefined) return;
  const keys = op.path
    .split('/')
    .slice(1)
    .map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~'));
  let holder = doc as Record<string, unknown> | undefined;
  for (const k of keys.slice(0, -1)) {
    const next = holder?.[k];
    holder = next !== null && typeof next === 'object' ? (next as Record<string, unknown>) : undefined;
  }
  if (!holder) return;
  let key = keys[keys.length - 1] as string;
  if (Array.isArray(holder) && key === '-') key = String(holder.length - 1);
  if (Object.is(holder[key], op.value)) setRawNumber(holder, key, text);
}

export async function patchResource(
  db: Db,
  ctx: RepoContext,
  resourceType: string,
  id: string,
  ops: unknown,
  opts: { ifMatch?: string } = {},
): Promise<FhirResult> {
  await warmShared(ctx, resourceType);
  return db.transaction((tx) => patchInTx(tx, ctx, resourceType, id, ops, opts.ifMatch));
}
