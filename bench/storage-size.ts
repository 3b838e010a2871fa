// Bytes per resource on PostgreSQL (issue 30 point 1): how much the database grows per stored resource, per table.
//
// `npx tsx bench/storage-size.ts` builds Cinder, makes a fresh database (cinder_storage on BENCH_DATABASE_URL's
// server), loads the 88 Synthea transaction Bundles of ../shared/data/synthea-r4 through the API, runs
// `VACUUM (ANALYZE)` and prints, per table, pg_total_relation_size (heap + TOAST + indexes) and its indexes alone,
// divided by the resources stored, the total, and the JSON bytes per resource. The database is kept, so that it can
// be measured again after an upgrade (below).
//
// `STORAGE_SIZE_URL=postgres://…/db npx tsx bench/storage-size.ts` measures an existing database in place instead
// (nothing is loaded). STORAGE_SIZE_VACUUM=full runs `VACUUM (FULL, ANALYZE)` first (rows deleted by a migration
// leave free space in the table files that only a full vacuum returns), =0 none, default `VACUUM (ANALYZE)`.
// STORAGE_SIZE_MAIN=path/to/dist/main.js loads with another checkout's build (e.g. main's, for a before/after on the
// same data: load with the old build, then start the new one on the database, which migrates it, and measure in
// place). STORAGE_SIZE_BUILD=0 skips `npm run build`.
//
// bench/run.ts (`npm run bench`) and bench/growth.ts print the same report through `storageReport`.
import { execSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import pg from 'pg';
import { freshDatabase, login, startServer } from './server.js';

export interface TableBytes {
  table: string;
  /** pg_total_relation_size: heap, TOAST and indexes. */
  total: number;
  /** Its indexes alone. */
  indexes: number;
}

export interface StorageSizes {
  /** Rows in `resources` (current versions, deleted ones included): the divisor. */
  resources: number;
  /** Average bytes of a resource's JSON text (as stored in resources.content). */
  jsonBytes: number;
  /** Every non-empty table of the database's schema, largest first. */
  tables: TableBytes[];
  /** pg_database_size. */
  database: number;
}

export type Vacuum = 'none' | 'analyze' | 'full';

/** Measures the database at `url` (after `VACUUM (ANALYZE)` by default). */
export async function storageSizes(url: string, vacuum: Vacuum = 'analyze'): Promise<StorageSizes> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    if (vacuum === 'analyze') await client.query('VACUUM (ANALYZE)');
    if (vacuum === 'full') await client.query('VACUUM (FULL, ANALYZE)');
    const tables = await client.query<{ table: string; total: string; indexes: string }>(
      `SELECT c.relname AS table, pg_total_relation_size(c.oid)::text AS total,
              pg_indexes_size(c.oid)::text AS indexes
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
       ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`,
    );
    const counts = await client.query<{ n: string }>('SELECT count(*)::text AS n FROM resources');
    const resources = Number(counts.rows[0]?.n ?? 0);
    // The JSON's average over every row below a million rows, over a sample of about 200,000 above (bench/growth.ts
    // measures tens of GB, where reading every row's text would take minutes).
    const sample =
      resources > 1_000_000 ? ` TABLESAMPLE SYSTEM (${((100 * 200_000) / resources).toFixed(4)})` : '';
    const json = await client.query<{ json: string | null }>(
      `SELECT avg(octet_length(content::text))::text AS json FROM resources${sample}`,
    );
    const db = await client.query<{ size: string }>(
      'SELECT pg_database_size(current_database())::text AS size',
    );
    return {
      resources,
      jsonBytes: Number(json.rows[0]?.json ?? 0),
      tables: tables.rows
        .map((r) => ({ table: r.table, total: Number(r.total), indexes: Number(r.indexes) }))
        .filter((t) => t.total > 0),
      database: Number(db.rows[0]?.size ?? 0),
    };
  } finally {
    await client.end();
  }
}

/**
 * The per-table report: bytes per resource of each table holding at least 5 bytes per resource (the rest summed as
 * "other"), and the total.
 */
