// Versioned migrations applied at start-up under a PostgreSQL advisory lock, so several instances
// starting at once apply each migration exactly once. A failing migration stops start-up.
import type { Db } from './db.js';
import * as m001 from './migrations/001-core.js';
import * as m002 from './migrations/002-search-index.js';
import * as m003 from './migrations/003-memberships.js';
import * as m004 from './migrations/004-oauth.js';
import * as m005 from './migrations/005-jobs.js';
import * as m006 from './migrations/006-live-count.js';
import * as m007 from './migrations/007-idp-client-secrets.js';
import * as m008 from './migrations/008-client-assertion-jtis.js';
import * as m009 from './migrations/009-file-chunks.js';
import * as m010 from './migrations/010-composite-groups.js';
import * as m011 from './migrations/011-exact-content.js';
import * as m012 from './migrations/012-file-bytes.js';
import * as m013 from './migrations/013-authorize-requests.js';
import * as m014 from './migrations/014-upstream-sign-in.js';
import * as m015 from './migrations/015-token-statistics.js';
import * as m016 from './migrations/016-subscriptions.js';
import * as m017 from './migrations/017-identifier-index.js';
import * as m018 from './migrations/018-audit.js';
import * as m019 from './migrations/019-full-text.js';
import * as m020 from './migrations/020-lastn.js';
import * as m021 from './migrations/021-smart-launch.js';
import * as m022 from './migrations/022-launch-fhir-context.js';
import * as m023 from './migrations/023-index-backfill.js';
import * as m024 from './migrations/024-history-past-versions.js';
import * as m025 from './migrations/025-narrow-index-rows.js';
import * as m026 from './migrations/026-sort-walk.js';
import * as m027 from './migrations/027-narrower-token-rows.js';
import * as m028 from './migrations/028-missing-index.js';

export interface Migration {
  version: number;
  sql: string;
}

/** Ordered on purpose: a migration's number is its place in history, not a file listing. */
export const MIGRATIONS: readonly Migration[] = [
  m001,
  m002,
  m003,
  m004,
  m005,
  m006,
  m007,
  m008,
  m009,
  m010,
  m011,
  m012,
  m013,
  m014,
  m015,
  m016,
  m017,
  m018,
  m019,
  m020,
  m021,
  m022,
  m023,
  m024,
  m025,
  m026,
  m027,
  m028,
];

const LOCK_KEY = 72_410_001;

export async function migrate(db: Db, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  return db.session(async (conn) => {
    await conn.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
    try {
      await conn.query(
        'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
      );
      const done = new Set(
        (await conn.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map(
          (r) => r.version,
        ),
      );
      const applied: number[] = [];
      for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
        if (done.has(m.version)) continue;
        await conn.query('BEGIN');
        try {
          for (const stmt of splitStatements(m.sql)) await conn.query(stmt);
          await conn.query('INSERT INTO schema_migrations (version) VALUES ($1)', [m.version]);
          await conn.query('COMMIT');
        } catch (err) {
          await conn.query('ROLLBACK');
          throw new Error(`migration ${m.version} failed: ${(err as Error).message}`);
        }
        applied.push(m.version);
      }
      return applied;
    } finally {
      await conn.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]);
    }
  });
}

/** Splits on semicolons at line ends; migrations keep one statement per `;\n` and use no dollar quoting. */
function splitStatements(sql: string): string[] {
  return sql
    .split(/;\s*\n/)
    .map((s) => s.replace(/^\s*--.*$/gm, '').trim())
    .filter((s) => s.length > 0);
}
