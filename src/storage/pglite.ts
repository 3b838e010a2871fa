// Embedded PostgreSQL (PGlite, https://pglite.dev) persisted in a directory, behind the Db seam.
import fs from 'node:fs';
import path from 'node:path';
import { PGlite, types } from '@electric-sql/pglite';
import type { Db, Queryable, QueryResult } from './db.js';
import { acquireDirLock } from './dir-lock.js';

const parsers = {
  [types.INT8]: (v: string) => Number(v),
  [types.NUMERIC]: (v: string) => Number(v),
};

function wrap(q: { query: PGlite['query'] }): Queryable {
  return {
    async query<T>(sql: string, params?: readonly unknown[]): Promise<QueryResult<T>> {
      const r = await q.query<T>(sql, params as unknown[] | undefined);
      return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
    },
  };
}

/** Opens (creating when absent) the embedded database in `<dataDir>/pglite`, or in memory when dataDir is null. */
export async function openPglite(dataDir: string | null): Promise<Db> {
  if (!dataDir) return openPgliteAt(null);
  fs.mkdirSync(dataDir, { recursive: true });
  // PGlite does not lock its directory; two writers silently lose rows, so we refuse a second process.
  const release = acquireDirLock(dataDir);
  try {
    return await openPgliteAt(path.join(dataDir, PGLITE_SUBDIR), release);
  } catch (err) {
    release();
    throw err;
  }
}

/** The PGlite directory inside a data directory. */
export const PGLITE_SUBDIR = 'pglite';

/**
 * Opens a PGlite database directory itself (in memory when null), without locking it: the caller holds the lock
 * of its data directory. `release` runs at close.
 */
export async function openPgliteAt(dir: string | null, release?: () => void): Promise<Db> {
  const pg = dir ? await PGlite.create(dir, { parsers }) : await PGlite.create({ parsers });
  const base = wrap(pg);
  return {
    kind: 'pglite',
    query: base.query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return pg.transaction(async (tx) => fn(wrap(tx)));
    },
    async session<T>(fn: (conn: Queryable) => Promise<T>): Promise<T> {
      return fn(base);
    },
    async exec(sql: string): Promise<void> {
      await pg.exec(sql);
    },
    async close(): Promise<void> {
      await pg.close();
      release?.();
    },
  };
}
