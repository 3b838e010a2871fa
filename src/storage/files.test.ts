// The local FileStore touches only plain file names below its root (issue 12 point 15): `.`, `..`, hidden files,
// absolute paths, empty segments and separators other than `/` are refused before any file system call.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidFileKeyError, isPlainFileName, localFileStore } from './files.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-files-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('localFileStore keys', () => {
  const root = path.join(dir, 'files');
  const store = localFileStore(root);
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(path.join(dir, 'outside.ndjson'), 'secret\n');
  fs.mkdirSync(path.join(root, 'exports', 'job'), { recursive: true });
  fs.writeFileSync(path.join(root, 'exports', 'job', '.hidden'), 'hidden\n');

  const bad = [
    '..',
    '.',
    '../outside.ndjson',
    'exports/../../outside.ndjson',
    'exports/./job',
    'exports/job/.hidden',
    '/etc/passwd',
    'exports//job',
    'exports/job/',
    '',
    'exports\\job',
    'exports/job/a b',
    `exports/${'x'.repeat(200)}`,
  ];

  it.each(bad)('refuses %j for every operation', async (key) => {
    await expect(store.read(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
    await expect(store.append(key, 'x')).rejects.toBeInstanceOf(InvalidFileKeyError);
    await expect(store.put(key, new Uint8Array(1))).rejects.toBeInstanceOf(InvalidFileKeyError);
    await expect(store.truncate(key, 0)).rejects.toBeInstanceOf(InvalidFileKeyError);
    await expect(store.deleteDir(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
    await expect(store.size(key)).rejects.toBeInstanceOf(InvalidFileKeyError);
    expect(fs.readFileSync(path.join(dir, 'outside.ndjson'), 'utf8')).toBe('secret\n');
    expect(fs.existsSync(path.join(root, 'exports', 'job', '.hidden'))).toBe(true);
  });

  it('accepts plain names, with inner dots', async () => {
    for (const name of ['Patient.ndjson', 'a..b', 'job-1_2', '0']) expect(isPlainFileName(name)).toBe(true);
    expect(await store.append('exports/job/Patient.ndjson', 'a\n')).toBe(2);
    expect(await store.read('exports/job/Missing.ndjson')).toBeUndefined();
    await store.put('exports/job/bytes', Uint8Array.from([0, 255, 1]));
    await store.put('exports/job/bytes', Uint8Array.from([0, 255]));
    expect([...fs.readFileSync(path.join(root, 'exports', 'job', 'bytes'))]).toEqual([0, 255]);
    expect(await store.size('exports/job/bytes')).toBe(2);
    expect(await store.size('exports/job/Missing.ndjson')).toBeUndefined();
    await store.deleteDir('exports/job');
    expect(fs.existsSync(path.join(root, 'exports', 'job'))).toBe(false);
  });
});
