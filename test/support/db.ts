// The databases every storage-touching test runs on: embedded PGlite always, PostgreSQL when TEST_DATABASE_URL is set.
// Each PostgreSQL database gets its own schema, so test files running in parallel never see each other's rows.
import { randomBytes } from 'node:crypto';
import type { Db } from '../../src/storage/db.js';
import { migrate } from '../../src/storage/migrate.js';
import { openPglite } from '../../src/storage/pglite.js';
import { openPostgres } from '../../src/storage/postgres.js';

export interface TestDatabase {
  name: 'pglite' | 'postgres';
  /** A fresh, migrated, empty database; `close()` drops it. */
  open(): Promise<Db>;
}

export function testDatabases(): TestDatabase[] {
  const list: TestDatabase[] = [{ name: 'pglite', open: openTestPglite }];
  const url = process.env.TEST_DATABASE_URL;
  if (url) list.push({ name: 'postgres', open: () => openTestPostgres(url) });
  return list;
}

async function openTestPglite(): Promise<Db> {
  const db = await openPglite(null);
  await migrate(db);
  return db;
}

export async function openTestPostgres(
  url: string,
  schema = `t_${randomBytes(6).toString('hex')}`,
): Promise<Db> {
  const admin = await openPostgres(url, { max: 1 });
  try {
    await admin.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  } finally {
    await admin.close();
  }
  const db = await openPostgres(url, { schema, max: 10 });
  await migrate(db);
  const close = db.close;
  return {
    ...db,
    async close() {
      await close();
      const cleanup = await openPostgres(url, { max: 1 });
      try {
        await cleanup.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      } finally {
        await cleanup.close();
      }
    },
  };
}

export interface BareDatabase {
  name: 'pglite' | 'postgres';
  /** An empty database, not migrated (a migration test migrates it up to where it needs); `drop()` removes it. */
  open(): Promise<{ db: Db; drop(): Promise<void> }>;
}

/** Unmigrated databases for migration tests: PGlite always, PostgreSQL (a schema of its own) with TEST_DATABASE_URL. */
export function bareDatabases(poolSize = 2): BareDatabase[] {
  const list: BareDatabase[] = [
    { name: 'pglite', open: async () => ({ db: await openPglite(null), drop: async () => undefined }) },
  ];
  const url = process.env.TEST_DATABASE_URL;
  if (url)
    list.push({
      name: 'postgres',
      open: async () => {
        const schema = `t_${randomBytes(6).toString('hex')}`;
        const admin = await openPostgres(url, { max: 1 });
        await admin.exec(`CREATE SCHEMA ${schema}`);
        return {
          db: await openPostgres(url, { schema, max: poolSize }),
          drop: async () => {
            await admin.exec(`DROP SCHEMA ${schema} CASCADE`);
            await admin.close();
          },
        };
      },
    });
  return list;
}