export function formatStorage(s: StorageSizes, title = 'bytes per resource'): string {
  const n = Math.max(s.resources, 1);
  const per = (b: number): number => Math.round(b / n);
  const shown = s.tables.filter((t) => per(t.total) >= 5);
  const rest = s.tables.filter((t) => per(t.total) < 5);
  const rows = shown.map((t) => [t.table, per(t.total), per(t.indexes)] as const);
  if (rest.length)
    rows.push([
      `other (${rest.length} tables)`,
      per(rest.reduce((a, t) => a + t.total, 0)),
      per(rest.reduce((a, t) => a + t.indexes, 0)),
    ]);
  const total = s.tables.reduce((a, t) => a + t.total, 0);
  const indexes = s.tables.reduce((a, t) => a + t.indexes, 0);
  rows.push(['total (tables)', per(total), per(indexes)]);
  const width = Math.max(...rows.map((r) => r[0].length), 5);
  const fmt = (x: number): string => x.toLocaleString('en-US').padStart(9);
  const lines = [
    `${title}: ${s.resources.toLocaleString('en-US')} resources, ${Math.round(s.jsonBytes).toLocaleString('en-US')} bytes of JSON each; database ${(s.database / 2 ** 20).toFixed(1)} MB`,
    `  ${'table'.padEnd(width)} ${'all'.padStart(9)} ${'indexes'.padStart(9)}`,
    ...rows.map((r) => `  ${r[0].padEnd(width)} ${fmt(r[1])} ${fmt(r[2])}`),
    `  total / JSON: ${(per(total) / Math.max(s.jsonBytes, 1)).toFixed(2)}×`,
  ];
  return lines.join('\n');
}

/** Measures and formats in one go (bench/run.ts, bench/growth.ts). */
export async function storageReport(
  url: string,
  vacuum: Vacuum = 'analyze',
  title?: string,
): Promise<string> {
  return formatStorage(await storageSizes(url, vacuum), title);
}

/** Posts the 88 Synthea transaction Bundles with `loaders` concurrent clients; answers the resources created. */
export async function loadSyntheaBundles(base: string, token: string, loaders = 4): Promise<number> {
  const dir = path.resolve('../shared/data/synthea-r4');
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json.gz'))
    .sort();
  let next = 0;
  let resources = 0;
  await Promise.all(
    Array.from({ length: loaders }, async () => {
      while (next < files.length) {
        const file = files[next++] as string;
        const body = zlib.gunzipSync(fs.readFileSync(path.join(dir, file))).toString('utf8');
        const res = await fetch(`${base}fhir/R4`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
          body,
        });
        if (!res.ok) throw new Error(`${file}: ${res.status} ${(await res.text()).slice(0, 300)}`);
        const n = ((await res.json()) as { entry: unknown[] }).entry.length;
        resources += n;
      }
    }),
  );
  return resources;
}

function vacuumMode(): Vacuum {
  const v = process.env.STORAGE_SIZE_VACUUM;
  return v === '0' ? 'none' : v === 'full' ? 'full' : 'analyze';
}

async function main(): Promise<void> {
  const inPlace = process.env.STORAGE_SIZE_URL;
  if (inPlace) {
    console.log(
      await storageReport(
        inPlace,
        vacuumMode(),
        `bytes per resource of ${new URL(inPlace).pathname.slice(1)}`,
      ),
    );
    return;
  }
  if (process.env.STORAGE_SIZE_BUILD !== '0' && !process.env.STORAGE_SIZE_MAIN)
    execSync('npm run build', { stdio: 'inherit' });
  const name = process.env.STORAGE_SIZE_DB ?? 'cinder_storage';
  const url = await freshDatabase(name);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-storage-'));
  const stdout = fs.openSync('/dev/null', 'a');
  const server = await startServer(
    { DATABASE_URL: url, DATA_DIR: path.join(work, 'files') },
    work,
    { requestLog: 'errors' },
    { stdout, ...(process.env.STORAGE_SIZE_MAIN ? { main: process.env.STORAGE_SIZE_MAIN } : {}) },
  );
  // The database with Cinder's schema and nothing loaded yet: what the load adds is measured from here.
  const empty = await storageSizes(url, 'none');
  let loaded: number;
  const started = performance.now();
  try {
    loaded = await loadSyntheaBundles(server.base, await login(server.base));
  } finally {
    await server.stop();
    fs.closeSync(stdout);
    fs.rmSync(work, { recursive: true, force: true });
  }
  const seconds = (performance.now() - started) / 1000;
  const s = await storageSizes(url, vacuumMode());
  console.log(
    `loaded ${loaded} resources from 88 Synthea Bundles in ${seconds.toFixed(1)} s; ` +
      `database ${url} grew by ${Math.round((s.database - empty.database) / Math.max(s.resources, 1)).toLocaleString('en-US')} bytes per resource (pg_database_size)`,
  );
  console.log(formatStorage(s));
}

if (process.argv[1] && import.meta.url.endsWith(path.basename(process.argv[1]))) {
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
}
