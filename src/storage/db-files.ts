// A FileStore in the database (the `file_chunks` table): with PostgreSQL every instance reads and writes the same
// files, so any instance serves any job's export files (issue 13). An appended text (migration 009) and a Binary's
// content, `put` whole as bytes (migration 010), are stored as chunks of at most CHUNK bytes; a read streams them
// a window of a few megabytes at a time, so memory stays flat however large the file or an appended page.
import path from 'node:path';
import { Readable } from 'node:stream';
import type { Db, Queryable } from './db.js';
import { concatUtf8, InvalidFileKeyError, isPlainFileName, localFileStore, type FileStore } from './files.js';

/**
 * The most bytes one stored chunk holds. An export appends pages of 2,000 resources, often megabytes, and a
 * download held whole chunks as JavaScript strings: 8 of them per query, ~27 MB, and more downloads ran at once as
 * files grew. A chunk of 32 KiB is at most 64 KB as a string, below V8's large-object size (128 KB), so it is
 * allocated young and dies young. A Binary's content is `put` in chunks of the same size.
 */
const CHUNK = 32 * 1024;
/**
 * A download reads the chunks that begin within this many bytes after the last one read: about 2 MiB per query,
 * so that under load a download waits for a pooled connection a few times per 100 MB, not hundreds; the next window
 * is read while one is sent, so a download holds about two windows (each as strings, then as one Buffer). A chunk
 * beyond that (one larger, written by an earlier version) is read alone.
 */
const READ_WINDOW = 2 * 1024 * 1024;

/** `bytes` cut into pieces of at most `max` bytes (at least 4), never inside a UTF-8 character. */
function utf8Pieces(bytes: Buffer, max: number): Buffer[] {
  const pieces: Buffer[] = [];
  for (let start = 0; start < bytes.length;) {
    let end = Math.min(start + max, bytes.length);
    // A continuation byte (10xxxxxx) belongs to the character begun before it.
    while (end < bytes.length && ((bytes[end] as number) & 0xc0) === 0x80) end--;
    pieces.push(bytes.subarray(start, end));
    start = end;
  }
  return pieces;
}

function checked(key: string): string {
  if (!key.split('/').every(isPlainFileName)) throw new InvalidFileKeyError(key);
  return key;
}

/** The end of the file's last chunk, or undefined when it has none. */
async function sizeOf(db: Queryable, key: string): Promise<number | undefined> {
  const r = await db.query<{ end: string }>(
    `SELECT "offset" + coalesce(octet_length(data), octet_length(bytes)) AS end FROM file_chunks WHERE key = $1 ORDER BY "offset" DESC LIMIT 1`,
    [key],
  );
  const end = r.rows[0]?.end;
  return end === undefined ? undefined : Number(end);
}

/** Rows inserted per statement when a file is written: 4 MiB of 32 KiB chunks. */
const INSERT_ROWS = 128;

/** Chunks (`data`: text as UTF-8 bytes, or `bytes`) stored one after another from `start`; returns the new end. */
async function insertChunks(
  db: Queryable,
  column: 'data' | 'bytes',
  key: string,
  start: number,
  pieces: readonly Buffer[],
): Promise<number> {
  let end = start;
  for (let i = 0; i < pieces.length; i += INSERT_ROWS) {
    const values: unknown[] = [key];
    const rows = pieces.slice(i, i + INSERT_ROWS).map((piece) => {
      values.push(end, piece);
      end += piece.length;
      return `($1, $${values.length - 1}, $${values.length})`;
    });
    await db.query(`INSERT INTO file_chunks (key, "offset", ${column}) VALUES ${rows.join(', ')}`, values);
  }
  return end;
}

