// transaction Bundles: all entries succeed or none is kept; `urn:uuid:` fullUrls become the new ids.
// Processing order per https://hl7.org/fhir/R4/http.html#trules: DELETE, POST, PUT/PATCH, GET. Conditional references
// (conditional-references.ts) are resolved after the deletes and the creates without such references are stored.
import { randomUUID } from 'node:crypto';
import type { Db } from '../../storage/db.js';
import { bundleToJson, type BundleEntryText } from '../bundle.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import {
  assertBundle,
  parseEntry,
  resultEntry,
  rewriteReferences,
  inlineBudget,
  runEntry,
  type ParsedEntry,
} from './bundle-entry.js';
import type { RepoContext } from './context.js';
import { conditionalUpdateTarget } from './conditional.js';
import { ConditionalReferences, hasConditionalReference } from './conditional-references.js';
import { commitCreates, createdResult, matchCondition } from './create.js';
import { prepareWrite, type PreparedWrite } from './prepare.js';

function inEntry(e: ParsedEntry, err: unknown): unknown {
  if (!(err instanceof FhirError)) return err;
  const issues = err.issues.map((i) => ({
    ...i,
    ...(i.details ? { details: { text: `Bundle.entry[${e.index}]: ${i.details.text}` } } : {}),
  }));
  return new FhirError(err.issueCode, `Bundle.entry[${e.index}]: ${err.message}`, err.code, {
    status: err.status,
    issues,
    headers: err.headers,
  });
}

const ORDER: Record<ParsedEntry['method'], number> = {
  DELETE: 0,
  POST: 1,
  PUT: 2,
  PATCH: 2,
  GET: 3,
  HEAD: 3,
};

export async function processTransaction(
  db: Db,
  ctx: RepoContext,
  body: unknown,
  maxEntries: number,
): Promise<FhirResult> {
  const { entry } = assertBundle(body, maxEntries);
  const entries = entry.map((raw, i) => parseEntry(raw, i, ctx.fhirBase));
  const seen = new Set<string>();
  for (const e of entries) {
    if (e.id && e.method !== 'GET' && e.method !== 'HEAD') {
      const key = `${e.type}/${e.id}`;
      if (seen.has(key))
        throw new FhirError(
          'invalid',
          `Bundle.entry[${e.index}]: ${key} is changed by two entries`,
          'bundle.duplicate-target',
        );
      seen.add(key);
    }
    if (e.fullUrl && seen.has(`fullUrl ${e.fullUrl}`)) {
      throw new FhirError(
        'invalid',
        `Bundle.entry[${e.index}]: fullUrl ${e.fullUrl} appears twice`,
        'bundle.duplicate-fullurl',
      );
    }
    if (e.fullUrl) seen.add(`fullUrl ${e.fullUrl}`);
  }
  {
    const results = await db.transaction(async (tx) => {
      const out: (FhirResult | undefined)[] = new Array(entries.length);
      // Made in the transaction's callback: a retried transaction starts with the whole budget again.
      const budget = inlineBudget();
      const idMap = new Map<string, string>();
      const creates: { e: ParsedEntry; id: string }[] = [];
      const refs = new ConditionalReferences(ctx);
      for (const e of entries) {
        if (e.method === 'POST' && !e.action) {
          if (e.ifNoneExist) {
            const found = await matchCondition(tx, ctx, e.type, e.ifNoneExist).catch((err: unknown) => {
              throw inEntry(e, err);
            });
            if (found.length > 1) {
              throw inEntry(
                e,
                new FhirError(
                  'duplicate',
                  'If-None-Exist matched more than one resource',
                  'bundle.ccreate-multiple',
                  { status: 412 },
                ),
              );
            }
            const hit = found[0];
            if (hit) {
              if (e.fullUrl) idMap.set(e.fullUrl, `${hit.resourceType}/${hit.id}`);
              refs.alias(e.type, e.ifNoneExist, `${hit.resourceType}/${hit.id}`);
              out[e.index] = {
                status: 200,
                body: new RawJson(hit.json),
                location: `${hit.resourceType}/${hit.id}`,
              };
              continue;
            }
          }
          const id = ctx.newId();
          creates.push({ e, id });
          if (e.fullUrl) idMap.set(e.fullUrl, `${e.type}/${id}`);
          // A conditional reference with the same criteria names what this conditional create makes.
          if (e.ifNoneExist) refs.alias(e.type, e.ifNoneExist, `${e.type}/${id}`);
        } else if (e.method === 'PUT' && e.condition) {
          // A conditional update is resolved first, so that references to its fullUrl name what it writes: the
          // matching resource, the body's id, or a new one (then an update as create).
          const target = await conditionalUpdateTarget(
            tx,
            ctx,
            e.type,
            e.condition,
            e.resource as Resource,
          ).catch((err: unknown) => {
            throw inEntry(e, err);
          });
          const id = target ?? ctx.newId();
          e.id = id;
          e.resource = { ...(e.resource as Resource), id };
          refs.alias(e.type, e.condition, `${e.type}/${id}`);
          delete e.condition;
          if (e.fullUrl) idMap.set(e.fullUrl, `${e.type}/${id}`);
        } else if (e.method === 'PUT' && e.fullUrl) {
          idMap.set(e.fullUrl, `${e.type}/${e.id as string}`);
        }
      }
      for (const e of entries) if (e.resource) rewriteReferences(e.resource, idMap);
      const sorted = [...entries].sort((a, b) => ORDER[a.method] - ORDER[b.method] || a.index - b.index);
      for (const e of sorted.filter((x) => x.method === 'DELETE')) {
        out[e.index] = await runEntry(tx, ctx, e, budget).catch((err: unknown) => {
          throw inEntry(e, err);
        });
      }
      const now = ctx.clock();
      const store = async (batch: typeof creates): Promise<void> => {
        const prepared: PreparedWrite[] = batch.map(({ e, id }) => {
          try {
            return prepareWrite(ctx, e.resource as Resource, id, 1, now);
          } catch (err) {
            throw inEntry(e, err);
          }
        });
        await commitCreates(tx, ctx, prepared);
        batch.forEach(({ e }, i) => (out[e.index] = createdResult(prepared[i] as PreparedWrite)));
      };
      // Creates without conditional references are stored first, so that the searches of the others see them.
      const waits = creates.map(({ e }) => hasConditionalReference(e.resource, ctx.fhirBase));
      const waiting = creates.filter((_, i) => waits[i]);
      await store(creates.filter((_, i) => !waits[i]));
      for (const e of sorted) {
        // What the transaction writes: creates still waiting, updates and patches (a DELETE or a read has no body).
        if (out[e.index] || e.action || !e.resource || !['POST', 'PUT', 'PATCH'].includes(e.method)) continue;
        await refs.resolve(tx, e.resource).catch((err: unknown) => {
          throw inEntry(e, err);
        });
      }
      if (waiting.length) await store(waiting);
      for (const e of sorted) {
        if (e.method === 'DELETE' || out[e.index]) continue;
        if (e.method === 'POST') {
          throw inEntry(
            e,
            new FhirError(
              'not-supported',
              'POST to an operation is not supported in a transaction',
              'bundle.post-action',
            ),
          );
        }
        out[e.index] = await runEntry(tx, ctx, e, budget).catch((err: unknown) => {
          throw inEntry(e, err);
        });
      }
      return out as FhirResult[];
    });
    const text = bundleToJson(
      {
        type: 'transaction-response',
        entry: results.map((r): BundleEntryText => resultEntry(r, ctx.fhirBase)),
      },
      randomUUID(),
    );
    return { status: 200, body: new RawJson(text) };
  }
}
