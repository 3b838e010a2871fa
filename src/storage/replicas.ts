// Read replicas (config `databaseReadUrls`): the ONE place that decides whether a read goes to a PostgreSQL streaming
// replica or to the primary. Callers ask `reader({ login })` for a Db and use it as any other; nothing else knows
// replicas exist.
//
// - A replica is used only while it is healthy: a probe every `checkMs` reads its replay position and lag, and it is
//   skipped while it does not answer, is not a standby, or lags more than `maxLagMs`. A query that fails on it for a
//   reason of the replica (connection lost, timeout, a conflict with recovery) marks it down and runs again on the
//   primary, so the client never sees the replica's failure; the next good probe brings it back.
// - Read-your-writes: a login's write is announced by `writing(login)` before it starts; until it has committed, that
//   login's reads go to the primary; after, the primary's WAL position (pg_current_wal_lsn()) is remembered for the
//   login, and a replica serves the login again only once its probed replay position has passed it. The positions
//   are kept per process and, with a shared cache (Redis), shared by every instance.
// - Writes, transactions, sessions (advisory locks, LISTEN) and scripts always go to the primary.
// - `status()` is what operators see (metrics.ts gauges, the healthcheck's counts); the reasons it keeps and logs
//   have the replica URL's password removed (passwordRedactor).
import { LRUCache } from 'lru-cache';
import type { Cache } from './cache/cache.js';
import { DbUnavailableError, sqlState, type Db, type QueryOptions, type QueryResult } from './db.js';
import { openPostgres } from './postgres.js';

export type ReplicaState = 'unknown' | 'ok' | 'down' | 'lagging' | 'not-standby';

export interface ReplicaStatus {
  /** `host:port/database` of the replica (never its password). */
  name: string;
  state: ReplicaState;
  /** Upper bound of the replay lag at the last probe, milliseconds. */
  lagMs?: number;
  /** WAL bytes the replica had not replayed of what the primary had written at the last probe (0: none). */
  behindBytes?: number;
  /** Replay position at the last probe (`X/Y`). */
  replayLsn?: string;
  /** Why it is skipped (state down or not-standby): an error message, without the replica URL's password. */
  reason?: string;
}

export interface ReadRouter {
  /** Whether any replica is configured (without one, `reader` is always the primary and `writing` does nothing). */
  readonly enabled: boolean;
  /**
   * The database for the reads of a caller: a replica that is healthy and has replayed what the caller must see (the
   * login's own writes, or WAL position `after` for a job), else the primary. Its transaction, session and exec are
   * the primary's.
   */
  reader(opts?: { login?: string; after?: string }): Db;
  /**
   * Announces a write by `login`: its reads go to the primary until the returned function (called once the write has
   * committed, before the answer leaves) has recorded the primary's WAL position for it.
   */
  writing(login: string): () => Promise<void>;
  /** The primary's WAL position now (`X/Y`), or undefined without replicas. */
  primaryLsn(): Promise<string | undefined>;
  status(): ReplicaStatus[];
  /** Probes every replica now (start-up and tests; they are otherwise probed every `checkMs`). */
  check(): Promise<void>;
  start(): void;
  /** Stops the probes and closes the replicas' pools (not the primary). */
  close(): Promise<void>;
}

export interface ReplicaDbs {
  name: string;
  /** Removes the replica's password from a text (an error message) before it is logged; openReplicas sets it. */
  redact?: (text: string) => string;
  /** The pool the reads use. */
  db: Db;
  /** A pool of one connection for the probes, with short timeouts (a hung replica fails its probe quickly). */
  probe: Db;
}

export interface ReadRouterOptions {
  primary: Db;
  replicas: readonly ReplicaDbs[];
  /** A replica lagging more than this (milliseconds) is skipped. Default 5000. */
  maxLagMs?: number;
  /** Milliseconds between probes. Default 1000. */
  checkMs?: number;
  /** With Redis: the logins' last-write positions are shared by every instance through it. */
  shared?: Cache;
  log?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };
  clock?: () => number;
}

