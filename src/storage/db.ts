// The Db seam: one query interface over PGlite (embedded) and PostgreSQL, so that every module above storage
// writes one SQL dialect. Writes go through `transaction(fn)`; nothing holds a connection on a long-lived object.

export interface QueryResult<T> {
  rows: T[];
  rowCount: number;
}

export interface QueryOptions {
  /**
   * Run as a named prepared statement on PostgreSQL, planned once per connection. Only for statements whose best
   * plan does not depend on the values (lookups by key, inserts): PostgreSQL may switch a prepared statement to a
   * generic plan made when the tables were small, which is a disaster for selective searches.
   */
  prepare?: boolean;
}

export interface Queryable {
  query<T = Record<string, unknown>>(
    sql: string,
    params?: readonly unknown[],
    opts?: QueryOptions,
  ): Promise<QueryResult<T>>;
}

/** Connections of a pool at one moment (metrics): open ones, idle ones, and callers waiting for one. */
export interface PoolStats {
  total: number;
  idle: number;
  waiting: number;
}

export interface Db extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** The pool's connections now (PostgreSQL); absent where there is no pool (PGlite's single connection). */
  stats?(): PoolStats;
  /** Runs `fn` inside BEGIN/COMMIT on one connection; ROLLBACK when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs `fn` on one dedicated connection outside a transaction (advisory locks, LISTEN). */
  session<T>(fn: (conn: Queryable) => Promise<T>): Promise<T>;
  /** Runs a script of several statements (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

/** Thrown by the storage layer when the database cannot be reached; the HTTP layer maps it to 503. */
export class DbUnavailableError extends Error {
  constructor(cause: unknown) {
    super(`database unavailable: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = 'DbUnavailableError';
  }
}

/** PostgreSQL SQLSTATE of a unique violation. */
export const UNIQUE_VIOLATION = '23505';

export function sqlState(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** The constraint a unique violation hit (PostgreSQL and PGlite both report it), if the error is one. */
export function violatedConstraint(err: unknown): string | undefined {
  if (sqlState(err) !== UNIQUE_VIOLATION) return undefined;
  const c = (err as { constraint?: unknown }).constraint;
  return typeof c === 'string' ? c : '';
}
