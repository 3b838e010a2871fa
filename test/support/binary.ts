// A Cinder app whose file store is the one production picks (PostgreSQL's file_chunks on PostgreSQL, else a directory),
// and helpers shared by the Binary tests.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'vitest';
import { fileStoreFor } from '../../src/storage/db-files.js';
import type { Db } from '../../src/storage/db.js';
import type { FileStore } from '../../src/storage/files.js';
import { startTestApp, type TestApp } from './app.js';
import type { TestDatabase } from './db.js';

/** Bytes that are not valid UTF-8 (a text body would mangle them). */
export const PNG = Buffer.from([
  0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe, 0x80, 0x7f,
]);
/** binaryMaxBytes of the test apps. */
export const MAX = 64 * 1024;

export function issueOf(body: string): {
  severity: string;
  code: string;
  details?: { text: string };
  expression?: string[];
} {
  const oo = JSON.parse(body) as { resourceType: string; issue: { severity: string; code: string }[] };
  expect(oo.resourceType).toBe('OperationOutcome');
  return oo.issue[0] as never;
}

export interface BinaryApp {
  t: TestApp;
  db: Db;
  files: FileStore;
  close(): Promise<void>;
}

export async function startBinaryApp(
  database: TestDatabase,
  opts: { jobs?: boolean; baseUrl?: string } = {},
): Promise<BinaryApp> {
  const db = await database.open();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-binary-'));
  const files = fileStoreFor(db, dataDir);
  const t = await startTestApp(
    database,
    { dataDir, binaryMaxBytes: MAX, ...(opts.baseUrl ? { baseUrl: opts.baseUrl } : {}) },
    { db, files, ...(opts.jobs ? { jobs: {} } : {}) },
  );
  return {
    t,
    db,
    files,
    async close() {
      await t.close();
      await db.close();
      fs.rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** `upload` (a raw POST or PUT to `{fhir}/<url>`) and `get` of the Binary tests, as `token` (read at call time). */
export function binaryRequests(t: () => TestApp, token: () => string) {
  return {
    upload: (payload: Buffer | string, headers: Record<string, string>, url = 'Binary', method = 'POST') =>
      t().request({ method: method as 'POST', url: `${t().fhir}/${url}`, token: token(), headers, payload }),
    get: (url: string, headers: Record<string, string> = {}, as = token()) =>
      t().request({ method: 'GET', url: `${t().fhir}/${url}`, token: as, headers }),
  };
}
