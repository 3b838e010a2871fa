// PostgreSQL (node-postgres pool) behind the Db seam.
import { createHash } from 'node:crypto';
import pg from 'pg';
import type { Db, Queryable, QueryOptions, QueryResult } from './db.js';

pg.types.setTypeParser(20, (v: string) => Number(v)); // int8
pg.types.setTypeParser(1700, (v: string) => Number(v)); // numeric

// Statements marked `prepare` run as named prepared statements, so PostgreSQL plans each text once per connection
// instead of at every call (planning is most of the cost of the short key lookups a FHIR server makes). The number
// of distinct texts prepared is bounded.
const MAX_PREPARED = 1000;
const preparedNames = new Map<string, string>();

function statementName(sql: string): string | undefined {
  let name = preparedNames.get(sql);
  if (name === undefined && preparedNames.size < MAX_PREPARED && sql.length < 16_384) {
    name = `c${createHash('sha1').update(sql).digest('hex').slice(0, 20)}`;
    preparedNames.set(sql, name);
  }
  return name;
}

function wrap(c: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<T>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<QueryResult<T>> {
      const name = opts?.prepare && params && params.length > 0 ? statementName(sql) : undefined;
      const r = name
        ? await c.query({ name, text: sql, values: params as unknown[] })
        : await c.query(sql, params as unknown[] | undefined);
      return { rows: r.rows as T[], rowCount: r.rowCount ?? r.rows.length };
    },
  };
}

export interface PostgresOptions {
  max?: number;
  /** Schema to use instead of `public` (tests give each file its own). */
  schema?: string;
  onError?: (err: Error) => void;
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Db> {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 20,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    ...(opts.schema ? { options: `-c search_path=${opts.schema}` } : {}),
  });
  // An idle client that loses its server emits here; without a listener the process would crash.
  pool.on('error', (err) => opts.onError?.(err));
  const base = wrap(pool);
  return {
    kind: 'postgres',
    query: base.query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(wrap(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    async session<T>(fn: (conn: Queryable) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        return await fn(wrap(client));
      } finally {
        client.release();
      }
    },
    async exec(sql: string): Promise<void> {
      await pool.query(sql);
    },
    async close(): Promise<void> {
      await pool.end();
    },
  };
}
