// The shared conformance resources as reads and writes see them (API.md §9): any caller who may read the type reads
// them by id; a write to one of their ids answers 403, since they belong to no project. https://hl7.org/fhir/R4/http.html
import { isConformanceType } from '../conformance/model.js';
import { isSharedIndex } from '../conformance/shared-set.js';
import { FhirError } from '../outcome.js';
import { RawJson, type FhirResult } from '../result.js';
import type { Resource } from '../types.js';
import type { RepoContext } from './context.js';

/** The shared resource `<type>/<id>`, if the server has one. */
export async function sharedResource(
  ctx: RepoContext,
  type: string,
  id: string,
): Promise<Resource | undefined> {
  const shared = ctx.conformance?.shared;
  if (!shared || !isConformanceType(type)) return undefined;
  if (isSharedIndex(shared)) {
    await shared.ready();
    // Read directly, not through the LRU (a read serialises it once).
    return shared.entryById(type, id)?.read();
  }
  return shared.byId(type, id);
}

/** The read of a shared resource: its text, and its meta.versionId/lastUpdated when it has them. */
export function sharedReadResult(resource: Resource): FhirResult {
  const meta = resource.meta as { versionId?: unknown; lastUpdated?: unknown } | undefined;
  const last = typeof meta?.lastUpdated === 'string' ? new Date(meta.lastUpdated) : undefined;
  return {
    status: 200,
    body: new RawJson(JSON.stringify(resource)),
    ...(typeof meta?.versionId === 'string' ? { versionId: meta.versionId } : {}),
    ...(last && !Number.isNaN(last.getTime()) ? { lastModified: last } : {}),
  };
}

function hasShared(ctx: RepoContext, type: string, id: string): boolean {
  const shared = ctx.conformance?.shared;
  if (!shared || !isConformanceType(type)) return false;
  return isSharedIndex(shared)
    ? shared.entryById(type, id) !== undefined
    : shared.byId(type, id) !== undefined;
}

/**
 * Refuses a write to the id of a shared resource (PUT, PATCH, DELETE, and their Bundle entries); `code` names the
 * interaction in the error code. A project's own resource with that id (stored before a package brought it) stays
 * writable: callers ask only when the id is not the project's.
 */
export async function assertNotShared(
  ctx: RepoContext,
  type: string,
  id: string,
  code: string,
): Promise<void> {
  if (await hasShared(ctx, type, id)) {
    throw new FhirError(
      'forbidden',
      `${type}/${id} is a shared conformance resource: it is read-only`,
      `rest.${code}.shared`,
    );
  }
}

/**
 * Loads the shared set, if a write of `type` may ask it, before the write's transaction opens: its first load must not
 * happen while the transaction holds the (embedded database's single) connection.
 */
export async function warmShared(ctx: RepoContext, type: string): Promise<void> {
  const shared = ctx.conformance?.shared;
  if (shared && isConformanceType(type) && isSharedIndex(shared)) await shared.ready();
}
