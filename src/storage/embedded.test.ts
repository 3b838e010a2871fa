// The embedded engines beside PGlite on the event loop: PostgreSQL from npm packages (persistence, the directory
// lock, running as another user when root) and PGlite in a worker thread (transactions hold it; errors keep
// their SQLSTATE and constraint).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sqlState, violatedConstraint } from './db.js';
import { DirLockedError } from './dir-lock.js';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import { migrate } from './migrate.js';
import { openPgliteWorker } from './pglite-worker.js';

const tmp: string[] = [];
afterAll(() => tmp.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const tmpDir = (): string => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-embedded-'));
  tmp.push(d);
  return d;
};

describe('embedded PostgreSQL', () => {
  it('keeps data across a stop and a start, and refuses a second opener of its directory', async () => {
    const dir = tmpDir();
    const first = await startEmbeddedPostgres(dir);
    try {
      await migrate(first.db);
      await first.db.query(
        `INSERT INTO logins (id, membership_id, project_id, profile, auth_method) VALUES ('keep', 'm', 'p', 'x', 'password')`,
      );
      await expect(startEmbeddedPostgres(dir)).rejects.toBeInstanceOf(DirLockedError);
      if (process.getuid?.() === 0) {
        // PostgreSQL refuses root: its directory belongs to the user it runs as.
        expect(fs.statSync(path.join(dir, 'postgres')).uid).not.toBe(0);
      }
    } finally {
      await first.db.close();
    }
    const again = await startEmbeddedPostgres(dir);
    try {
      expect((await again.db.query('SELECT id FROM logins')).rows).toEqual([{ id: 'keep' }]);
      const version = await again.db.query<{ v: string }>(
        `SELECT current_setting('server_version_num') AS v`,
      );
      expect(Number(version.rows[0]?.v)).toBeGreaterThanOrEqual(170000);
    } finally {
      await again.db.close();
    }
  }, 120_000);
});

describe('PGlite in a worker thread', () => {
  it('keeps statements from outside a transaction out of it, and reports errors with their SQLSTATE', async () => {
    const db = await openPgliteWorker(null);
    try {
      await db.exec('CREATE TABLE t (k text PRIMARY KEY)');
      let outside: Promise<number> | undefined;
      await expect(
        db.transaction(async (tx) => {
          await tx.query(`INSERT INTO t VALUES ('inside')`);
          // Sent while the transaction holds the worker: it must run after the rollback, not inside.
          outside = db
            .query<{ n: number }>('SELECT count(*)::int AS n FROM t')
            .then((r) => r.rows[0]?.n ?? -1);
          await new Promise((r) => setTimeout(r, 20));
          throw new Error('roll back');
        }),
      ).rejects.toThrow('roll back');
      expect(await outside).toBe(0);
      await db.query(`INSERT INTO t VALUES ('a')`);
      const err = await db.query(`INSERT INTO t VALUES ('a')`).catch((e: unknown) => e);
      expect(sqlState(err)).toBe('23505');
      expect(violatedConstraint(err)).toBe('t_pkey');
    } finally {
      await db.close();
    }
  });
});