/** An `X/Y` WAL position as one number (PostgreSQL's pg_lsn). */
export function parseLsn(text: string): bigint {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!m) throw new Error(`not a WAL position: ${text.slice(0, 40)}`);
  return (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`);
}

function formatLsn(n: bigint): string {
  return `${(n >> 32n).toString(16).toUpperCase()}/${(n & 0xffffffffn).toString(16).toUpperCase()}`;
}

/** A position no replica reaches: the login reads from the primary (its write's position could not be read). */
const PRIMARY_ONLY = 1n << 64n;
const SHARED_PREFIX = 'replica-lsn:';

/**
 * Errors after which a read is run again on the primary: the replica cannot be reached or timed out (DbUnavailable),
 * a conflict with recovery cancelled the statement (40001 on a standby), or the replica has not replayed a migration
 * yet (undefined table or column).
 */
function replicaFault(err: unknown): 'down' | 'retry' | undefined {
  if (err instanceof DbUnavailableError) return 'down';
  const code = sqlState(err);
  if (code === '40001' || code === '57P04') return 'retry';
  if (code === '42P01' || code === '42703' || code === '42883') return 'retry';
  return undefined;
}

interface Replica extends ReplicaDbs {
  state: ReplicaState;
  replay: bigint;
  lagMs?: number;
  behind?: bigint;
  reason?: string;
}

/** A router with no replica: every read on the primary. */
export function primaryOnly(primary: Db): ReadRouter {
  return {
    enabled: false,
    reader: () => primary,
    writing: () => async () => undefined,
    primaryLsn: async () => undefined,
    status: () => [],
    check: async () => undefined,
    start: () => undefined,
    close: async () => undefined,
  };
}

export function createReadRouter(opts: ReadRouterOptions): ReadRouter {
  const { primary } = opts;
  if (opts.replicas.length === 0) return primaryOnly(primary);
  const maxLagMs = opts.maxLagMs ?? 5000;
  const checkMs = opts.checkMs ?? 1000;
  const now = opts.clock ?? Date.now;
  const shared = opts.shared?.kind === 'redis' ? opts.shared : undefined;
  // How long a login's write position is kept: by then every replica in use has replayed it (one lagging more than
  // maxLagMs is skipped), with room for the probes' interval.
  const rememberMs = Math.max(30_000, 10 * maxLagMs + 10 * checkMs);
  const replicas: Replica[] = opts.replicas.map((r) => ({ ...r, state: 'unknown', replay: 0n }));
  const lastWrite = new LRUCache<string, bigint>({ max: 100_000, ttl: rememberMs });
  // Logins with a write running (a count); bounded in time too, should a request never report its end.
  const pending = new LRUCache<string, number>({ max: 100_000, ttl: rememberMs });
  // The primary's position at recent probes, newest last: a replica that has replayed up to a sample is at most
  // (now - sample time) behind.
  const samples: { at: number; lsn: bigint }[] = [];
  let next = 0;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;

  const setState = (r: Replica, state: ReplicaState, why?: string): void => {
    // Reasons are error messages, which could quote a connection string: never log or keep a password.
    const reason = why === undefined ? undefined : redactCredentials(r.redact ? r.redact(why) : why);
    if (state === 'down' || state === 'not-standby') {
      r.lagMs = undefined;
      r.behind = undefined;
    }
    if (r.state !== state) {
      const fields = { replica: r.name, from: r.state, to: state, ...(reason ? { reason } : {}) };
      if (state === 'ok') opts.log?.info?.(fields, 'read replica in use');
      else if (r.state === 'ok' || r.state === 'unknown') opts.log?.warn(fields, 'read replica skipped');
    }
    r.state = state;
    r.reason = reason;
  };

  const currentLsn = async (): Promise<bigint> => {
    const r = await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    return parseLsn((r.rows[0] as { lsn: string }).lsn);
  };

  async function probe(r: Replica, primaryAt: bigint | undefined): Promise<void> {
    try {
      const q = await r.probe.query<{ standby: boolean; replay: string | null; age: number | null }>(
        `SELECT pg_is_in_recovery() AS standby, pg_last_wal_replay_lsn()::text AS replay,
           (extract(epoch FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8 AS age`,
      );
      const row = q.rows[0];
      if (!row?.standby || !row.replay) {
        setState(r, 'not-standby', 'pg_is_in_recovery() is false: not a streaming replica');
        return;
      }
      r.replay = parseLsn(row.replay);
      r.behind = primaryAt === undefined ? undefined : primaryAt > r.replay ? primaryAt - r.replay : 0n;
      // Lag: 0 when it has replayed what the primary had at this probe; else the smaller of two upper bounds — the age
      // of the last transaction it replayed, and the age of the newest probe of the primary it has passed.
      let lag = 0;
      if (primaryAt === undefined || r.replay < primaryAt) {
        const passed = [...samples].reverse().find((s) => s.lsn <= r.replay);
        lag = Math.min(row.age ?? Infinity, passed ? now() - passed.at : Infinity);
      }
      r.lagMs = Number.isFinite(lag) ? Math.max(0, Math.round(lag)) : undefined;
      if (lag > maxLagMs) setState(r, 'lagging', `replay lag above databaseReadMaxLagMs (${maxLagMs} ms)`);
      else setState(r, 'ok');
    } catch (err) {
      setState(r, 'down', err instanceof Error ? err.message : String(err));
    }
  }

  async function check(): Promise<void> {
    let primaryAt: bigint | undefined;
    try {
      primaryAt = await currentLsn();
      samples.push({ at: now(), lsn: primaryAt });
      // Enough history to tell lags up to a few times the bound.
      while (samples.length > 2 && (samples[0] as { at: number }).at < now() - 4 * maxLagMs - 2 * checkMs)
        samples.shift();
    } catch {
      // The primary is unreachable: the replicas' lag is judged by their replay timestamps alone.
    }
    await Promise.all(replicas.map((r) => probe(r, primaryAt)));
  }

  const loop = (): void => {
    if (closed) return;
    timer = setTimeout(() => {
      void check().finally(loop);
    }, checkMs);
    timer.unref();
  };

  /** The position `login` must see, or undefined (no recent write); PRIMARY_ONLY while one of its writes runs. */
  async function required(login: string | undefined, after: string | undefined): Promise<bigint | undefined> {
    let need = after === undefined ? undefined : parseLsn(after);
    if (login === undefined) return need;
    if (pending.has(login)) return PRIMARY_ONLY;
    const mine = lastWrite.get(login);
    if (mine !== undefined && (need === undefined || mine > need)) need = mine;
    if (shared) {
      const text = await shared.get(SHARED_PREFIX + login).catch(() => undefined);
      const theirs = text === undefined ? undefined : text === 'primary' ? PRIMARY_ONLY : parseLsn(text);
      if (theirs !== undefined && (need === undefined || theirs > need)) need = theirs;
    }
    return need;
  }

  function pick(need: bigint | undefined): Replica | undefined {
    for (let i = 0; i < replicas.length; i++) {
      const r = replicas[(next + i) % replicas.length] as Replica;
      if (r.state === 'ok' && (need === undefined || r.replay >= need)) {
        next = (next + i + 1) % replicas.length;
        return r;
      }
    }
    return undefined;
  }

  function reader(o: { login?: string; after?: string } = {}): Db {
    // Chosen at the first query, kept for the request: its reads see one replica (or the primary) throughout, unless
    // the replica fails, when the rest go to the primary.
    let chosen: Promise<Replica | undefined> | undefined;
    const choose = (): Promise<Replica | undefined> =>
      (chosen ??= required(o.login, o.after).then(pick, () => undefined));
    return {
      kind: primary.kind,
      async query<T>(sql: string, params?: readonly unknown[], qo?: QueryOptions): Promise<QueryResult<T>> {
        const r = await choose();
        if (!r) return primary.query<T>(sql, params, qo);
        try {
          return await r.db.query<T>(sql, params, qo);
        } catch (err) {
          const fault = replicaFault(err);
          if (!fault) throw err;
          if (fault === 'down') setState(r, 'down', err instanceof Error ? err.message : String(err));
          chosen = Promise.resolve(undefined);
          return primary.query<T>(sql, params, qo);
        }
      },
      transaction: (fn) => primary.transaction(fn),
      session: (fn) => primary.session(fn),
      exec: (sql) => primary.exec(sql),
      close: async () => undefined,
    };
  }

  function writing(login: string): () => Promise<void> {
    pending.set(login, (pending.get(login) ?? 0) + 1);
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      let lsn: bigint;
      try {
        lsn = await currentLsn();
      } catch {
        lsn = PRIMARY_ONLY;
      }
      const prev = lastWrite.get(login);
      lastWrite.set(login, prev !== undefined && prev > lsn ? prev : lsn);
      if (shared) {
        const text = lsn === PRIMARY_ONLY ? 'primary' : formatLsn(lsn);
        await shared.set(SHARED_PREFIX + login, text, rememberMs).catch(() => undefined);
      }
      const n = (pending.get(login) ?? 1) - 1;
      if (n <= 0) pending.delete(login);
      else pending.set(login, n);
    };
  }

  return {
    enabled: true,
    reader,
    writing,
    primaryLsn: async () => formatLsn(await currentLsn()),
    status: () =>
      replicas.map((r) => ({
        name: r.name,
        state: r.state,
        ...(r.lagMs !== undefined ? { lagMs: r.lagMs } : {}),
        ...(r.behind !== undefined ? { behindBytes: Number(r.behind) } : {}),
        ...(r.replay > 0n ? { replayLsn: formatLsn(r.replay) } : {}),
        ...(r.reason ? { reason: r.reason } : {}),
      })),
    check,
    start() {
      if (timer || closed) return;
      void check().finally(loop);
    },
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      await Promise.all(replicas.flatMap((r) => [r.db.close(), r.probe.close()]));
    },
  };
}

/** `host:port/database` of a PostgreSQL URL, for logs, metrics labels and status (never the password). */
export function replicaName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || '5432'}${u.pathname}`;
  } catch {
    return 'replica';
  }
}

/** The names of several replicas, made distinct (`#2`, `#3` after a repeated one): they label metrics and pools. */
export function replicaNames(urls: readonly string[]): string[] {
  const seen = new Map<string, number>();
  return urls.map((url) => {
    const base = replicaName(url);
    const n = (seen.get(base) ?? 0) + 1;
    seen.set(base, n);
    return n === 1 ? base : `${base}#${n}`;
  });
}

// The password runs to the last `@` before a space: a password may hold an unencoded `@`, and more hidden is no harm.
const CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:)[^\s]*@/gi;

