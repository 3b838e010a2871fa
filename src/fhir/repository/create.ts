// create and conditional create: https://hl7.org/fhir/R4/http.html#create, #ccreate
import type { WrittenVersion } from '../../audit/recorder.js';
import { splitAuditCreates } from './audit-events.js';
import type { Db } from '../../storage/db.js';
import { assertChainsReadable, assertWrite, searchScope } from '../access.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import { executeSearch } from '../search/execute.js';
import type { Resource } from '../types.js';
import type { RepoContext } from './context.js';
import { storeBinaryContent } from './binary-content.js';
import { prepareWrite, type PreparedWrite } from './prepare.js';
import { chainedTypes } from './search.js';
import { storeSecrets } from './secrets.js';
import { insertResources } from './store.js';
import { checkWriteRules } from './write-rules.js';
import { needsTransaction, parseProjectSearch, prepareCustomIndex } from './custom-index.js';
import type { Queryable } from '../../storage/db.js';
import type { OutboxEvent } from '../subscriptions/model.js';
import { writeChange } from '../subscriptions/outbox.js';

/** Writes already prepared first versions inside the caller's transaction. */
export async function commitCreates(
  tx: Queryable,
  ctx: RepoContext,
  all: readonly PreparedWrite[],
): Promise<void> {
  await checkWriteRules(tx, ctx, all);
  // A client's own AuditEvents go to the audit table (API.md §10), the rest are resources.
  const { rows, rest: items } = splitAuditCreates(all);
  await prepareCustomIndex(tx, ctx, items);
  await storeBinaryContent(ctx, items);
  await insertResources(tx, items, await createEvents(tx, ctx, items), rows);
  ctx.audit?.wrote(createdVersions(all));
  for (const it of items) {
    if (it.secrets.length)
      await storeSecrets(tx, it.resource.resourceType, it.resource.id as string, it.secrets);
  }
}

/** The subscription events of first versions (none without a subscription engine). */
export async function createEvents(
  db: Queryable,
  ctx: RepoContext,
  items: readonly PreparedWrite[],
): Promise<OutboxEvent[]> {
  if (!ctx.subscriptions) return [];
  return ctx.subscriptions.eventsFor(
    db,
    items.map((it) =>
      writeChange(
        'create',
        it.projectId,
        it.resource.resourceType,
        it.resource.id as string,
        it.versionId,
        it.resource,
      ),
    ),
  );
}

/**
 * Stores prepared first versions: as one statement, atomic on its own (no BEGIN/COMMIT round trips), unless something
 * beside the rows must be written with them (secrets; a Subscription's state), which takes a transaction.
 */
export async function storeCreates(db: Db, ctx: RepoContext, all: readonly PreparedWrite[]): Promise<void> {
  if (
    all.some((p) => p.secrets.length > 0 || p.resource.resourceType === 'Subscription') ||
    needsTransaction(all) ||
    ctx.audit?.provenance
  ) {
    await db.transaction((tx) => commitCreates(tx, ctx, all));
    return;
  }
  await checkWriteRules(db, ctx, all);
  const { rows, rest: items } = splitAuditCreates(all);
  await prepareCustomIndex(db, ctx, items);
  await storeBinaryContent(ctx, items);
  const events = await createEvents(db, ctx, items);
  // The request's AuditEvent of these creates goes into the same statement (API.md §10).
  const mark = ctx.audit?.mark();
  ctx.audit?.wrote(createdVersions(all));
  const own = ctx.audit?.takeWrites();
  try {
    await insertResources(db, items, events, own ? [...rows, own] : rows);
  } catch (err) {
    if (mark) ctx.audit?.rollback(mark);
    throw err;
  }
}

/** The versions first-version writes store, as the audit recorder hears of them. */
function createdVersions(items: readonly PreparedWrite[]): WrittenVersion[] {
  return items.map((it) => ({
    resourceType: it.resource.resourceType,
    id: it.resource.id as string,
    versionId: it.versionId,
    interaction: 'create',
    resource: it.resource,
  }));
}

export function createdResult(p: PreparedWrite): FhirResult {
  const r = p.resource;
  const body = p.revealedSecret ? { ...r, secret: p.revealedSecret } : r;
  return {
    status: 201,
    body,
    location: `${r.resourceType}/${r.id}/_history/${p.versionId}`,
    versionId: String(p.versionId),
    lastModified: p.lastUpdated,
  };
}

/** Parses an If-None-Exist value (`identifier=x&...`, optionally prefixed by `Type?`) into query params. */
export function parseConditionQuery(text: string): Record<string, string[]> {
  const q = text.includes('?') ? text.slice(text.indexOf('?') + 1) : text;
  const out: Record<string, string[]> = {};
  for (const [k, v] of new URLSearchParams(q)) (out[k] ??= []).push(v);
  if (Object.keys(out).length === 0) {
    throw new FhirError('invalid', 'The search condition is empty', 'rest.conditional-empty');
  }
  return out;
}

/**
 * Finds what a conditional create's (update's, delete's) criteria match (at most two, enough to decide). The caller must be
 * allowed to write the type so (checked first: the answer would otherwise show what the caller cannot write, e.g.
 * a member's condition on ClientApplication), and the search runs with the caller's read access, as its own search
 * would (members find only the AsyncJobs they started; chained parameters need read access to their targets).
 */
export async function matchCondition(
  db: Queryable,
  ctx: RepoContext,
  resourceType: string,
  condition: string,
  interaction: 'create' | 'update' | 'delete' = 'create',
): Promise<{ resourceType: string; id: string; json: string }[]> {
  assertWrite(ctx.actor, resourceType, interaction);
  if (resourceType === 'AuditEvent')
    throw new FhirError(
      'not-supported',
      'Conditional writes of AuditEvents are not supported',
      'audit.conditional',
    );
  const scope = searchScope(ctx.actor, ctx.author, resourceType, ctx.scope);
  const query = { ...parseConditionQuery(condition), _count: '2' };
  const req = await parseProjectSearch(db, ctx, resourceType, query);
  assertChainsReadable(ctx.actor, chainedTypes(req));
  const result = await executeSearch(db, req, scope);
  return result.matches;
}

export async function createResource(
  db: Db,
  ctx: RepoContext,
  input: Resource,
  opts: { ifNoneExist?: string; beforeCreate?: (input: Resource) => Promise<void> } = {},
): Promise<FhirResult> {
  if (opts.ifNoneExist) {
    const found = await matchCondition(db, ctx, input.resourceType, opts.ifNoneExist);
    if (found.length > 1) {
      throw new FhirError(
        'duplicate',
        'If-None-Exist matched more than one resource',
        'rest.ccreate-multiple',
        {
          status: 412,
        },
      );
    }
    const hit = found[0];
    if (hit) return { status: 200, body: new RawJson(hit.json), location: `${hit.resourceType}/${hit.id}` };
  }
  // A batch entry's conditional references (conditional-references.ts): resolved only when something is created.
  await opts.beforeCreate?.(input);
  const prepared = prepareWrite(ctx, input, ctx.newId(), 1, ctx.clock());
  await storeCreates(db, ctx, [prepared]);
  return createdResult(prepared);
}
