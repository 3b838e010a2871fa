// A minimal reader of the regular files of a `.tgz` (gzip + POSIX ustar/pax tar,
// https://pubs.opengroup.org/onlinepubs/9699919799/utilities/pax.html#tag_20_92_13_06), as FHIR packages are published.
// Why not a library: the server has no tar dependency, and reading a package needs only regular files, their names
// (ustar prefix, pax `path`, GNU `L` long names) and sizes; links, devices and permissions are ignored.
import zlib from 'node:zlib';

export interface TarEntry {
  name: string;
  data: Buffer;
}

const BLOCK = 512;
/** A package larger than this unpacked is refused (hl7.fhir.r4.core unpacks to ~60 MB). */
export const MAX_UNPACKED = 512 * 1024 * 1024;

function field(buf: Buffer, offset: number, length: number): string {
  const raw = buf.subarray(offset, offset + length);
  const nul = raw.indexOf(0);
  return raw.subarray(0, nul < 0 ? raw.length : nul).toString('utf8');
}

function octal(buf: Buffer, offset: number, length: number): number {
  const text = field(buf, offset, length).trim();
  const n = text === '' ? 0 : parseInt(text, 8);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error('tar: malformed size field');
  return n;
}

/** The `path` record of a pax extended header (`<len> path=<value>\n` records). */
function paxPath(data: Buffer): string | undefined {
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    if (space < 0) break;
    const len = parseInt(data.subarray(at, space).toString('ascii'), 10);
    if (!Number.isSafeInteger(len) || len <= 0) break;
    const record = data.subarray(space + 1, at + len - 1).toString('utf8');
    if (record.startsWith('path=')) return record.slice(5);
    at += len;
  }
  return undefined;
}

/** The regular files of a gzip-compressed tar archive. Throws an Error for a damaged archive. */
export function readTarGz(gz: Buffer): TarEntry[] {
  const tar = zlib.gunzipSync(gz, { maxOutputLength: MAX_UNPACKED });
  const out: TarEntry[] = [];
  let longName: string | undefined;
  for (let at = 0; at + BLOCK <= tar.length;) {
    const header = tar.subarray(at, at + BLOCK);
    if (header.every((b) => b === 0)) break; // end of archive
    const size = octal(header, 124, 12);
    const type = String.fromCharCode(header[156] ?? 0);
    const start = at + BLOCK;
    if (start + size > tar.length) throw new Error('tar: truncated archive');
    const data = tar.subarray(start, start + size);
    at = start + Math.ceil(size / BLOCK) * BLOCK;
    if (type === 'x' || type === 'L') {
      longName = type === 'x' ? paxPath(data) : field(data, 0, data.length);
      continue;
    }
    if (type === 'g') continue;
    const prefix = field(header, 345, 155);
    const name = longName ?? (prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100));
    longName = undefined;
    if (type === '0' || type === '\0' || type === '7') out.push({ name, data });
  }
  return out;
}
