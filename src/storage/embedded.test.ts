// The embedded engines beside PGlite on the event loop: PostgreSQL from npm packages (persistence, the directory
// lock, running as another user when root, restarted when killed while open) and PGlite in a worker thread (transactions hold it; errors keep
// their SQLSTATE and constraint).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { sqlState, violatedConstraint } from './db.js';
import { DirLockedError } from './dir-lock.js';
import {
  alive as processAlive,
  POSTGRES_SUBDIR,
  startEmbeddedPostgres,
  type EmbeddedPostgres,
  type EmbeddedPostgresExit,
} from './embedded-postgres.js';
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

  it('runs with small shared buffers and a fixed malloc threshold by default, and takes settings over them', async () => {
    const setting = async (db: EmbeddedPostgres['db'], name: string): Promise<string> =>
      (await db.query<{ v: string }>('SELECT current_setting($1) AS v', [name])).rows[0]?.v as string;
    const dir = tmpDir();
    const plain = await startEmbeddedPostgres(dir);
    try {
      expect(await setting(plain.db, 'shared_buffers')).toBe('32MB');
      // The postmaster's environment (inherited by every backend) holds the malloc thresholds.
      const pid = postmasterPid(dir) as number;
      if (fs.existsSync(`/proc/${pid}/environ`)) {
        const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
        expect(env).toContain('MALLOC_MMAP_THRESHOLD_=131072');
        expect(env).toContain('MALLOC_TRIM_THRESHOLD_=131072');
      }
    } finally {
      await plain.db.close();
    }
    // Settings passed in win over Cinder's defaults, but never over where the server listens.
    const tuned = await startEmbeddedPostgres(dir, {
      settings: { shared_buffers: '48MB', work_mem: '8MB', listen_addresses: '*', port: '5999' },
    });
    try {
      expect(await setting(tuned.db, 'shared_buffers')).toBe('48MB');
      expect(await setting(tuned.db, 'work_mem')).toBe('8MB');
      expect(await setting(tuned.db, 'listen_addresses')).toBe('');
      expect(await setting(tuned.db, 'port')).toBe('5432');
    } finally {
      await tuned.db.close();
    }
  }, 120_000);
});

/** The pid in PostgreSQL's `postmaster.pid` of dir (the postmaster's), or undefined when there is none. */
function postmasterPid(dir: string): number | undefined {
  try {
    const pid = Number(
      fs.readFileSync(path.join(dir, POSTGRES_SUBDIR, 'postmaster.pid'), 'utf8').split('\n')[0],
    );
    return pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

const alive = (pid: number | undefined): boolean => pid !== undefined && processAlive(pid);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** fn's result once it stops throwing; its last error after timeoutMs. */
async function once<T>(fn: () => Promise<T>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(100);
    }
  }
}

/** p, or an error after ms (a hang fails the test with a reason instead of at the test's time limit). */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    sleep(ms).then(() => {
      throw new Error(`${what} took over ${ms} ms`);
    }),
  ]);
}

