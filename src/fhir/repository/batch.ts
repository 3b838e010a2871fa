// batch Bundles: every entry succeeds or fails on its own. https://hl7.org/fhir/R4/http.html#brules
// Plain creates are prepared one by one and stored together in one database transaction (the common bulk
// load); if that fails they are retried one at a time so that each gets its own outcome. Conditional references
// (conditional-references.ts) are resolved per entry: an entry whose search finds none or several fails alone (412).
import { randomUUID } from 'node:crypto';
import type { Db } from '../../storage/db.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import {
  assertBundle,
  errorEntry,
  parseEntry,
  resultEntry,
  inlineBudget,
  runEntry,
  type ParsedEntry,
} from './bundle-entry.js';
import type { RepoContext } from './context.js';
import { ConditionalReferences, hasConditionalReference } from './conditional-references.js';
import { createdResult, createResource, storeCreates } from './create.js';
import { storageErrorToFhir } from './storage-errors.js';
import { prepareWrite, type PreparedWrite } from './prepare.js';

export async function processBatch(
  db: Db,
  ctx: RepoContext,
  body: unknown,
  maxEntries: number,
  onUnexpected: (err: unknown) => void,
): Promise<FhirResult> {
  const { entry } = assertBundle(body, maxEntries);
  const out: BundleEntryText[] = new Array(entry.length);
  const budget = inlineBudget();
  const fail = (i: number, err: unknown): void => {
    const known = err instanceof FhirError ? err : storageErrorToFhir(err);
    if (known) {
      out[i] = errorEntry(known);
    } else {
      onUnexpected(err);
      out[i] = errorEntry(
        new FhirError('exception', 'Internal error processing this entry', 'bundle.entry-internal', {
          status: 500,
        }),
      );
    }
  };
  const parsed: (ParsedEntry | undefined)[] = entry.map((raw, i) => {
    try {
      return parseEntry(raw, i, ctx.fhirBase);
    } catch (err) {
      fail(i, err);
      return undefined;
    }
  });
  const now = ctx.clock();
  const group: { i: number; p: PreparedWrite; e: ParsedEntry }[] = [];
  for (const e of parsed) {
    if (!e || e.method !== 'POST' || e.action || e.ifNoneExist) continue;
    if (hasConditionalReference(e.resource, ctx.fhirBase)) continue;
    try {
      group.push({ i: e.index, e, p: prepareWrite(ctx, e.resource as Resource, ctx.newId(), 1, now) });
    } catch (err) {
      fail(e.index, err);
    }
  }
  try {
    // Without secrets the whole group is one statement, atomic on its own.
    await storeCreates(
      db,
      ctx,
      group.map((g) => g.p),
    );
    for (const g of group) out[g.i] = resultEntry(createdResult(g.p), ctx.fhirBase);
  } catch {
    for (const g of group) {
      try {
        out[g.i] = resultEntry(await createResource(db, ctx, g.e.resource as Resource), ctx.fhirBase);
      } catch (err) {
        fail(g.i, err);
      }
    }
  }
  const refs = new ConditionalReferences(ctx);
  for (const e of parsed) {
    if (!e || out[e.index]) continue;
    try {
      const resolve = (r: Resource): Promise<void> => refs.resolve(db, r);
      if (e.resource && (e.method === 'PUT' || e.method === 'PATCH')) await resolve(e.resource);
      const r =
        e.method === 'POST'
          ? await createResource(db, ctx, e.resource as Resource, {
              ...(e.ifNoneExist ? { ifNoneExist: e.ifNoneExist } : {}),
              ...(e.action ? {} : { beforeCreate: resolve }),
            })
          : await db.transaction((tx) => runEntry(tx, ctx, e, budget));
      out[e.index] = resultEntry(r, ctx.fhirBase);
    } catch (err) {
      fail(e.index, err);
    }
  }
  const text = bundleToJson({ type: 'batch-response', entry: out }, randomUUID());
  return { status: 200, body: new RawJson(text) };
}
