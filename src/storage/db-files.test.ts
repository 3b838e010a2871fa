// The database FileStore behaves as the local one: appends report the new size, truncate cuts back (also inside a
// chunk), reads stream every chunk in order, deleteDir removes a job's files only, and keys are checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../test/support/db.js';
import type { Db, Queryable } from './db.js';
import { dbFileStore } from './db-files.js';
import { InvalidFileKeyError, type FileStore } from './files.js';

async function text(store: FileStore, key: string): Promise<string | undefined> {
  const stream = await store.read(key);
  if (!stream) return undefined;
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(Buffer.from(chunk as Uint8Array));
  return Buffer.concat(parts).toString('utf8');
}

describe.each(testDatabases())('dbFileStore on $name', ({ open }) => {
  let db: Db;
  let store: FileStore;
  beforeAll(async () => {
    db = await open();
    store = dbFileStore(db);
  });
  afterAll(async () => db?.close());

  it('appends, truncates inside a chunk, and streams many chunks in order', async () => {
    const key = 'exports/job-1/Patient.ndjson';
    expect(await text(store, key)).toBeUndefined();
    expect(await store.append(key, 'é1\n')).toBe(4);
    expect(await store.append(key, '22\n')).toBe(7);
    expect(await store.size(key)).toBe(7);
    expect(await store.append(key, '')).toBe(7);
    await store.truncate(key, 5); // inside the second chunk
    expect(await text(store, key)).toBe('é1\n2');
    expect(await store.append(key, '\n')).toBe(6);
    await store.truncate(key, 4); // on a chunk boundary
    expect(await text(store, key)).toBe('é1\n');
    const lines = Array.from({ length: 30 }, (_, i) => `${i}\n`);
    for (const l of lines) await store.append(key, l);
    expect(await text(store, key)).toBe(`é1\n${lines.join('')}`);
  });

  it('puts whole byte files (several chunks, empty ones too), replacing an earlier put', async () => {
    const big = Buffer.alloc(2.5 * 1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) % 256;
    await store.put('binary/b-x/1', big);
    const read = async (key: string): Promise<Buffer | undefined> => {
      const stream = await store.read(key);
      if (!stream) return undefined;
      const parts: Buffer[] = [];
      for await (const chunk of stream) parts.push(Buffer.from(chunk as Uint8Array));
      return Buffer.concat(parts);
    };
    expect((await read('binary/b-x/1'))?.equals(big)).toBe(true);
    expect(await store.size('binary/b-x/1')).toBe(big.length);
    await store.put('binary/b-x/1', Uint8Array.from([0, 255, 0x80]));
    expect([...((await read('binary/b-x/1')) ?? [])]).toEqual([0, 255, 0x80]);
    await store.put('binary/b-x/2', new Uint8Array(0));
    expect((await read('binary/b-x/2'))?.length).toBe(0);
    expect(await store.size('binary/b-x/2')).toBe(0);
    expect(await store.size('binary/b-x/3')).toBeUndefined();
    await store.deleteDir('binary/b-x');
    expect(await read('binary/b-x/1')).toBeUndefined();
  });

  it('stores a large append as chunks of bounded size, never splitting a character', async () => {
    // Every text a query hands back is recorded: none may be larger than a chunk, however large the append.
    const returned: number[] = [];
    const recording: Queryable = {
      async query<T>(sql: string, params?: readonly unknown[]) {
        const r = await db.query<T>(sql, params);
        for (const row of r.rows as Record<string, unknown>[])
          if (typeof row.data === 'string') returned.push(Buffer.byteLength(row.data));
        return r;
      },
    };
    const small = dbFileStore(recording, { chunkBytes: 5 });
    const key = 'exports/job-pieces/Patient.ndjson';
    const page = 'éa😀b\n'.repeat(7); // 2- and 4-byte characters across every 5-byte boundary
    const size = Buffer.byteLength(page);
    expect(await small.append(key, page)).toBe(size);
    expect(await small.append(key, 'x\n12345')).toBe(size + 7);
    expect(await text(small, key)).toBe(`${page}x\n12345`);
    expect(returned.length).toBeGreaterThan(10);
    expect(Math.max(...returned)).toBeLessThanOrEqual(5);
    // A checkpoint lies where an append ended: truncating there (inside the last chunks) keeps the first page whole.
    await small.truncate(key, size + 1);
    expect(await text(small, key)).toBe(`${page}x`);
    await small.truncate(key, size);
    expect(await text(small, key)).toBe(page);
  });

  it('reads a chunk larger than its read window, as an earlier version wrote them', async () => {
    const whole = dbFileStore(db, { chunkBytes: 1024 * 1024 });
    const key = 'exports/job-old/Patient.ndjson';
    const page = (c: string): string => `${c.repeat(100 * 1024 - 1)}\n`;
    await whole.append(key, page('a'));
    await whole.append(key, page('b'));
    await whole.append(key, 'c\n');
    const narrow = dbFileStore(db, { readWindow: 64 * 1024 });
    expect(await text(narrow, key)).toBe(`${page('a')}${page('b')}c\n`);
    expect(await text(store, key)).toBe(`${page('a')}${page('b')}c\n`);
  });

  it('deletes the files of one directory only', async () => {
    await store.append('exports/a/Patient.ndjson', 'a\n');
    await store.append('exports/a/Observation.2.ndjson', 'b\n');
    await store.append('exports/ab/Patient.ndjson', 'c\n');
    await store.deleteDir('exports/a');
    expect(await text(store, 'exports/a/Patient.ndjson')).toBeUndefined();
    expect(await text(store, 'exports/a/Observation.2.ndjson')).toBeUndefined();
    expect(await text(store, 'exports/ab/Patient.ndjson')).toBe('c\n');
  });

  it.each(['..', 'exports/../x', 'exports/.hidden', 'exports//x', 'exports/a%'])(
    'refuses the key %j',
    async (key) => {
      await expect(store.read(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
      await expect(store.append(key, 'x')).rejects.toBeInstanceOf(InvalidFileKeyError);
      await expect(store.put(key, new Uint8Array(1))).rejects.toBeInstanceOf(InvalidFileKeyError);
      await expect(store.truncate(key, 0)).rejects.toBeInstanceOf(InvalidFileKeyError);
      await expect(store.deleteDir(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
      await expect(store.size(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
    },
  );
});
