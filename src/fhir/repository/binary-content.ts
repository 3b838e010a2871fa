// Binary content in the file store, not in the resource row (https://hl7.org/fhir/R4/binary.html). Each version of a
// Binary written with a file store has its bytes under `binary/b-<id>/<versionId>` (the `b-` prefix keeps ids such
// as `.x` plain file names); its row keeps contentType, securityContext and `url` (`Binary/<id>`), never `data`. So
// the key is derived from the row: there is no stored pointer for a client to see or forge.
import { Readable } from 'node:stream';
import type { FileStore } from '../../storage/files.js';
import { assertSecurityContextRead, securityContextTarget } from '../access.js';
import { FhirError } from '../outcome.js';
import { RawBytes, RawJson } from '../result.js';
import type { Resource } from '../types.js';
import type { RepoContext } from './context.js';
import type { PreparedWrite } from './prepare.js';
import type { StoredRow } from './store.js';

export const binaryDirKey = (id: string): string => `binary/b-${id}`;
export const binaryKey = (id: string, versionId: number): string => `${binaryDirKey(id)}/${versionId}`;

/**
 * Takes `data` (base64, already validated) out of a Binary about to be stored, and sets Medplum's `Binary.url` (a
 * server-owned element of the definitions Cinder validates with) to the Binary's own relative URL, which clients
 * such as MedplumClient.createAttachment put into Attachment.url. No `data` is stored as no content.
 */
export function extractBinaryData(resource: Resource): { resource: Resource; content: Buffer } {
  const { data, url: _url, ...rest } = resource;
  const content = typeof data === 'string' ? Buffer.from(data, 'base64') : Buffer.alloc(0);
  return { resource: { ...rest, url: `Binary/${resource.id as string}` }, content };
}

/**
 * A Binary about to be stored keeps a securityContext only when it resolves to a resource, `Type/id` (access.ts
 * securityContextTarget; an absolute URL of this server is stored as its `Type/id`): reads check access to that
 * type, so anything the check could not resolve would be a way round it. Every writer goes through prepareWrite.
 */
export function assertSecurityContextForm(resource: Resource, fhirBase: string): void {
  const context = resource.securityContext;
  if (context === undefined) return;
  const target = securityContextTarget(context, fhirBase);
  if (!target) {
    throw new FhirError(
      'invalid',
      'Binary.securityContext must be a reference <Type>/<id> to a resource of this server (a known resource type and a valid id, with no search, fragment, version or trailing slash)',
      'binary.security-context-form',
      { expression: ['Binary.securityContext'] },
    );
  }
  resource.securityContext = { ...(context as object), reference: target.reference };
}

/**
 * Writes the contents of the Binary versions about to be stored (every writer calls it after checkWriteRules, inside
 * its transaction when it has one). Every version is written, empty ones too, so that bytes left by a write whose
 * transaction failed are never served as a later version's.
 */
export async function storeBinaryContent(ctx: RepoContext, items: readonly PreparedWrite[]): Promise<void> {
  for (const it of items) {
    if (it.content && ctx.binaries)
      await ctx.binaries.put(binaryKey(it.resource.id as string, it.versionId), it.content);
  }
}

async function bytesOf(stream: Readable | undefined): Promise<Buffer> {
  if (!stream) return Buffer.alloc(0);
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(parts);
}

/** A Binary row's resource with its content as base64 `data` (rows written without a file store hold it inline). */
export async function binaryWithData(ctx: RepoContext, row: StoredRow): Promise<Resource> {
  const resource = JSON.parse(row.json) as Resource;
  assertSecurityContextRead(ctx.actor, resource.securityContext, ctx.fhirBase);
  if (typeof resource.data === 'string' || !ctx.binaries) return resource;
  const bytes = await bytesOf(await ctx.binaries.read(binaryKey(row.id, row.version_id)));
  return bytes.length === 0 ? resource : { ...resource, data: bytes.toString('base64') };
}

/** The FHIR JSON body of a read of a Binary row. */
export async function binaryJson(ctx: RepoContext, row: StoredRow): Promise<RawJson> {
  return new RawJson(JSON.stringify(await binaryWithData(ctx, row)));
}

/** A media type that can be sent as a Content-Type header; anything else is served as application/octet-stream. */
const MEDIA_TYPE = /^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;[\x20-\x7e]*)?$/;

/** The raw content of a Binary row, streamed from the file store, with the Binary's contentType. */
export async function binaryBytes(ctx: RepoContext, row: StoredRow): Promise<RawBytes> {
  const resource = JSON.parse(row.json) as Resource;
  assertSecurityContextRead(ctx.actor, resource.securityContext, ctx.fhirBase);
  const type =
    typeof resource.contentType === 'string' && MEDIA_TYPE.test(resource.contentType)
      ? resource.contentType
      : 'application/octet-stream';
  if (typeof resource.data === 'string' || !ctx.binaries)
    return new RawBytes(Buffer.from(typeof resource.data === 'string' ? resource.data : '', 'base64'), type);
  return new RawBytes(
    Readable.from(opened(ctx.binaries, binaryKey(row.id, row.version_id)), { objectMode: false }),
    type,
  );
}

/**
 * The file's chunks, opened only when the response is sent: a 304 (or a HEAD) never consumes the stream, and a file
 * opened for it would stay open. A missing file is an empty content (a Binary written without `data`).
 */
async function* opened(files: FileStore, key: string): AsyncGenerator<Buffer> {
  const stream = await files.read(key);
  if (stream) for await (const chunk of stream) yield Buffer.from(chunk as Uint8Array);
}

/** Deletes the contents of every version of these Binaries (`$expunge`). */
export async function deleteBinaryContents(files: FileStore, ids: readonly string[]): Promise<void> {
  for (const id of ids) await files.deleteDir(binaryDirKey(id));
}