describe('embedded PostgreSQL killed while open', () => {
  it('is restarted on the same directory with its committed work, and its pools reach the new server', async () => {
    const dir = tmpDir();
    const exits: EmbeddedPostgresExit[] = [];
    const idleErrors: Error[] = [];
    let restarts = 0;
    const { db } = await startEmbeddedPostgres(dir, {
      poolSize: 8,
      onExit: (e) => exits.push(e),
      onRestart: () => restarts++,
      onError: (err) => idleErrors.push(err),
    });
    let killed: number | undefined;
    try {
      await db.exec('CREATE TABLE kept (k text PRIMARY KEY)');
      await db.transaction(async (tx) => {
        await tx.query(`INSERT INTO kept VALUES ('committed')`);
      });
      // Idle connections in the pool, which die with the server.
      await Promise.all(Array.from({ length: 5 }, () => db.query('SELECT pg_sleep(0.05)')));
      const startedAt = `SELECT pg_postmaster_start_time()::text AS t`;
      const before = (await db.query<{ t: string }>(startedAt)).rows[0]?.t;
      killed = postmasterPid(dir);
      expect(alive(killed)).toBe(true);
      process.kill(killed as number, 'SIGKILL');

      // A backend of the killed server may still answer a query already on its way: wait for the new server's.
      const rows = await once(async () => {
        const r = await db.query<{ k: string; t: string }>(
          `SELECT k, (${startedAt}) AS t FROM kept ORDER BY k`,
        );
        if (r.rows[0]?.t === before) throw new Error('answered by the killed server');
        return r.rows.map((row) => row.k);
      }, 60_000);
      expect(rows).toEqual(['committed']);
      await vi.waitFor(() => expect(restarts).toBe(1), { timeout: 5000 });
      expect(exits).toHaveLength(1);
      expect(exits[0]).toMatchObject({ signal: 'SIGKILL', code: null, restartInMs: 500, failures: 1 });
      const restarted = postmasterPid(dir);
      expect(restarted).not.toBe(killed);
      expect(alive(restarted)).toBe(true);
      // The killed idle connections were reported and left the pool: a pool's worth of queries at once all succeed,
      // and a transaction commits on the new server.
      expect(idleErrors.length).toBeGreaterThan(0);
      await Promise.all(Array.from({ length: 8 }, () => db.query('SELECT pg_sleep(0.02)')));
      await db.transaction(async (tx) => {
        await tx.query(`INSERT INTO kept VALUES ('after')`);
      });
    } finally {
      await within(db.close(), 60_000, 'close()');
    }
    // Nothing of either server runs on the directory, and it opens again with everything committed.
    expect(alive(killed)).toBe(false);
    expect(alive(postmasterPid(dir))).toBe(false);
    const again = await startEmbeddedPostgres(dir);
    try {
      expect((await again.db.query('SELECT k FROM kept ORDER BY k')).rows).toEqual([
        { k: 'after' },
        { k: 'committed' },
      ]);
    } finally {
      await again.db.close();
    }
    expect(exits).toHaveLength(1);
  }, 180_000);

  it('closes without hanging when closed during the restart, and restarts nothing afterwards', async () => {
    const dir = tmpDir();
    /** Kills the postmaster; `closeWhen` says when to close: at the exit (before the restart) or as it starts. */
    const crashAndClose = async (closeWhen: 'at-exit' | 'while-starting'): Promise<void> => {
      let restarts = 0;
      let closing: Promise<void> | undefined;
      const holder: { server?: EmbeddedPostgres } = {};
      holder.server = await startEmbeddedPostgres(dir, {
        onExit: () => {
          if (closeWhen === 'at-exit') closing = holder.server?.db.close();
        },
        onRestart: () => restarts++,
        onError: () => undefined,
      });
      const { db } = holder.server;
      await db.query('SELECT 1');
      const killed = postmasterPid(dir) as number;
      process.kill(killed, 'SIGKILL');
      if (closeWhen === 'while-starting') {
        // The restart has spawned a new postmaster (it writes its pid file early in its start-up).
        await once(async () => {
          const pid = postmasterPid(dir);
          if (pid === killed || !alive(pid)) throw new Error('not restarted yet');
        }, 30_000);
        closing = db.close();
      } else {
        await vi.waitFor(() => expect(closing).toBeDefined(), { timeout: 10_000 });
      }
      await within(closing as Promise<void>, 60_000, `close() ${closeWhen}`);
      const restartsAtClose = restarts;
      const pid = postmasterPid(dir);
      expect(alive(pid)).toBe(false);
      // Longer than the first restart's wait: still nothing starts.
      await sleep(2000);
      expect(restarts).toBe(restartsAtClose);
      if (closeWhen === 'at-exit') expect(restarts).toBe(0);
      const later = postmasterPid(dir);
      expect(later === undefined || later === pid).toBe(true);
      expect(alive(later)).toBe(false);
      // The directory lock was released.
      expect(fs.existsSync(path.join(dir, 'cinder.lock'))).toBe(false);
    };
    await crashAndClose('at-exit');
    await crashAndClose('while-starting');
    const again = await startEmbeddedPostgres(dir);
    try {
      expect((await again.db.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    } finally {
      await again.db.close();
    }
  }, 180_000);
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
