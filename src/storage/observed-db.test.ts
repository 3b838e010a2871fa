// observeDb (metrics' view of a Db): every statement, transaction and session is reported with whether it failed, and
// a single connection (PGlite) reports what is in flight as its pool figures.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from './db.js';
import { observeDb, type DbOperation } from './observed-db.js';
import { openPglite } from './pglite.js';

describe('observeDb on PGlite', () => {
  let db: Db;
  const seen: { op: DbOperation; failed: boolean; seconds: number }[] = [];
  beforeAll(async () => {
    db = await openPglite(null);
  });
  afterAll(async () => db?.close());
  const observed = () =>
    observeDb(db, { observe: (op, seconds, failed) => void seen.push({ op, seconds, failed }) });

  it('reports statements, a transaction with its statements, and failures (which still throw)', async () => {
    const o = observed();
    seen.length = 0;
    expect((await o.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    await o.transaction(async (tx) => {
      await tx.query('SELECT 1');
      await tx.query('SELECT 2');
    });
    await expect(o.query('SELECT * FROM no_such_table')).rejects.toThrow(/no_such_table/);
    expect(seen.map((s) => [s.op, s.failed])).toEqual([
      ['query', false],
      ['query', false],
      ['query', false],
      ['transaction', false],
      ['query', true],
    ]);
    for (const s of seen) expect(s.seconds).toBeGreaterThanOrEqual(0);
  });

  it('gives a single connection’s figures: busy while a statement runs, the others waiting', async () => {
    const o = observed();
    expect(o.stats()).toEqual({ total: 1, idle: 1, waiting: 0 });
    const running = Promise.all([1, 2, 3].map(() => o.query('SELECT pg_sleep(0.05)')));
    expect(o.stats()).toEqual({ total: 1, idle: 0, waiting: 2 });
    await running;
    expect(o.stats()).toEqual({ total: 1, idle: 1, waiting: 0 });
  });

  it('keeps the Db’s own pool figures where it has them', () => {
    const o = observeDb(
      { ...db, stats: () => ({ total: 7, idle: 3, waiting: 1 }) },
      { observe: () => undefined },
    );
    expect(o.stats()).toEqual({ total: 7, idle: 3, waiting: 1 });
    expect(o.kind).toBe('pglite');
  });
});