/** A text with the password of any `scheme://user:password@` in it replaced by `***`. */
export function redactCredentials(text: string): string {
  return text.replace(CREDENTIALS, '$1***@');
}

/** The password of a connection URL as written in it, as the URL parser reads it, and percent-decoded. */
function passwordsOf(url: string): string[] {
  const found: string[] = [];
  // As written, up to the last `@`: a password may hold an unencoded `@` or `/` (then only this form is found).
  const written = /^[a-z][a-z0-9+.-]*:\/\/[^\s:/@]*:(\S*)@/i.exec(url)?.[1];
  if (written) found.push(written);
  try {
    const password = new URL(url).password;
    if (password) found.push(password);
  } catch {
    // Not a URL the parser takes: the written form is what a message could quote.
  }
  for (const p of [...found]) {
    try {
      found.push(decodeURIComponent(p));
    } catch {
      // Not valid percent-encoding: the raw form is all a message can hold.
    }
  }
  return found;
}

/**
 * A function that removes the passwords of these connection URLs from a text (an error message about a database,
 * which is logged), wherever they appear, and the password of any URL quoted whole.
 */
export function passwordRedactor(urls: readonly (string | undefined)[]): (text: string) => string {
  // Longest first, so that a password containing another is replaced whole.
  const secrets = [...new Set(urls.flatMap((u) => (u ? passwordsOf(u) : [])))]
    .filter((x) => x.length > 0)
    .sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const secret of secrets) out = out.split(secret).join('***');
    return redactCredentials(out);
  };
}

