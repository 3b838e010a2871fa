// The database FileStore behaves as the local one: appends report the new size, truncate cuts back (also inside a
// chunk), reads stream every chunk in order, deleteDir removes a job's files only, and keys are checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../test/support/db.js';
import type { Db } from './db.js';
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
      await expect(store.truncate(key, 0)).rejects.toBeInstanceOf(InvalidFileKeyError);
      await expect(store.deleteDir(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
    },
  );
});
