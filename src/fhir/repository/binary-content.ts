// Binary content in the file store, not in the resource row (https://hl7.org/fhir/R4/binary.html). Each version of a
// Binary written with a file store has its bytes under `binary/b-<id>/<versionId>` (the `b-` prefix keeps ids such
// as `.x` plain file names); its row keeps contentType, securityContext and `url` (`Binary/<id>`), never `data`. So
// the key is derived from the row: there is no stored pointer for a client to see or forge.
import { Readable } from 'node:stream';
import type { FileStore } from '../../storage/files.js';
import { assertSecurityContextRead, securityContextTarget } from '../access.js';
import { FhirError } from '../outcome.js';
import { RawBytes, RawJson, StreamedJson, type FhirResult } from '../result.js';
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

/**
 * The largest content a PATCH of a Binary works on (3 MiB, 4 MiB of base64): a patch is applied to the resource as
 * clients see it, `data` included, held whole with its copies, so beyond this a small request would build strings
 * of tens of megabytes. A PUT replaces a larger content (streamed reads, the upload's own limits).
 */
export const PATCH_BINARY_BYTES = 3 * 1024 * 1024;

/** A Binary row's resource with its content as base64 `data` (rows written without a file store hold it inline). */
export async function binaryWithData(ctx: RepoContext, row: StoredRow): Promise<Resource> {
  const resource = JSON.parse(row.json) as Resource;
  assertSecurityContextRead(ctx.actor, resource.securityContext, ctx.fhirBase);
  if (typeof resource.data === 'string' || !ctx.binaries) return resource;
  const key = binaryKey(row.id, row.version_id);
  const size = (await ctx.binaries.size(key)) ?? 0;
  if (size > PATCH_BINARY_BYTES) {
    throw new FhirError(
      'too-costly',
      `Binary/${row.id}: its content (${size} bytes) is more than a PATCH works on (${PATCH_BINARY_BYTES} bytes); ` +
        'replace it with PUT',
      'rest.patch.binary-too-large',
    );
  }
  const bytes = await bytesOf(await ctx.binaries.read(key));
  return bytes.length === 0 ? resource : { ...resource, data: bytes.toString('base64') };
}

/**
 * Bytes encoded per piece: a multiple of 3, so that the pieces' base64 joined is the whole content's, and 64 KiB of
 * base64, below V8's large-object size (128 KB as a string), so each dies young.
 */
const BASE64_PIECE = 48 * 1024;

/** The characters of `bytes` bytes as base64 (with padding). */
const base64Length = (bytes: number): number => 4 * Math.ceil(bytes / 3);

/**
 * The content of `key` as base64 in pieces, read from the file store as the response is sent: at most a piece and
 * a file store chunk are held at once (issue 25 point 7: eight JSON reads of a 50 MiB Binary built ~70 MB strings
 * each). Bytes that do not fill a group of 3 wait for the next chunk. The size announced must be the size read.
 */
async function* base64Pieces(files: FileStore, key: string, size: number): AsyncGenerator<string> {
  const stream = await files.read(key);
  let carry = Buffer.alloc(0);
  let read = 0;
  for await (const chunk of stream ?? []) {
    let bytes = Buffer.from(chunk as Uint8Array);
    read += bytes.length;
    if (carry.length > 0) {
      const fill = Math.min(3 - carry.length, bytes.length);
      carry = Buffer.concat([carry, bytes.subarray(0, fill)]);
      bytes = bytes.subarray(fill);
      if (carry.length < 3) continue;
      yield carry.toString('base64');
      carry = Buffer.alloc(0);
    }
    const whole = bytes.length - (bytes.length % 3);
    for (let at = 0; at < whole; at += BASE64_PIECE)
      yield bytes.toString('base64', at, Math.min(at + BASE64_PIECE, whole));
    carry = Buffer.from(bytes.subarray(whole));
  }
  if (carry.length > 0) yield carry.toString('base64');
  if (read !== size) throw new Error(`${key}: ${read} bytes read, ${size} expected`);
}

/**
 * The FHIR JSON body of a read of a Binary row: with content in the file store, the resource with its `data`
 * streamed (StreamedJson); without (rows written without a file store hold `data` inline), the row's JSON.
 */
export async function binaryJson(ctx: RepoContext, row: StoredRow): Promise<RawJson | StreamedJson> {
  const resource = JSON.parse(row.json) as Resource;
  assertSecurityContextRead(ctx.actor, resource.securityContext, ctx.fhirBase);
  const files = ctx.binaries;
  if (typeof resource.data === 'string' || !files) return new RawJson(JSON.stringify(resource));
  const key = binaryKey(row.id, row.version_id);
  const size = (await files.size(key)) ?? 0;
  if (size === 0) return new RawJson(JSON.stringify(resource));
  return new StreamedJson(JSON.stringify(resource), 'data', base64Length(size), () =>
    base64Pieces(files, key, size),
  );
}

/**
 * The most base64 `data` one batch or transaction response carries (4 MiB, 3 MiB of content, in all its entries).
 * A Bundle is built whole in memory and is not counted as a large response, so Binary contents inlined into it are
 * bounded; beyond, the read entry answers 422 naming the limit and the Binary is read on its own (streamed).
 */
export const BUNDLE_BINARY_DATA = 4 * 1024 * 1024;

/** What a Bundle being answered may still inline (BUNDLE_BINARY_DATA at first). */
export interface InlineBudget {
  left: number;
}

/** A read's result made fit for a Bundle entry: a streamed Binary JSON read whole, within `budget`. */
export async function inlined(result: FhirResult, budget: InlineBudget, what: string): Promise<FhirResult> {
  const body = result.body;
  if (!(body instanceof StreamedJson)) return result;
  if (body.valueLength > budget.left) {
    throw new FhirError(
      'too-costly',
      `${what}: its content (${body.valueLength} characters of base64 data) does not fit in a Bundle, which ` +
        `carries at most ${BUNDLE_BINARY_DATA} in all; read ${what} on its own`,
      'bundle.binary-too-large',
    );
  }
  budget.left -= body.valueLength;
  return { ...result, body: new RawJson(await body.text()) };
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
  if (typeof resource.data === 'string' || !ctx.binaries) {
    const bytes = Buffer.from(typeof resource.data === 'string' ? resource.data : '', 'base64');
    return new RawBytes(bytes, type, bytes.length);
  }
  const key = binaryKey(row.id, row.version_id);
  return new RawBytes(
    Readable.from(opened(ctx.binaries, key), { objectMode: false }),
    type,
    (await ctx.binaries.size(key)) ?? 0,
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
