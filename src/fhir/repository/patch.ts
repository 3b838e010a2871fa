// patch with JSON Patch (RFC 6902) or FHIRPath Patch (a Parameters resource): https://hl7.org/fhir/R4/http.html#patch
import jsonpatch from 'fast-json-patch';
import type { Db, Queryable } from '../../storage/db.js';
import { assertWrite } from '../access.js';
import { parseJson } from '../json/parse.js';
import { stringifyJson } from '../json/stringify.js';
import { applyFhirpathPatch, isFhirpathPatch } from '../patch/fhirpath-patch.js';
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
  // A Parameters resource is a FHIRPath Patch (https://hl7.org/fhir/R4/fhirpatch.html); anything else a JSON Patch.
  const fhirpath = isFhirpathPatch(ops);
  if (!fhirpath) assertJsonPatch(ops);
  const row = await readVisibleRow(tx, ctx, resourceType, id, true);
  if (!row) await assertNotShared(ctx, resourceType, id, 'patch');
  if (!row) throw new FhirError('not-found', `Not found: ${resourceType}/${id}`, 'rest.patch.not-found');
  if (row.deleted) throw new FhirError('deleted', `Deleted: ${resourceType}/${id}`, 'rest.patch.gone');
  assertVersion(row, ifMatch);
  // A Binary is patched as clients see it: with its content as `data`.
  const current =
    resourceType === 'Binary' ? await binaryWithData(ctx, row) : (parseJson(row.json) as Resource);
  const patched = fhirpath
    ? await applyParameters(ctx, current, ops)
    : applyJsonPatch(current, ops as jsonpatch.Operation[]);
  if (
    patched === null ||
    typeof patched !== 'object' ||
    patched.resourceType !== resourceType ||
    patched.id !== id
  ) {
    throw new FhirError('invalid', 'A patch must not change resourceType or id', 'rest.patch.identity');
  }
  // A small value added deep inside the resource can make it deeper than the bound.
  assertDepth(patched, MAX_RESOURCE_DEPTH, resourceType);
  return writeNextVersion(tx, ctx, row, patched);
}

function assertJsonPatch(ops: unknown): asserts ops is jsonpatch.Operation[] {
  if (!Array.isArray(ops)) {
    throw new FhirError(
      'invalid',
      'A PATCH body must be a JSON Patch (an array of operations) or a FHIRPath Patch (a Parameters resource)',
      'rest.patch.shape',
    );
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
}

function applyJsonPatch(current: Resource, ops: jsonpatch.Operation[]): Resource {
  try {
    const err = jsonpatch.validate(ops, current);
    if (err) throw err;
    // Applied in place on our own parsed copy: fast-json-patch's copy of the document would drop the number texts.
    const patched = jsonpatch.applyPatch(current, ops, true, true).newDocument;
    for (const op of ops) keepValueText(patched, op);
    return patched;
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
}

/**
 * A FHIRPath Patch runs in the FHIRPath worker (ctx.fhirpathPatch), whose deadline bounds a costly path; both travel
 * as JSON text, so decimals keep their written form. Without a worker (repository tests) it runs here.
 */
async function applyParameters(ctx: RepoContext, current: Resource, parameters: unknown): Promise<Resource> {
  if (!ctx.fhirpathPatch) return applyFhirpathPatch(current, parameters) as Resource;
  const text = await ctx.fhirpathPatch(stringifyJson(current), stringifyJson(parameters));
  return parseJson(text) as Resource;
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
