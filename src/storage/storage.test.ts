// Storage seam: migrations under concurrency, persistence of the embedded database, and its directory lock.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../../test/support/db.js';
import { acquireDirLock, DirLockedError } from './dir-lock.js';
import { migrate, MIGRATIONS } from './migrate.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

const tmp: string[] = [];
afterAll(() => tmp.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
const tmpDir = (): string => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-storage-'));
  tmp.push(d);
  return d;
};

describe.each(testDatabases())('storage on $name', (database) => {
  it('migrates once and is idempotent', async () => {
    const db = await database.open();
    try {
      expect(await migrate(db)).toEqual([]);
      const versions = (
        await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')
      ).rows.map((r) => r.version);
      expect(versions).toEqual(MIGRATIONS.map((m) => m.version));
    } finally {
      await db.close();
    }
  });

  it('rolls back a failed transaction', async () => {
    const db = await database.open();
    try {
      await expect(
        db.transaction(async (tx) => {
          await tx.query(
            `INSERT INTO logins (id, membership_id, project_id, profile, auth_method) VALUES ('l1', 'm', 'p', 'x', 'password')`,
          );
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      expect((await db.query('SELECT 1 FROM logins WHERE id = $1', ['l1'])).rows).toHaveLength(0);
    } finally {
      await db.close();
    }
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)(
  'PostgreSQL migrations under concurrency (needs TEST_DATABASE_URL)',
  () => {
    it('applies each migration once when several instances start at once', async () => {
      const url = process.env.TEST_DATABASE_URL as string;
      const schema = `t_conc_${Date.now()}`;
      const admin = await openPostgres(url, { max: 1 });
      await admin.exec(`CREATE SCHEMA ${schema}`);
      const instances = await Promise.all([1, 2, 3, 4].map(() => openPostgres(url, { schema, max: 2 })));
      try {
        const applied = await Promise.all(instances.map((db) => migrate(db)));
        expect(applied.flat().sort()).toEqual(MIGRATIONS.map((m) => m.version).sort());
      } finally {
        await Promise.all(instances.map((db) => db.close()));
        await admin.exec(`DROP SCHEMA ${schema} CASCADE`);
        await admin.close();
      }
    });

    it('survives a connection lost between two statements of a transaction: the transaction fails, the process lives', async () => {
      const url = process.env.TEST_DATABASE_URL as string;
      const db = await openPostgres(url, { max: 1 });
      const killer = await openPostgres(url, { max: 1 });
      const uncaught: unknown[] = [];
      const onUncaught = (err: unknown): void => void uncaught.push(err);
      process.on('uncaughtException', onUncaught);
      try {
        const failed = await db
          .transaction(async (tx) => {
            const pid = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
            await killer.query('SELECT pg_terminate_backend($1)', [pid]);
            // The server's goodbye arrives while no statement runs: the client emits 'error' now.
            await new Promise((r) => setTimeout(r, 300));
            await tx.query('SELECT 1');
          })
          .then(
            () => undefined,
            (err: unknown) => err,
          );
        expect(failed).toBeInstanceOf(Error);
        expect(uncaught).toEqual([]);
        // The pool replaced the lost connection.
        expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
      } finally {
        process.removeListener('uncaughtException', onUncaught);
        await db.close();
        await killer.close();
      }
    });

    it('runs its sessions without parallel query, with or without a schema', async () => {
      const url = process.env.TEST_DATABASE_URL as string;
      for (const db of [
        await openPostgres(url, { max: 1 }),
        await openPostgres(url, { max: 1, schema: 'public' }),
      ]) {
        try {
          const r = await db.query<{ v: string }>('SELECT current_setting($1) AS v', [
            'max_parallel_workers_per_gather',
          ]);
          expect(r.rows[0]?.v).toBe('0');
        } finally {
          await db.close();
        }
      }
    });
  },
);

describe('embedded database directory', () => {
  it('keeps data across close and reopen', async () => {
    const dir = tmpDir();
    const db = await openPglite(dir);
    await migrate(db);
    await db.query(
      `INSERT INTO logins (id, membership_id, project_id, profile, auth_method) VALUES ('keep', 'm', 'p', 'x', 'password')`,
    );
    await db.close();
    const again = await openPglite(dir);
    try {
      expect((await again.query('SELECT id FROM logins')).rows).toEqual([{ id: 'keep' }]);
    } finally {
      await again.close();
    }
  });

  it("refuses a second opener in this process and in another process, and takes over a dead holder's lock", async () => {
    const dir = tmpDir();
    const release = acquireDirLock(dir);
    expect(() => acquireDirLock(dir)).toThrow(DirLockedError);
    const other = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `import('${path.resolve('src/storage/dir-lock.ts')}').then(m => m.acquireDirLock('${dir}'))`,
      ],
      { encoding: 'utf8' },
    );
    expect(other.status).not.toBe(0);
    expect(other.stderr).toMatch(/in use by process/);
    release();
    // A lock left by a process that no longer exists (as after SIGKILL) is taken over.
    fs.writeFileSync(path.join(dir, 'cinder.lock'), '999999999:1');
    const again = acquireDirLock(dir);
    again();
  });
});
