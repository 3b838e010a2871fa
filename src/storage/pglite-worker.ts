// PGlite in a worker thread behind the Db seam, so that no database work runs on the event loop: the worker runs
// statements one at a time; a transaction holds it from BEGIN to COMMIT while other statements wait here.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Db, Queryable, QueryResult } from './db.js';
import { acquireDirLock } from './dir-lock.js';
import type { ThreadReply, ThreadRequest } from './pglite-thread.js';

type Pending = { resolve(r: QueryResult<unknown>): void; reject(err: Error): void };
type Request = ThreadRequest extends infer R ? (R extends { id: number } ? Omit<R, 'id'> : never) : never;

// From `dist/` the thread is JavaScript; under tsx/vitest it is the TypeScript source, loaded after registering
// tsx's loader in the thread (as fhirpath-pool.ts does).
function threadEntry(): { file: URL | string; eval: boolean } {
  if (!import.meta.url.endsWith('.ts'))
    return { file: new URL('./pglite-thread.js', import.meta.url), eval: false };
  const tsxApi = createRequire(import.meta.url)
    .resolve('tsx/esm/api')
    .replace(/index\.cjs$/, 'index.mjs');
  const thread = new URL('./pglite-thread.ts', import.meta.url).href;
  const code = `import(${JSON.stringify(pathToFileURL(tsxApi).href)}).then((m) => { m.register(); return import(${JSON.stringify(thread)}); })`;
  return { file: code, eval: true };
}

/** Opens the embedded PGlite database of `<dataDir>/pglite` (or in memory) in a worker thread. */
export async function openPgliteWorker(dataDir: string | null): Promise<Db> {
  let release: (() => void) | undefined;
  if (dataDir) {
    fs.mkdirSync(dataDir, { recursive: true });
    release = acquireDirLock(dataDir);
  }
  const entry = threadEntry();
  const worker = new Worker(entry.file, {
    eval: entry.eval,
    workerData: { dir: dataDir ? path.join(dataDir, 'pglite') : null },
  });
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let failed: Error | undefined;
  await new Promise<void>((resolve, reject) => {
    worker.once('error', reject);
    worker.once('message', () => resolve());
  });
  worker.on('message', (r: ThreadReply) => {
    const p = pending.get(r.id);
    pending.delete(r.id);
    if (!p) return;
    if ('error' in r) p.reject(Object.assign(new Error(String(r.error.message)), r.error));
    else p.resolve(r);
  });
  worker.on('error', (err) => {
    failed = err;
    for (const p of pending.values()) p.reject(err);
    pending.clear();
  });
  const send = (req: Request): Promise<QueryResult<unknown>> =>
    new Promise((resolve, reject) => {
      if (failed) return reject(failed);
      const id = nextId++;
      pending.set(id, { resolve, reject });
      worker.postMessage({ ...req, id });
    });

  // The gate: while a transaction holds the worker, statements from outside it wait for its end. Each caller
  // checks it and sends in the same tick (no await in between), so nothing slips in after a BEGIN.
  let held: Promise<void> | undefined;
  const direct: Queryable = {
    query: async <T>(sql: string, params?: readonly unknown[]) =>
      (await send({ op: 'query', sql, ...(params ? { params: [...params] } : {}) })) as QueryResult<T>,
  };
  return {
    kind: 'pglite',
    async query<T>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> {
      while (held) await held;
      return direct.query<T>(sql, params);
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      while (held) await held;
      let open!: () => void;
      held = new Promise((r) => (open = r));
      try {
        await direct.query('BEGIN');
        try {
          const result = await fn(direct);
          await direct.query('COMMIT');
          return result;
        } catch (err) {
          await direct.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      } finally {
        held = undefined;
        open();
      }
    },
    async session<T>(fn: (conn: Queryable) => Promise<T>): Promise<T> {
      return fn(direct);
    },
    async exec(sql: string): Promise<void> {
      while (held) await held;
      await send({ op: 'exec', sql });
    },
    async close(): Promise<void> {
      while (held) await held;
      await send({ op: 'close' }).catch(() => undefined);
      await worker.terminate();
      release?.();
    },
  };
}