export interface OpenReplicasOptions {
  /** Connections of each replica's read pool. */
  max: number;
  connectTimeoutMs: number;
  /** statement_timeout of the reads (0: none). */
  statementTimeoutMs: number;
  /** Schema instead of `public` (tests). */
  schema?: string;
  onError?: (err: Error) => void;
}

/**
 * The pools of each replica URL. A read waits at most `connectTimeoutMs` for a connection and, on a replica that
 * stopped answering mid-query, the statement timeout plus 2 s before it goes to the primary; a probe at most 2 s.
 */
export async function openReplicas(urls: readonly string[], o: OpenReplicasOptions): Promise<ReplicaDbs[]> {
  const names = replicaNames(urls);
  return Promise.all(
    urls.map(async (url, i) => {
      const redact = passwordRedactor([url]);
      const onError = o.onError;
      // The pool's idle-client errors are logged by the caller: their messages lose the password first.
      const common = {
        ...(o.schema ? { schema: o.schema } : {}),
        ...(onError
          ? {
              onError: (err: Error) =>
                onError(Object.assign(new Error(redact(err.message)), { name: err.name })),
            }
          : {}),
      };
      return {
        name: names[i] as string,
        redact,
        db: await openPostgres(url, {
          ...common,
          max: o.max,
          connectTimeoutMs: o.connectTimeoutMs,
          ...(o.statementTimeoutMs > 0 ? { statementTimeoutMs: o.statementTimeoutMs } : {}),
          queryTimeoutMs: (o.statementTimeoutMs > 0 ? o.statementTimeoutMs : 60_000) + 2000,
        }),
        probe: await openPostgres(url, {
          ...common,
          max: 1,
          connectTimeoutMs: Math.min(o.connectTimeoutMs, 2000),
          statementTimeoutMs: 2000,
          queryTimeoutMs: 2000,
        }),
      };
    }),
  );
}
