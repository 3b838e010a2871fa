// Index backfill after an upgrade (migration 023, docs/operations.md "Upgrades"): fills an index table that a
// migration added for the resources stored before it, in the background, once across instances and resumably. Each
// `index_backfills` row is claimed with FOR UPDATE SKIP LOCKED and a lease; every batch (the next resources by rid up
// to `upto`) rewrites only that table's rows of those resources and advances `checkpoint` in one transaction that
// first checks the lease is still this process's, so a batch is never written twice, and a process that died is
// resumed from its last batch by another (or itself, restarted) once its lease expires.
import { randomUUID } from 'node:crypto';
import { sqlState, type Db, type Queryable } from '../storage/db.js';
import type { Resource } from '../fhir/types.js';
import { parseJson } from '../fhir/json/parse.js';
import {
  INDEX_TABLES,
  lockIndexRewrites,
  rewriteIndexTables,
  type IndexItem,
} from '../fhir/search/index-writer.js';
import type { SearchParamRegistry } from '../fhir/search/custom-registry.js';

export interface IndexBackfillOptions {
  db: Db;
  /** Custom search parameters, whose values some tables also hold (identifiers, `$lastn` codes); absent: none. */
  searchParams?: SearchParamRegistry;
  /** Resources per transaction (default 500). */
  batchSize?: number;
  /** A progress line every this many resources (default 10,000). */
  logEvery?: number;
  /** A lease not renewed for this long (its process died) lets another process resume the backfill (default 30 s). */
  leaseMs?: number;
  /** Pause between batches, leaving database capacity to requests (default 0). */
  pauseMs?: number;
  /** How often to look again while another process holds a backfill (default: the lease). */
  pollMs?: number;
  log?: {
    info(obj: unknown, msg: string): void;
    warn(obj: unknown, msg: string): void;
    debug?(obj: unknown, msg: string): void;
  };
  /** Test hook: awaited after each committed batch. */
  afterBatch?: (table: string, checkpoint: number) => Promise<void>;
}

export interface IndexBackfill {
  readonly worker: string;
  start(): void;
  /** Resolves when no backfill is left to do (all done), or once stopped. */
  readonly finished: Promise<void>;
  /** Stops after the current batch and gives the lease back (another process may resume at once). */
  stop(): Promise<void>;
}

interface BackfillRow {
  table_name: string;
  resource_type: string | null;
  upto: string | number;
  checkpoint: string | number;
  done_count: string | number;
}

/** Claims a pending backfill that no live process holds. */
async function claim(db: Queryable, worker: string, leaseMs: number): Promise<BackfillRow | undefined> {
  const r = await db.query<BackfillRow>(
    `UPDATE index_backfills SET lease_owner = $1, lease_until = now() + $2 * interval '1 millisecond',
       started_at = coalesce(started_at, now())
     WHERE table_name = (
       SELECT table_name FROM index_backfills
       WHERE state = 'pending' AND (lease_until IS NULL OR lease_until < now())
       ORDER BY table_name LIMIT 1 FOR UPDATE SKIP LOCKED)
     RETURNING table_name, resource_type, upto, checkpoint, done_count`,
    [worker, leaseMs],
  );
  return r.rows[0];
}

async function pendingCount(db: Queryable): Promise<number> {
  const r = await db.query<{ n: string | number }>(
    "SELECT count(*) AS n FROM index_backfills WHERE state = 'pending'",
  );
  return Number(r.rows[0]?.n ?? 0);
}

class LeaseLost extends Error {}

/** SQLSTATE of a row lock that NOWAIT could not take. */
const LOCK_NOT_AVAILABLE = '55P03';
/** Tries of a batch whose resources a writer holds (about 10 s of waiting in all) before it is left for later. */
const LOCK_RETRIES = 30;

