// Composition/<id>/$document (https://hl7.org/fhir/R4/composition-operation-document.html, API.md §11): the document
// Bundle of a stored Composition: the Composition first, then what it references (subject, encounter, authors,
// attesters, custodian, the entries of its sections at any nesting, and any other reference in it), then what those
// reference, one level further; only resources the caller may read. A reference that does not resolve to one is left
// out (the same for a missing resource and one the caller may not read, so the document tells neither). `persist`
// (storing the document) is not supported.
import type { Queryable } from '../../storage/db.js';
import { FhirError } from '../outcome.js';
import { readLiveRow } from '../repository/read.js';
import type { RepoContext } from '../repository/context.js';
import { RawJson, type FhirResult } from '../result.js';
import { operationParams } from './async-start.js';
import {
  collectReferences,
  documentBundleJson,
  fullUrlOf,
  readReferenced,
  type DocEntry,
} from './document-bundle.js';
import type { OperationDefinition, OperationInput } from './operation.js';

const ALLOWED = new Set(['persist', '_format', '_pretty']);

function checkParams(i: OperationInput): void {
  const q = operationParams(i.request);
  for (const k of Object.keys(q))
    if (!ALLOWED.has(k))
      throw new FhirError(
        'not-supported',
        `$document does not support the parameter ${k.slice(0, 64)}`,
        'document.param',
      );
  const persist = q.persist;
  if (persist === undefined) return;
  if (persist.length !== 1 || (persist[0] !== 'true' && persist[0] !== 'false'))
    throw new FhirError('invalid', 'persist must be true or false', 'document.persist');
  if (persist[0] === 'true')
    throw new FhirError(
      'not-supported',
      '$document does not store documents (persist=true); store the returned Bundle with POST Bundle',
      'document.persist-unsupported',
    );
}

/** The Composition's references in document order: the header's first, then the sections'. */
function compositionReferences(c: Record<string, unknown>, fhirBase: string): Set<string> {
  const refs = new Set<string>();
  for (const key of ['subject', 'encounter', 'author', 'attester', 'custodian'])
    collectReferences(c[key], fhirBase, refs);
  collectReferences(c.section, fhirBase, refs);
  const { section: _s, ...rest } = c;
  collectReferences(rest, fhirBase, refs);
  return refs;
}

export async function documentEntries(
  db: Queryable,
  ctx: RepoContext,
  first: DocEntry,
  firstRefs: Set<string>,
  already: Set<string>,
): Promise<DocEntry[]> {
  const entries: DocEntry[] = [first];
  const seen = new Set(already);
  const levelOne = await readReferenced(
    db,
    ctx,
    [...firstRefs].filter((r) => !seen.has(r)),
  );
  const next = new Set<string>();
  for (const r of levelOne) {
    seen.add(`${r.resourceType}/${r.id}`);
    entries.push({ fullUrl: fullUrlOf(ctx, r), json: r.json });
    collectReferences(JSON.parse(r.json), ctx.fhirBase, next);
  }
  const levelTwo = await readReferenced(
    db,
    ctx,
    [...next].filter((r) => !seen.has(r)),
  );
  for (const r of levelTwo) entries.push({ fullUrl: fullUrlOf(ctx, r), json: r.json });
  return entries;
}

async function document(db: Queryable, ctx: RepoContext, i: OperationInput): Promise<FhirResult> {
  checkParams(i);
  const row = await readLiveRow(db, ctx, 'Composition', i.id);
  const composition = JSON.parse(row.json) as Record<string, unknown>;
  const self = `Composition/${row.id}`;
  const entries = await documentEntries(
    db,
    ctx,
    { fullUrl: fullUrlOf(ctx, { resourceType: 'Composition', id: row.id }), json: row.json },
    compositionReferences(composition, ctx.fhirBase),
    new Set([self]),
  );
  return { status: 200, body: new RawJson(documentBundleJson(ctx, entries)) };
}

export const documentOperation: OperationDefinition = {
  code: 'document',
  level: 'instance',
  types: ['Composition'],
  affectsState: false,
  definition: 'http://hl7.org/fhir/OperationDefinition/Composition-document',
  run: (env, i) => document(env.db, i.ctx, i),
};
