// One entry of a batch or transaction Bundle: parsing its request and turning results/errors into response
// entries. https://hl7.org/fhir/R4/http.html#transaction
import type { Queryable } from '../../storage/db.js';
import type { BundleEntryText } from '../bundle.js';
import { parseJson } from '../json/parse.js';
import { stringifyJson } from '../json/stringify.js';
import { FhirError, type OperationOutcome } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import { BUNDLE_BINARY_DATA, inlined, type InlineBudget } from './binary-content.js';
import type { RepoContext } from './context.js';
import { notModified } from '../not-modified.js';
import { conditionalDeleteInTx, conditionalPatchInTx, conditionalUpdateInTx } from './conditional.js';
import { deleteInTx } from './delete.js';
import { history } from './history.js';
import { patchInTx } from './patch.js';
import { readResource, vreadResource } from './read.js';
import { searchResources } from './search.js';
import { updateInTx } from './update.js';
import { assertBody, assertShape } from './prepare.js';
import { isResourceType } from '../definitions/index.js';

export interface ParsedEntry {
  index: number;
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'HEAD';
  type: string;
  id?: string;
  versionId?: string;
  /** `_history` (instance or type history) or `_search`. */
  action?: string;
  query: Record<string, string | string[]>;
  fullUrl?: string;
  resource?: Resource;
  ifNoneExist?: string;
  ifMatch?: string;
  /** GET: conditional read (answers 304 when the client's version is current). */
  ifNoneMatch?: string;
  ifModifiedSince?: string;
  /** PUT, PATCH, DELETE on `Type?search`: the search that picks the resource (conditional update/patch/delete). */
  condition?: string;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']);

function bad(index: number, message: string, code: string): FhirError {
  return new FhirError('invalid', `Bundle.entry[${index}]: ${message}`, code, {
    expression: [`Bundle.entry[${index}]`],
  });
}

export function parseEntry(raw: unknown, index: number, fhirBase: string): ParsedEntry {
  if (typeof raw !== 'object' || raw === null)
    throw bad(index, 'an entry must be an object', 'bundle.entry-shape');
  const e = raw as { fullUrl?: unknown; resource?: unknown; request?: Record<string, unknown> };
  const req = e.request;
  const method = typeof req?.method === 'string' ? req.method.toUpperCase() : '';
  if (!METHODS.has(method))
    throw bad(index, 'request.method must be GET, POST, PUT, PATCH or DELETE', 'bundle.entry-method');
  let url = typeof req?.url === 'string' ? req.url : '';
  if (url.startsWith(fhirBase + '/')) url = url.slice(fhirBase.length + 1);
  url = url.replace(/^\/+/, '');
  const [path = '', qs = ''] = url.split(/\?(.*)/s);
  const query: Record<string, string | string[]> = {};
  for (const [k, v] of new URLSearchParams(qs)) {
    const prev = query[k];
    query[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  const seg = path.split('/').filter((s) => s.length > 0);
  const type = seg[0] ?? '';
  if (!isResourceType(type))
    throw new FhirError(
      'not-found',
      `Bundle.entry[${index}]: unknown resource type ${type.slice(0, 64)}`,
      'bundle.entry-type',
    );
  const out: ParsedEntry = { index, method: method as ParsedEntry['method'], type, query };
  if (seg[1] === '_history' || seg[1] === '_search') out.action = seg[1];
  else if (seg[1] !== undefined) out.id = seg[1];
  if (seg[2] === '_history') {
    out.action = '_history';
    if (seg[3] !== undefined) out.versionId = seg[3];
  }
  if (typeof e.fullUrl === 'string') out.fullUrl = e.fullUrl;
  if (e.resource !== undefined) out.resource = assertBody(e.resource);
  if (typeof req?.ifNoneExist === 'string') out.ifNoneExist = req.ifNoneExist;
  if (typeof req?.ifMatch === 'string') out.ifMatch = req.ifMatch;
  if (typeof req?.ifNoneMatch === 'string') out.ifNoneMatch = req.ifNoneMatch;
  if (typeof req?.ifModifiedSince === 'string') out.ifModifiedSince = req.ifModifiedSince;
  if ((method === 'PUT' || method === 'DELETE' || method === 'PATCH') && !out.id) {
    if (out.action || qs === '')
      throw bad(index, `${method} needs a url of the form Type/id or Type?search`, 'bundle.entry-url');
    out.condition = qs;
  }
  if ((method === 'POST' || method === 'PUT') && !out.resource)
    throw bad(index, `${method} needs a resource`, 'bundle.entry-resource');
  if (out.resource && (method === 'POST' || method === 'PUT') && out.resource.resourceType !== type) {
    throw bad(
      index,
      `the resource type ${out.resource.resourceType} does not match the url`,
      'bundle.entry-mismatch',
    );
  }
  return out;
}

/**
 * A PATCH entry carries its JSON Patch as a Binary (R4 http.html#patch in a Bundle), or a FHIRPath Patch as the
 * Parameters resource itself (R4 fhirpatch.html).
 */
function patchOps(entry: ParsedEntry): unknown {
  const r = entry.resource as (Resource & { data?: string; contentType?: string }) | undefined;
  if (r?.resourceType === 'Parameters') return r;
  if (r?.resourceType === 'Binary' && typeof r.data === 'string') {
    try {
      return parseJson(Buffer.from(r.data, 'base64').toString('utf8'));
    } catch {
      throw bad(entry.index, 'the Binary does not hold a JSON Patch', 'bundle.entry-patch');
    }
  }
  throw bad(
    entry.index,
    'PATCH needs a Binary resource with a JSON Patch (application/json-patch+json) or a Parameters resource with a FHIRPath Patch',
    'bundle.entry-patch',
  );
}

/** What one Bundle's read entries may inline of Binary contents (binary-content.ts): one per Bundle answered. */
export const inlineBudget = (): InlineBudget => ({ left: BUNDLE_BINARY_DATA });

/** Runs a non-create entry (creates are batched by the callers); `budget` is shared by the entries of a Bundle. */
export async function runEntry(
  tx: Queryable,
  ctx: RepoContext,
  e: ParsedEntry,
  budget: InlineBudget = inlineBudget(),
): Promise<FhirResult> {
  const what = `${e.type}/${e.id ?? ''}`;
  switch (e.method) {
    case 'GET':
    case 'HEAD':
      if (e.action === '_history') {
        return e.versionId
          ? inlined(
              notModified(await vreadResource(tx, ctx, e.type, e.id as string, e.versionId), {
                ...(e.ifNoneMatch !== undefined ? { ifNoneMatch: e.ifNoneMatch } : {}),
              }),
              budget,
              `${what}/_history/${e.versionId}`,
            )
          : history(
              tx,
              ctx,
              e.type,
              e.id,
              e.query,
              `${ctx.fhirBase}/${e.type}${e.id ? `/${e.id}` : ''}/_history`,
            );
      }
      if (e.id) {
        const pre = {
          ...(e.ifNoneMatch !== undefined ? { ifNoneMatch: e.ifNoneMatch } : {}),
          ...(e.ifModifiedSince !== undefined ? { ifModifiedSince: e.ifModifiedSince } : {}),
        };
        return inlined(notModified(await readResource(tx, ctx, e.type, e.id), pre), budget, what);
      }
      return searchResources(tx, ctx, e.type, e.query, `${ctx.fhirBase}/${e.type}`);
    case 'PUT':
      if (e.condition) return conditionalUpdateInTx(tx, ctx, e.type, e.condition, e.resource as Resource);
      return updateInTx(
        tx,
        ctx,
        e.type,
        e.id as string,
        { ...(e.resource as Resource), id: (e.resource as Resource).id ?? e.id },
        e.ifMatch,
      );
    case 'PATCH':
      if (e.condition) return conditionalPatchInTx(tx, ctx, e.type, e.condition, patchOps(e));
      return patchInTx(tx, ctx, e.type, e.id as string, patchOps(e), e.ifMatch);
    case 'DELETE':
      if (e.condition) return conditionalDeleteInTx(tx, ctx, e.type, e.condition);
      return deleteInTx(tx, ctx, e.type, e.id as string);
    default:
      throw bad(e.index, `unexpected method ${e.method}`, 'bundle.entry-unexpected');
  }
}

const REASONS: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No Content',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  412: 'Precondition Failed',
  413: 'Payload Too Large',
  422: 'Unprocessable Entity',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export function statusLine(status: number): string {
  return `${status} ${REASONS[status] ?? ''}`.trim();
}

export function resultEntry(r: FhirResult, fhirBase: string): BundleEntryText {
  const out: BundleEntryText = { response: { status: statusLine(r.status) } };
  const response = out.response as NonNullable<BundleEntryText['response']>;
  if (r.location) response.location = r.location;
  if (r.versionId) response.etag = `W/"${r.versionId}"`;
  if (r.lastModified) response.lastModified = r.lastModified.toISOString();
  const body = r.body;
  if (body instanceof RawJson) out.resource = body.text;
  else if (body && (body as OperationOutcome).resourceType === 'OperationOutcome') response.outcome = body;
  else if (body) out.resource = stringifyJson(body);
  if (out.resource && r.location) {
    const m = /^([A-Za-z]+\/[A-Za-z0-9\-.]+)/.exec(r.location);
    if (m) out.fullUrl = `${fhirBase}/${m[1]}`;
  }
  return out;
}

export function errorEntry(err: FhirError): BundleEntryText {
  return { response: { status: statusLine(err.status), outcome: err.toOutcome() } };
}

/** Replaces every `reference` equal to a key of `map` (urn:uuid: fullUrls of created entries) in place. */
export function rewriteReferences(value: unknown, map: ReadonlyMap<string, string>): void {
  if (Array.isArray(value)) {
    for (const v of value) rewriteReferences(v, map);
  } else if (value && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    for (const [k, v] of Object.entries(obj)) {
      if (k === 'reference' && typeof v === 'string') {
        const to = map.get(v);
        if (to) obj[k] = to;
      } else if (typeof v === 'object' && v !== null) {
        rewriteReferences(v, map);
      }
    }
  }
}

export function assertBundle(
  body: unknown,
  maxEntries: number,
): { type: 'batch' | 'transaction'; entry: unknown[] } {
  // The Bundle itself is not depth-bounded: each entry's resource is (parseEntry), so a too deep entry of a batch
  // gets its own answer. Nothing walks the rest of the Bundle.
  const b = assertShape(body, 'Bundle') as Resource & { type?: unknown; entry?: unknown };
  if (b.type !== 'batch' && b.type !== 'transaction') {
    throw new FhirError(
      'invalid',
      'Only Bundles of type batch or transaction can be posted to the base',
      'bundle.type',
      {
        expression: ['Bundle.type'],
      },
    );
  }
  const entry = b.entry === undefined ? [] : b.entry;
  if (!Array.isArray(entry))
    throw new FhirError('invalid', 'Bundle.entry must be an array', 'bundle.entry-array');
  if (entry.length > maxEntries) {
    throw new FhirError(
      'too-long',
      `The Bundle has ${entry.length} entries; at most ${maxEntries} are accepted`,
      'bundle.too-many',
      {
        status: 413,
      },
    );
  }
  return { type: b.type, entry };
}