export function createIndexBackfill(opts: IndexBackfillOptions): IndexBackfill {
  const { db } = opts;
  const worker = randomUUID();
  const batchSize = opts.batchSize ?? 500;
  const logEvery = opts.logEvery ?? 10_000;
  const leaseMs = opts.leaseMs ?? 30_000;
  const pollMs = opts.pollMs ?? leaseMs;
  let stopping = false;
  let started = false;
  let wake: (() => void) | undefined;
  let resolveFinished!: () => void;
  const finished = new Promise<void>((r) => (resolveFinished = r));
  let loop: Promise<void> = Promise.resolve();

  const sleep = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  /** One batch in one transaction: the resources written and the new checkpoint (-1: the table is done); or LeaseLost. */
  async function batch(row: BackfillRow, after: number): Promise<{ n: number; last: number }> {
    return db.transaction(async (tx) => {
      // Locks the backfill row for the transaction and checks it is still ours at this checkpoint.
      const mine = await tx.query(
        `UPDATE index_backfills SET lease_until = now() + $3 * interval '1 millisecond'
         WHERE table_name = $1 AND lease_owner = $2 AND state = 'pending' AND checkpoint = $4`,
        [row.table_name, worker, leaseMs, after],
      );
      if (mine.rowCount === 0) throw new LeaseLost();
      await lockIndexRewrites(tx);
      const type = row.resource_type;
      // FOR SHARE: a concurrent update of one of these resources waits for this short batch, so the rows written are
      // those of the current version. NOWAIT: when a writer holds one of them, this batch fails at once and is tried
      // again (batchRetried), so the backfill never waits on a writer and can never be part of a deadlock with one.
      const r = await tx.query<{ rid: string | number; project_id: string; json: string }>(
        `SELECT rid, project_id, content::text AS json FROM resources
         WHERE rid > $1 AND rid <= $2 AND NOT deleted ${type ? 'AND resource_type = $4' : ''}
         ORDER BY rid LIMIT $3 FOR SHARE NOWAIT`,
        [after, row.upto, batchSize, ...(type ? [type] : [])],
      );
      const items: (IndexItem & { rid: number })[] = r.rows.map((x) => ({
        rid: Number(x.rid),
        resource: parseJson(x.json) as Resource,
      }));
      if (opts.searchParams) {
        for (let i = 0; i < items.length; i++) {
          const set = await opts.searchParams.forProject(tx, r.rows[i]!.project_id);
          const values = set.extract(items[i]!.resource);
          if (values.length) items[i]!.index = values;
        }
      }
      await rewriteIndexTables(tx, items, [row.table_name]);
      const last = items.length ? items[items.length - 1]!.rid : Number(row.upto);
      const done = items.length < batchSize;
      await tx.query(
        `UPDATE index_backfills SET checkpoint = $2, done_count = done_count + $3,
           state = CASE WHEN $4::boolean THEN 'done' ELSE state END,
           finished_at = CASE WHEN $4::boolean THEN now() ELSE NULL END,
           lease_owner = CASE WHEN $4::boolean THEN NULL ELSE lease_owner END,
           lease_until = CASE WHEN $4::boolean THEN NULL ELSE lease_until END
         WHERE table_name = $1`,
        [row.table_name, last, items.length, done],
      );
      return { n: items.length, last: done ? -1 : last };
    });
  }

  /** A batch, tried again a few times while a writer holds one of its resources (a short wait each time). */
  async function batchRetried(row: BackfillRow, after: number): Promise<{ n: number; last: number }> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await batch(row, after);
      } catch (err) {
        if (sqlState(err) !== LOCK_NOT_AVAILABLE || attempt >= LOCK_RETRIES || stopping) throw err;
        opts.log?.debug?.(
          { table: row.table_name, checkpoint: after, attempt },
          `index backfill of ${row.table_name}: a writer holds one of the next resources; trying again`,
        );
        await new Promise((r) => setTimeout(r, 20 * attempt));
      }
    }
  }

  async function run(row: BackfillRow): Promise<void> {
    const table = row.table_name;
    if (!INDEX_TABLES.includes(table)) {
      // Only a migration writes these rows; anything else is refused rather than deleted from.
      await db.query(
        "UPDATE index_backfills SET state = 'failed', lease_owner = NULL, lease_until = NULL WHERE table_name = $1",
        [table],
      );
      opts.log?.warn({ table }, `index backfill of ${table}: not an index table; skipped`);
      return;
    }
    let after = Number(row.checkpoint);
    let count = Number(row.done_count);
    const startedAt = Date.now();
    const what = `${row.resource_type ?? 'all'} resources with rid <= ${row.upto}`;
    if (after > 0)
      opts.log?.info(
        { table, checkpoint: after, resources: count },
        `index backfill of ${table}: resuming after rid ${after} (${count} resources done; ${what})`,
      );
    else opts.log?.info({ table, upto: Number(row.upto) }, `index backfill of ${table}: starting (${what})`);
    let nextLog = (Math.floor(count / logEvery) + 1) * logEvery;
    for (;;) {
      if (stopping) {
        const gaveBack = await db.query(
          'UPDATE index_backfills SET lease_owner = NULL, lease_until = NULL WHERE table_name = $1 AND lease_owner = $2',
          [table, worker],
        );
        if (gaveBack.rowCount > 0)
          opts.log?.info(
            { table, checkpoint: after, resources: count },
            `index backfill of ${table}: paused at rid ${after} (${count} resources); it resumes on the next start`,
          );
        return;
      }
      const { n, last } = await batchRetried(row, after);
      count += n;
      if (last < 0) {
        const seconds = Math.round((Date.now() - startedAt) / 100) / 10;
        opts.log?.info(
          { table, resources: count, seconds },
          `index backfill of ${table}: done, ${count} resources in ${seconds} s`,
        );
        return;
      }
      after = last;
      if (count >= nextLog) {
        opts.log?.info(
          { table, checkpoint: after, resources: count },
          `index backfill of ${table}: ${count} resources (up to rid ${after} of ${row.upto})`,
        );
        nextLog = (Math.floor(count / logEvery) + 1) * logEvery;
      }
      await opts.afterBatch?.(table, after);
      if (opts.pauseMs) await new Promise((r) => setTimeout(r, opts.pauseMs));
    }
  }

  async function mainLoop(): Promise<void> {
    while (!stopping) {
      let row: BackfillRow | undefined;
      try {
        row = await claim(db, worker, leaseMs);
        if (!row) {
          // Nothing claimable: all done, or held by another live process (look again in case it dies).
          if ((await pendingCount(db)) === 0) return;
          await sleep(pollMs);
          continue;
        }
        await run(row);
      } catch (err) {
        if (err instanceof LeaseLost) {
          opts.log?.warn(
            { table: row?.table_name },
            'index backfill: another process took over this backfill',
          );
          continue;
        }
        // A database outage or a failing batch: the lease expires and this (or another) process tries again later.
        opts.log?.warn({ err, table: row?.table_name }, 'index backfill: a batch failed; retrying later');
        await sleep(pollMs);
      }
    }
  }

  return {
    worker,
    finished,
    start() {
      if (started) return;
      started = true;
      loop = mainLoop().finally(resolveFinished);
    },
    async stop() {
      stopping = true;
      wake?.();
      await loop;
      resolveFinished();
    },
  };
}
