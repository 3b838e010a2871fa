// Stores AuditEvent rows (API.md §10 "Nothing is lost"): a write's rows go into the write's own statement (auditCte)
// or transaction (insertAuditRows); everything else is buffered and inserted in one statement per batch, at most
// `intervalMs` (one second) after it was recorded, and on close (a graceful stop flushes what is left). With
// `auditLog: stdout` every row is also written to a sink (standard output) as one JSON line once it is stored.
import type { Queryable } from '../storage/db.js';
import { contentHash, storableJson, type AuditRow } from './model.js';
import { sqlState } from '../storage/db.js';

const COLUMNS =
  'id, project_id, recorded, type, subtype, action, outcome, agents, entities, patients, content';

/**
 * The rows as one JSON parameter. Each AuditEvent's JSON goes in as it is (a `json` value, not a string to escape
 * again), as the resources' content does (store.ts).
 */
function rowsParam(rows: readonly AuditRow[]): string {
  const parts = rows.map((r) => {
    const head = storableJson({
      id: r.id,
      project_id: r.projectId,
      recorded: r.recorded.toISOString(),
      type: r.type,
      subtype: r.subtype,
      action: r.action,
      outcome: r.outcome,
      agents: r.agents,
      entities: r.entities,
      patients: r.patients,
    });
    return `${head.slice(0, -1)},"content":${r.content}}`;
  });
  return `[${parts.join(',')}]`;
}

const SELECT = (param: string) =>
  `SELECT id, project_id, recorded, type, subtype, action, outcome, agents, entities, patients, content::text
   FROM json_to_recordset(${param}::json) AS x(id text, project_id text, recorded timestamptz, type text,
     subtype text[], action text, outcome text, agents text[], entities text[], patients text[], content json)`;

/**
 * CTEs (for a write's own statement) that insert `rows` and put them on the sealer's list (audit_unsealed), their
 * parameter pushed onto `params`; none for no rows.
 */
export function auditCte(rows: readonly AuditRow[], params: unknown[]): string | undefined {
  if (rows.length === 0) return undefined;
  const at = params.push(
    rowsParam(rows),
    rows.map((r) => r.id),
    rows.map((r) => contentHash(r.content)),
  );
  return `audit AS (INSERT INTO audit_events (${COLUMNS}) ${SELECT(`$${at - 2}`)} RETURNING seq, id, project_id),
    audit_q AS (INSERT INTO audit_unsealed (seq, project_id, content_hash)
      SELECT a.seq, a.project_id, h.hash FROM audit a JOIN unnest($${at - 1}::text[], $${at}::text[]) AS h(id, hash)
      ON h.id = a.id)`;
}

/** Inserts `rows` (and their places on the sealer's list) in one statement. */
export async function insertAuditRows(db: Queryable, rows: readonly AuditRow[]): Promise<void> {
  if (rows.length === 0) return;
  const params: unknown[] = [];
  const ctes = auditCte(rows, params) as string;
  // Prepared: the text is the same for every batch, and PostgreSQL then plans it once per connection.
  await db.query(`WITH ${ctes} SELECT 1`, params, { prepare: true });
}

export interface AuditWriter {
  /** Buffers the row of a request that wrote nothing (or failed): stored within `intervalMs`. */
  add(row: AuditRow): void;
  /** Tells the writer of rows already stored with their write (for the log mirror). */
  stored(rows: readonly AuditRow[]): void;
  /** Stores what is buffered now. */
  flush(): Promise<void>;
  /** Stops the timer and stores what is left. */
  close(): Promise<void>;
  /** Rows held in memory, not yet stored (metrics: the audit backlog). */
  buffered(): number;
}

export interface AuditWriterOptions {
  db: Queryable;
  /**
   * Longest time a buffered row waits (default 200 ms: within API.md's second, and short enough that rows die young,
   * before the garbage collector's old space).
   */
  intervalMs?: number;
  /** Rows per INSERT (default 500): a full batch is stored at once. */
  maxBatch?: number;
  /** Rows kept while the database cannot be reached (default 100,000); beyond it the oldest are logged and dropped. */
  maxBuffered?: number;
  /** `auditLog: stdout`: where each stored row's JSON goes, one line each. */
  mirror?: (line: string) => void;
  log?: { error(obj: unknown, msg: string): void };
}

export function createAuditWriter(opts: AuditWriterOptions): AuditWriter {
  const intervalMs = opts.intervalMs ?? 200;
  const maxBatch = opts.maxBatch ?? 500;
  const maxBuffered = opts.maxBuffered ?? 100_000;
  let buffer: AuditRow[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let closed = false;

  const mirror = (rows: readonly AuditRow[]): void => {
    if (opts.mirror) for (const r of rows) opts.mirror(r.content);
  };

  async function storeEach(batch: readonly AuditRow[]): Promise<void> {
    for (const row of batch) {
      try {
        await insertAuditRows(opts.db, [row]);
      } catch (err) {
        if (!refusesData(err)) throw err;
        opts.log?.error({ err, id: row.id }, 'an audit event could not be stored and was dropped');
      }
    }
  }

  async function store(): Promise<void> {
    while (buffer.length > 0) {
      const batch = buffer.slice(0, maxBatch);
      try {
        await insertAuditRows(opts.db, batch);
      } catch (err) {
        if (refusesData(err)) {
          // The database refused a row, not the connection: store the rows one by one, so that one row that cannot
          // be stored never holds back the others (it is logged, with its id, and dropped).
          await storeEach(batch);
          buffer = buffer.slice(batch.length);
          mirror(batch);
          continue;
        }
        // Kept for the next attempt (the database may be restarting); never more than maxBuffered rows.
        opts.log?.error({ err, rows: buffer.length }, 'audit events could not be stored; retrying');
        if (buffer.length > maxBuffered) {
          const dropped = buffer.splice(0, buffer.length - maxBuffered);
          opts.log?.error(
            { dropped: dropped.length, ids: dropped.slice(0, 10).map((r) => r.id) },
            'audit buffer full: oldest events dropped',
          );
        }
        schedule();
        return;
      }
      buffer = buffer.slice(batch.length);
      mirror(batch);
    }
  }

  function run(): Promise<void> {
    if (timer) clearTimeout(timer);
    timer = undefined;
    running = running.then(store, store);
    return running;
  }

  function schedule(): void {
    if (timer || closed) return;
    timer = setTimeout(() => void run(), intervalMs);
    timer.unref?.();
  }

  return {
    add(row) {
      buffer.push(row);
      if (buffer.length >= maxBatch) void run();
      else schedule();
    },
    stored: mirror,
    flush: run,
    buffered: () => buffer.length,
    async close() {
      closed = true;
      await run();
    },
  };
}

/**
 * Whether PostgreSQL refused the statement's data: a SQLSTATE outside the connection and resource classes (a socket's
 * error code, such as ECONNREFUSED, is no SQLSTATE).
 */
function refusesData(err: unknown): boolean {
  const state = sqlState(err);
  return state !== undefined && /^[0-9A-Z]{5}$/.test(state) && !/^(08|53|57|58|XX)/.test(state);
}
