// Audit housekeeping (API.md §10 `auditRetention`, issue 28 points 2 and 5), run by every server process: seals new
// AuditEvents into their chains about every second (chain.ts), and, when `auditRetention` is set, deletes the rows
// recorded longer ago than that. Deletion keeps every chain verifiable: it takes only sealed rows (an unsealed row
// would vanish from the chain unseen), each with its link (audit_chain) in the same statement, only a prefix of each
// project's chain (a row goes only when every earlier link of its chain goes too, so what remains starts at one anchor
// and has no gap), and never a chain's last link (the head's, which verification compares with audit_chain_heads).
// Each chain is trimmed from its first remaining link while links are due, so a link recorded before the cutoff but
// sealed after a newer one waits for it (seconds, for rows committed out of order). A link whose row is gone (deleted
// from audit_events alone: tampering, which verification reports meanwhile) holds nothing up: it goes with the links
// around it. Bounded batches, each one statement. Safe with several instances at once: sealing takes an advisory lock,
// and two sweeps deleting the same rows delete them once.
import { periodic } from '../jobs/periodic.js';
import type { Db, Queryable } from '../storage/db.js';
import type { AuditChain } from './model.js';

export interface AuditMaintenanceOptions {
  db: Db;
  clock: () => Date;
  /** Config `auditRetention`: seconds an AuditEvent is kept; 0 keeps them all (no sweep). */
  retentionSeconds: number;
  chain: AuditChain;
  log?: { warn(obj: unknown, msg: string): void };
  /** Pause between seals (default 1 s). */
  intervalMs?: number;
  /** Pause between retention sweeps (default: a tenth of the retention, between 1 s and 10 minutes). */
  retentionIntervalMs?: number;
  /** Rows looked at per DELETE (default 5000). */
  batchSize?: number;
}

export interface AuditMaintenance {
  start(): void;
  /** Stops the timer and waits for the running seal or sweep. */
  stop(): Promise<void>;
  /** Seals, then (with a retention) deletes what is due now (tests, with an advanced clock). */
  sweepOnce(): Promise<{ sealed: number; deleted: number }>;
}

/**
 * One batch: deletes up to `batch` links and their rows recorded before `cutoff`, taken per project from the start of
 * its chain, in chain order, as long as each is recorded before `cutoff` and not the chain's head (an unsealed row has
 * no link, so it is never taken). Returns the links deleted.
 */
export async function deleteAuditBatch(db: Queryable, cutoff: Date, batch: number): Promise<number> {
  // Per chain: its oldest links (audit_chain_link), only when the first one is due (one index probe per chain when
  // nothing is), kept while every link so far is due (the running bool_and), then the first `batch` of them all in
  // (project, chain) order, so that what each chain loses is a prefix. The links and their rows go together.
  const r = await db.query<{ n: number }>(
    `WITH due AS (
       SELECT x.seq, h.project_id, x.chain_no,
         bool_and(COALESCE(x.recorded < $1, true)) OVER (PARTITION BY h.project_id ORDER BY x.chain_no) AS ok
       FROM audit_chain_heads h
       CROSS JOIN LATERAL (
         SELECT c.seq, c.chain_no, a.recorded FROM audit_chain c LEFT JOIN audit_events a ON a.seq = c.seq
         WHERE c.project_id = h.project_id AND c.chain_no < h.chain_no
         ORDER BY c.chain_no LIMIT $2
       ) x
       WHERE COALESCE((SELECT COALESCE(a.recorded < $1, true) FROM audit_chain f LEFT JOIN audit_events a ON a.seq = f.seq
                       WHERE f.project_id = h.project_id
                       ORDER BY f.chain_no LIMIT 1), false)
     ), pick AS (
       SELECT seq FROM due WHERE ok ORDER BY project_id, chain_no LIMIT $2
     ), links AS (
       DELETE FROM audit_chain WHERE seq IN (SELECT seq FROM pick) RETURNING seq
     ), events AS (
       DELETE FROM audit_events WHERE seq IN (SELECT seq FROM links)
     )
     SELECT count(*)::int AS n FROM links`,
    [cutoff, batch],
  );
  return r.rows[0]?.n ?? 0;
}

/** DELETE statements per tick of the timer, so that sealing is never held up for long. */
const SWEEP_BATCHES_PER_TICK = 20;

export function createAuditMaintenance(opts: AuditMaintenanceOptions): AuditMaintenance {
  const intervalMs = opts.intervalMs ?? 1000;
  const retentionIntervalMs =
    opts.retentionIntervalMs ?? Math.min(Math.max(opts.retentionSeconds * 100, 1000), 600_000);
  const batchSize = opts.batchSize ?? 5000;
  let nextRetention = 0;

  /** Deletes what is due, at most `maxBatches` statements; `more` when it stopped with rows perhaps left. */
  async function sweep(maxBatches = Infinity): Promise<{ deleted: number; more: boolean }> {
    if (opts.retentionSeconds <= 0) return { deleted: 0, more: false };
    const cutoff = new Date(opts.clock().getTime() - opts.retentionSeconds * 1000);
    let deleted = 0;
    for (let i = 0; i < maxBatches; i++) {
      const n = await deleteAuditBatch(opts.db, cutoff, batchSize);
      deleted += n;
      if (n === 0 || loop.stopped) return { deleted, more: false };
    }
    return { deleted, more: true };
  }

  async function sweepOnce(): Promise<{ sealed: number; deleted: number }> {
    const sealed = await opts.chain.seal(opts.db);
    return { sealed, deleted: (await sweep()).deleted };
  }

  async function tickOnce(): Promise<void> {
    try {
      await opts.chain.seal(opts.db);
    } catch (err) {
      opts.log?.warn({ err }, 'audit: sealing failed; retrying later');
    }
    if (opts.retentionSeconds <= 0 || Date.now() < nextRetention) return;
    nextRetention = Date.now() + retentionIntervalMs;
    try {
      // A large backlog (retention just enabled or shortened) is deleted over several ticks, sealing in between.
      if ((await sweep(SWEEP_BATCHES_PER_TICK)).more) nextRetention = 0;
    } catch (err) {
      opts.log?.warn({ err }, 'audit retention sweep failed; retrying later');
    }
  }

  const loop = periodic(tickOnce, intervalMs);

  return {
    start: () => loop.start(),
    stop: () => loop.stop(),
    sweepOnce,
  };
}
