// Would compressing resources.content pay (issue 30 point 1)? On a loaded database (STORAGE_SIZE_URL, default the
// cinder_storage database bench/storage-size.ts leaves), copies `resources` into a scratch schema once per variant —
// the default (pglz, toast_tuple_target 2032: only rows over ~2 kB are compressed), lz4, and lower
// toast_tuple_target values, which make PostgreSQL compress (and, above the target, move out of line) smaller rows —
// and prints each copy's bytes per resource (heap + TOAST, without indexes) and the time to read the content of 20
// random rows by key and of a whole-table detoast, as medians of interleaved runs with ratios to the default.
// Each copy's content is written anew (content::text::json), so each row goes through the toaster with the copy's
// settings (a copied datum, or VACUUM FULL, keeps the stored form). Note: PostgreSQL calls the toaster only for rows
// over TOAST_TUPLE_THRESHOLD (~2 kB, fixed at compile time); toast_tuple_target only sets how far it then shrinks them. The scratch schema is dropped at the end.
//
//   STORAGE_SIZE_URL=postgres://postgres@127.0.0.1:5432/cinder_storage npx tsx bench/content-compression.ts
import pg from 'pg';

const URL_ = process.env.STORAGE_SIZE_URL ?? 'postgres://postgres@127.0.0.1:5432/cinder_storage';
const ROUNDS = Number(process.env.COMPRESSION_ROUNDS ?? 7);
const READS = Number(process.env.COMPRESSION_READS ?? 300);

interface Variant {
  name: string;
  compression: 'pglz' | 'lz4';
  target?: number;
}

const VARIANTS: Variant[] = [
  { name: 'default (pglz, target 2032)', compression: 'pglz' },
  { name: 'lz4, target 2032', compression: 'lz4' },
  { name: 'pglz, target 1024', compression: 'pglz', target: 1024 },
  { name: 'lz4, target 1024', compression: 'lz4', target: 1024 },
  { name: 'lz4, target 512', compression: 'lz4', target: 512 },
  { name: 'pglz, target 128', compression: 'pglz', target: 128 },
  { name: 'lz4, target 128', compression: 'lz4', target: 128 },
];

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};

async function main(): Promise<void> {
  const client = new pg.Client({ connectionString: URL_ });
  await client.connect();
  const schema = 'compression_bench';
  try {
    let lz4 = true;
    try {
      await client.query(`SET default_toast_compression = lz4`);
      await client.query(`RESET default_toast_compression`);
    } catch {
      lz4 = false;
    }
    const variants = VARIANTS.filter((v) => lz4 || v.compression !== 'lz4');
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await client.query(`CREATE SCHEMA ${schema}`);
    const n = Number(
      (await client.query<{ n: string }>('SELECT count(*)::text AS n FROM resources')).rows[0]?.n,
    );
    const columns = (
      await client.query<{ column_name: string }>(
        `SELECT column_name FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = 'resources' ORDER BY ordinal_position`,
      )
    ).rows.map((r) => r.column_name);
    const tables: string[] = [];
    for (const [i, v] of variants.entries()) {
      const t = `${schema}.v${i}`;
      tables.push(t);
      await client.query(
        `CREATE TABLE ${t} (LIKE resources INCLUDING DEFAULTS)${v.target ? ` WITH (toast_tuple_target = ${v.target})` : ''}`,
      );
      await client.query(`ALTER TABLE ${t} ALTER COLUMN content SET COMPRESSION ${v.compression}`);
      // A copied datum keeps the form it is stored in (compressed or not); a new value (text to json) goes through
      // the toaster with this copy's settings.
      await client.query(
        `INSERT INTO ${t} (${columns.join(', ')})
         SELECT ${columns.map((c) => (c === 'content' ? 'content::text::json' : c)).join(', ')} FROM resources ORDER BY rid`,
      );
      await client.query(`ALTER TABLE ${t} ADD PRIMARY KEY (rid)`);
      await client.query(`VACUUM (ANALYZE) ${t}`);
    }
    const rids = (await client.query<{ rid: string }>('SELECT rid::text FROM resources')).rows.map((r) =>
      Number(r.rid),
    );
    const sample = (): number[] =>
      Array.from({ length: 20 }, () => rids[Math.floor(Math.random() * rids.length)] as number);
    const byKey: number[][] = variants.map(() => []);
    const scan: number[][] = variants.map(() => []);
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, t] of tables.entries()) {
        // Warm: each round reads every copy once before it is timed, so all are in shared buffers alike.
        await client.query(`SELECT sum(octet_length(content::text)) FROM ${t}`);
        const started = performance.now();
        for (let k = 0; k < READS; k++)
          await client.query(`SELECT content::text FROM ${t} WHERE rid = ANY($1::bigint[])`, [sample()]);
        byKey[i]?.push(((performance.now() - started) * 1000) / READS);
        const s2 = performance.now();
        await client.query(`SELECT sum(octet_length(content::text)) FROM ${t}`);
        scan[i]?.push(performance.now() - s2);
      }
    }
    const rows = [];
    let base: { bytes: number; key: number; scan: number } | undefined;
    for (const [i, v] of variants.entries()) {
      const t = tables[i] as string;
      const size = await client.query<{ heap: string; toast: string }>(
        `SELECT pg_relation_size($1::regclass)::text AS heap,
                (pg_table_size($1::regclass) - pg_relation_size($1::regclass))::text AS toast`,
        [t],
      );
      const heap = Number(size.rows[0]?.heap) / n;
      const toast = Number(size.rows[0]?.toast) / n;
      const key = median(byKey[i] as number[]);
      const whole = median(scan[i] as number[]);
      base ??= { bytes: heap + toast, key, scan: whole };
      rows.push({
        variant: v.name,
        'heap B/res': Math.round(heap),
        'TOAST B/res': Math.round(toast),
        'B/res': Math.round(heap + toast),
        'x size': ((heap + toast) / base.bytes).toFixed(2),
        '20 rows by key µs': Math.round(key),
        'x read': (key / base.key).toFixed(2),
        'detoast all ms': Math.round(whole),
        'x scan': (whole / base.scan).toFixed(2),
      });
    }
    console.log(
      `resources.content compression on ${new URL(URL_).pathname.slice(1)} (${n} resources): medians of ${ROUNDS} interleaved rounds of ${READS} reads; lz4 ${lz4 ? 'available' : 'not available'}`,
    );
    console.table(rows);
  } finally {
    await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined);
    await client.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
