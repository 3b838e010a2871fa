// One-time move of a PGlite data directory (the embedded engine before PostgreSQL binaries) into the embedded
// PostgreSQL: every table copied in one transaction, sequences set past the copied keys, row counts checked.
import fs from 'node:fs';
import path from 'node:path';
import type { Db, Queryable } from './db.js';
import { migrate } from './migrate.js';
import { openPgliteAt, PGLITE_SUBDIR } from './pglite.js';

const BATCH = 500;

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;

/** The PGlite directory of `dataDir` when it holds a database that was not moved yet. */
export function pgliteToMove(dataDir: string): string | undefined {
  const dir = path.join(dataDir, PGLITE_SUBDIR);
  return fs.existsSync(path.join(dir, 'PG_VERSION')) ? dir : undefined;
}

async function tables(db: Queryable): Promise<string[]> {
  const r = await db.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`,
  );
  return r.rows.map((t) => t.name);
}

async function count(db: Queryable, table: string): Promise<number> {
  const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${quote(table)}`);
  return r.rows[0]?.n ?? 0;
}

/**
 * Copies every table of `from` into `to` (both migrated to the same version first; what `to` held is replaced),
 * in one transaction of `to`. Returns the number of rows copied per table.
 */
export async function copyDatabase(from: Db, to: Db): Promise<Record<string, number>> {
  await migrate(from);
  await migrate(to);
  const names = await tables(from);
  const copied: Record<string, number> = {};
  await to.transaction(async (tx) => {
    // Foreign keys are not checked while the tables fill in alphabetical order (they held before).
    await tx.query(`SET LOCAL session_replication_role = replica`);
    if (names.length > 0) await tx.query(`TRUNCATE ${names.map(quote).join(', ')}`);
    for (const table of names) {
      let after = '(0,0)';
      let n = 0;
      for (;;) {
        const r = await from.query<{ c: string; j: string }>(
          `SELECT ctid::text AS c, to_json(t)::text AS j FROM ${quote(table)} t WHERE ctid > $1::tid ORDER BY ctid LIMIT ${BATCH}`,
          [after],
        );
        if (r.rows.length === 0) break;
        await tx.query(
          `INSERT INTO ${quote(table)} SELECT * FROM json_populate_recordset(NULL::${quote(table)}, $1::json)`,
          [`[${r.rows.map((row) => row.j).join(',')}]`],
        );
        n += r.rows.length;
        after = (r.rows[r.rows.length - 1] as { c: string }).c;
      }
      if ((await count(tx, table)) !== n) throw new Error(`copying ${table}: row counts differ`);
      copied[table] = n;
    }
    // Serial columns continue after the copied keys.
    const serials = await tx.query<{ t: string; c: string; s: string }>(
      `SELECT table_name AS t, column_name AS c, pg_get_serial_sequence(quote_ident(table_name), column_name) AS s
         FROM information_schema.columns
        WHERE table_schema = current_schema() AND column_default LIKE 'nextval(%'`,
    );
    for (const { t, c, s } of serials.rows)
      if (s)
        await tx.query(
          `SELECT setval($1, coalesce((SELECT max(${quote(c)}) FROM ${quote(t)}), 0) + 1, false)`,
          [s],
        );
  });
  return copied;
}

/**
 * Moves the PGlite database of `dataDir` into `to` and renames its directory to `pglite.moved-<time>` (kept as a
 * backup; nothing reads it again). Interrupted, it starts over at the next start, replacing what `to` got.
 */
export async function moveFromPglite(
  dataDir: string,
  to: Db,
): Promise<{ rows: number; tables: number; backup: string }> {
  const dir = path.join(dataDir, PGLITE_SUBDIR);
  const from = await openPgliteAt(dir);
  let copied: Record<string, number>;
  try {
    copied = await copyDatabase(from, to);
  } finally {
    await from.close();
  }
  const backup = `${dir}.moved-${new Date().toISOString().replace(/[:.]/g, '-')}`;
  fs.renameSync(dir, backup);
  const rows = Object.values(copied).reduce((a, b) => a + b, 0);
  return { rows, tables: Object.keys(copied).length, backup };
}
