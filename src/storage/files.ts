// Files written by jobs (bulk export NDJSON) and Binary contents behind one interface, so that an S3-compatible store can implement it
// later (append = multipart upload parts, truncate = drop the parts after a checkpoint). Keys are relative paths
// such as `exports/<jobId>/Patient.ndjson`; the local implementation keeps them under `<dataDir>/files`.
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';

export interface FileStore {
  /** Appends text (or its UTF-8 bytes) to a file, creating it, and returns its new size in bytes. */
  append(key: string, text: string | Buffer): Promise<number>;
  /** Appends bytes as they are, not text (a Parquet file written a row group at a time), and returns the new size. */
  appendBytes(key: string, bytes: Uint8Array): Promise<number>;
  /** Writes a whole file of bytes (a Binary's content), replacing any file of that key. */
  put(key: string, bytes: Uint8Array): Promise<void>;
  /** Cuts a file back to `size` bytes (a resumed job drops what was written after its last checkpoint). */
  truncate(key: string, size: number): Promise<void>;
  /** A stream of the file, or undefined when it does not exist. */
  read(key: string): Promise<Readable | undefined>;
  /** The file's size in bytes, or undefined when it does not exist (a response's length, known before it is sent). */
  size(key: string): Promise<number | undefined>;
  /** Deletes every file whose key starts with `prefix/`. */
  deleteDir(prefix: string): Promise<void>;
}

/**
 * Texts and bytes copied into one Buffer (text as UTF-8), with a newline after each part when `lines` is set: one
 * allocation outside the JavaScript heap, sized first, instead of a joined string.
 */
export function concatUtf8(parts: readonly (string | Uint8Array)[], lines = false): Buffer {
  let size = lines ? parts.length : 0;
  for (const p of parts) size += typeof p === 'string' ? Buffer.byteLength(p, 'utf8') : p.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const p of parts) {
    if (typeof p === 'string') at += out.write(p, at, 'utf8');
    else {
      out.set(p, at);
      at += p.length;
    }
    if (lines) out[at++] = 0x0a;
  }
  return out;
}

/** A key that is not a `/`-separated list of plain file names; nothing is read, written or deleted. */
export class InvalidFileKeyError extends Error {
  constructor(key: string) {
    super(`invalid file key: ${key.slice(0, 200)}`);
    this.name = 'InvalidFileKeyError';
  }
}

/**
 * A plain file name: letters, digits, `_`, `-` and inner dots, not starting with a dot — so never `.`, `..`, a
 * hidden file, a separator, a drive letter or an empty segment, whatever the platform.
 */
export function isPlainFileName(name: string): boolean {
  return /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/.test(name);
}

export function localFileStore(root: string): FileStore {
  const base = path.resolve(root);
  const resolve = (key: string): string => {
    if (!key.split('/').every(isPlainFileName)) throw new InvalidFileKeyError(key);
    const file = path.resolve(base, key);
    // Belt and braces: whatever a future key rule allows, nothing outside the root is touched.
    if (!file.startsWith(base + path.sep)) throw new InvalidFileKeyError(key);
    return file;
  };
  return {
    async append(key, text) {
      const file = resolve(key);
      await fs.promises.mkdir(path.dirname(file), { recursive: true });
      await fs.promises.appendFile(file, text);
      return (await fs.promises.stat(file)).size;
    },
    async appendBytes(key, bytes) {
      const file = resolve(key);
      await fs.promises.mkdir(path.dirname(file), { recursive: true });
      await fs.promises.appendFile(file, bytes);
      return (await fs.promises.stat(file)).size;
    },
    async put(key, bytes) {
      const file = resolve(key);
      await fs.promises.mkdir(path.dirname(file), { recursive: true });
      await fs.promises.writeFile(file, bytes);
    },
    async truncate(key, size) {
      const file = resolve(key);
      await fs.promises.mkdir(path.dirname(file), { recursive: true });
      const handle = await fs.promises.open(file, 'a');
      try {
        await handle.truncate(size);
      } finally {
        await handle.close();
      }
    },
    async read(key) {
      const file = resolve(key);
      try {
        const handle = await fs.promises.open(file, 'r');
        return handle.createReadStream();
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
    },
    async size(key) {
      try {
        return (await fs.promises.stat(resolve(key))).size;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw err;
      }
    },
    async deleteDir(prefix) {
      await fs.promises.rm(resolve(prefix), { recursive: true, force: true });
    },
  };
}
