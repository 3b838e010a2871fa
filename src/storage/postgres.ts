// PostgreSQL (node-postgres pool) behind the Db seam.
import { createHash } from 'node:crypto';
import pg from 'pg';
import { DbUnavailableError, type Db, type Queryable, type QueryOptions, type QueryResult } from './db.js';

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

/** Socket-level failures (the server went away, or never answered). */
const SOCKET_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);

/**
 * Whether the error says the database cannot be reached (rather than that the statement failed): a SQLSTATE of
 * class 08 (connection exception), 57P01-57P03 (shutdown, crash, cannot connect now) or 53300 (too many
 * connections), a socket error, or node-postgres's own connection errors, which carry no code.
 */
export function isConnectionError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (err instanceof pg.DatabaseError)
    return typeof code === 'string' && (/^(08|57P0[123])/.test(code) || code === '53300');
  if (typeof code === 'string' && SOCKET_ERRORS.has(code)) return true;
  return /Connection terminated|connection error|timeout exceeded when trying to connect|not queryable|Query read timeout/i.test(
    err.message,
  );
}

function translate(err: unknown): unknown {
  return isConnectionError(err) ? Object.assign(new DbUnavailableError(err), { cause: err }) : err;
}

function wrap(c: pg.Pool | pg.PoolClient, onError?: (err: unknown) => void): Queryable {
  return {
    async query<T>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<QueryResult<T>> {
      const name = opts?.prepare && params && params.length > 0 ? statementName(sql) : undefined;
      try {
        const r = name
          ? await c.query({ name, text: sql, values: params as unknown[] })
          : await c.query(sql, params as unknown[] | undefined);
        return { rows: r.rows as T[], rowCount: r.rowCount ?? r.rows.length };
      } catch (err) {
        onError?.(err);
        throw translate(err);
      }
    },
  };
}

export interface PostgresOptions {
  max?: number;
  /** Schema to use instead of `public` (tests give each file its own). */
  schema?: string;
  /**
   * Milliseconds to wait for a connection (a new one, or a free one of the pool) before the query fails with
   * DbUnavailableError; bounds how long a request waits while the database is down. Default 5000.
   */
  connectTimeoutMs?: number;
  /**
   * PostgreSQL `statement_timeout` of every statement on this pool in milliseconds (0 or absent: none): a request's
   * query that runs longer is cancelled (SQLSTATE 57014) instead of holding a connection and the database.
   */
  statementTimeoutMs?: number;
  /**
   * Milliseconds after which the client gives up waiting for a statement's answer (node-postgres `query_timeout`),
   * a server that stopped answering included; the query fails with DbUnavailableError. Absent: no limit.
   */
  queryTimeoutMs?: number;
  onError?: (err: Error) => void;
}

export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Db> {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 20,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5000,
    idleTimeoutMillis: 30_000,
    // Notice a server that vanished without closing the connection (host down, network cut): probe idle
    // connections after 10 s instead of the operating system's default of two hours.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // Parallel query is off for Cinder's sessions: its statements are OLTP lookups and LIMITed index walks, where
    // launching workers costs more than it saves (a `code=` first page over 5 million Observations took 45 ms with two
    // workers, 2 ms without: bench/growth.ts), and on a small machine the workers take the cores other requests need.
    options: [
      ...(opts.schema ? [`-c search_path=${opts.schema}`] : []),
      '-c max_parallel_workers_per_gather=0',
    ].join(' '),
    ...(opts.statementTimeoutMs ? { statement_timeout: opts.statementTimeoutMs } : {}),
    ...(opts.queryTimeoutMs ? { query_timeout: opts.queryTimeoutMs } : {}),
  });
  // An idle client that loses its server emits here; without a listener the process would crash.
  pool.on('error', (err) => opts.onError?.(err));
  const base = wrap(pool);
  const connect = async (): Promise<pg.PoolClient> => {
    try {
      return await pool.connect();
    } catch (err) {
      throw translate(err);
    }
  };
  /** Runs fn on one pooled connection; a connection that failed is destroyed instead of going back to the pool. */
  const withClient = async <T>(fn: (conn: Queryable, client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await connect();
    let broken = false;
    // A checked-out client has no pool listener: a server that dies between two of its statements (the embedded
    // PostgreSQL killed, say) emits 'error' here, which would otherwise be an uncaught exception ending the process.
    // The next statement fails and is seen by fn; the connection is then destroyed.
    const lost = (): void => {
      broken = true;
    };
    client.on('error', lost);
    try {
      return await fn(
        wrap(client, (err) => (broken ||= isConnectionError(err))),
        client,
      );
    } finally {
      client.removeListener('error', lost);
      client.release(broken);
    }
  };
  return {
    kind: 'postgres',
    stats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    query: base.query,
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return withClient(async (conn) => {
        await conn.query('BEGIN');
        try {
          const result = await fn(conn);
          await conn.query('COMMIT');
          return result;
        } catch (err) {
          await conn.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
      });
    },
    async session<T>(fn: (conn: Queryable) => Promise<T>): Promise<T> {
      return withClient((conn) => fn(conn));
    },
    async exec(sql: string): Promise<void> {
      await base.query(sql);
    },
    async close(): Promise<void> {
      await pool.end();
    },
  };
}
