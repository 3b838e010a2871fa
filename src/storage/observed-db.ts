// A Db whose statements are timed for metrics (src/metrics): every query, inside a transaction or not, tells the
// observer how long it took and whether it failed; transactions and sessions are timed as a whole too. The observer
// is called synchronously and must be cheap. Storage knows nothing of what the figures become.
import type { Db, PoolStats, Queryable, QueryOptions, QueryResult } from './db.js';

export type DbOperation = 'query' | 'transaction' | 'session';

export interface DbObserver {
  /** One finished statement, transaction or session: its duration in seconds and whether it threw. */
  observe(op: DbOperation, seconds: number, failed: boolean): void;
}

export interface ObservedDb extends Db {
  /** The pool's connections now: the pool's own figures, or for a single connection (PGlite) what is in flight. */
  stats(): PoolStats;
}

const seconds = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e9;

async function timed<T>(observer: DbObserver, op: DbOperation, run: () => Promise<T>): Promise<T> {
  const start = process.hrtime.bigint();
  try {
    const result = await run();
    observer.observe(op, seconds(start), false);
    return result;
  } catch (err) {
    observer.observe(op, seconds(start), true);
    throw err;
  }
}

function observedQueryable(q: Queryable, observer: DbObserver): Queryable {
  return {
    query<T>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<QueryResult<T>> {
      return timed(observer, 'query', () => q.query<T>(sql, params, opts));
    },
  };
}

/** Wraps `db`; the wrapper forwards everything else (close, exec, and whatever a Db gains) to it unchanged. */
export function observeDb(db: Db, observer: DbObserver): ObservedDb {
  // Callers between their call and its answer: on a single connection, one runs and the others wait.
  let inFlight = 0;
  const track = async <T>(run: () => Promise<T>): Promise<T> => {
    inFlight++;
    try {
      return await run();
    } finally {
      inFlight--;
    }
  };
  const own = db.stats ? db.stats.bind(db) : undefined;
  return {
    ...db,
    kind: db.kind,
    stats: own ?? (() => ({ total: 1, idle: inFlight > 0 ? 0 : 1, waiting: Math.max(0, inFlight - 1) })),
    query<T>(sql: string, params?: readonly unknown[], opts?: QueryOptions): Promise<QueryResult<T>> {
      return track(() => timed(observer, 'query', () => db.query<T>(sql, params, opts)));
    },
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      return track(() =>
        timed(observer, 'transaction', () => db.transaction((tx) => fn(observedQueryable(tx, observer)))),
      );
    },
    session<T>(fn: (conn: Queryable) => Promise<T>): Promise<T> {
      return track(() =>
        timed(observer, 'session', () => db.session((conn) => fn(observedQueryable(conn, observer)))),
      );
    },
    exec: (sql: string) => db.exec(sql),
    close: () => db.close(),
  };
}