/** `chunkBytes`, `readWindow`: see CHUNK and READ_WINDOW (other sizes in tests). */
export function dbFileStore(
  db: Queryable,
  { chunkBytes = CHUNK, readWindow = READ_WINDOW }: { chunkBytes?: number; readWindow?: number } = {},
): FileStore {
  return {
    async append(key, text) {
      checked(key);
      // One writer per file (the job's worker), so the end read here is still the end when the chunks are inserted.
      const bytes = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
      return insertChunks(
        db,
        'data',
        key,
        (await sizeOf(db, key)) ?? 0,
        utf8Pieces(bytes, Math.max(4, chunkBytes)),
      );
    },
    async appendBytes(key, bytes) {
      checked(key);
      // Stored as `bytes` chunks (not `data` text: any byte sequence), cut anywhere; one writer per file, as above.
      const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      const pieces: Buffer[] = [];
      for (let at = 0; at < buf.length; at += chunkBytes) pieces.push(buf.subarray(at, at + chunkBytes));
      return insertChunks(db, 'bytes', key, (await sizeOf(db, key)) ?? 0, pieces);
    },
    async put(key, bytes) {
      checked(key);
      // Each version of a Binary has its own key and one writer; a put that failed half-way is replaced by the retry.
      await db.query(`DELETE FROM file_chunks WHERE key = $1`, [key]);
      const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      // An empty content is one empty chunk, so that the file exists.
      const pieces: Buffer[] = [];
      for (let at = 0; at === 0 || at < buf.length; at += chunkBytes)
        pieces.push(buf.subarray(at, at + chunkBytes));
      await insertChunks(db, 'bytes', key, 0, pieces);
    },
    async truncate(key, size) {
      checked(key);
      await db.query(`DELETE FROM file_chunks WHERE key = $1 AND "offset" >= $2`, [key, size]);
      await db.query(
        // Sizes are byte counts; a cut is where an earlier append ended, so never inside a character.
        `UPDATE file_chunks
         SET data = convert_from(substring(convert_to(data, 'UTF8') FROM 1 FOR ($2::bigint - "offset")::int), 'UTF8')
         WHERE key = $1 AND "offset" < $2 AND "offset" + octet_length(data) > $2`,
        [key, size],
      );
    },
    async read(key) {
      checked(key);
      const first = await db.query<{ offset: string }>(
        `SELECT "offset" FROM file_chunks WHERE key = $1 LIMIT 1`,
        [key],
      );
      if (first.rows.length === 0) return undefined;
      type Chunk = { offset: string; data: string | null; bytes: Uint8Array | null };
      const columns = `SELECT "offset", data, bytes FROM file_chunks WHERE key = $1 AND "offset" > $2`;
      /** The chunks after `after`: those that begin within the window, else the next one alone. */
      const windowAfter = async (after: number): Promise<Chunk[]> => {
        // Chunks are contiguous, so the next one begins within the window of the last one's start.
        const { rows } = await db.query<Chunk>(`${columns} AND "offset" <= $2 + $3 ORDER BY "offset"`, [
          key,
          after,
          readWindow,
        ]);
        if (rows.length > 0) return rows;
        return (await db.query<Chunk>(`${columns} ORDER BY "offset" LIMIT 1`, [key, after])).rows;
      };
      return Readable.from(
        (async function* () {
          let next = windowAfter(-1);
          for (;;) {
            const rows = await next;
            if (rows.length === 0) return;
            // The next window is read while this one is sent (a download waits for the database once, not once
            // per window); a download given up meanwhile drops it.
            next = windowAfter(Number((rows[rows.length - 1] as Chunk).offset));
            next.catch(() => undefined);
            // Copied into one Buffer at once, so the rows' strings die young instead of living (and being promoted
            // to the old generation) while a slow client is sent them.
            yield concatUtf8(rows.map((r) => r.bytes ?? r.data ?? ''));
          }
        })(),
        { objectMode: false },
      );
    },
    async size(key) {
      return sizeOf(db, checked(key));
    },
    async deleteDir(prefix) {
      checked(prefix);
      await db.query(`DELETE FROM file_chunks WHERE starts_with(key, $1)`, [`${prefix}/`]);
    },
  };
}

/**
 * Where job files live: in PostgreSQL when that is a shared database (every instance reaches it), else (the
 * embedded database, one process) under `dataDir`.
 */
export function fileStoreFor(db: Db, dataDir: string, embedded = db.kind !== 'postgres'): FileStore {
  return embedded ? localFileStore(path.join(dataDir, 'files')) : dbFileStore(db);
}
