// The real streaming replica the read-replica tests drive (scripts/test-replica.sh makes it; .ci/run exports
// TEST_REPLICA_URL): replay pause and resume, waiting for it to catch up, stopping and starting its cluster, and one
// lock so that the files that pause or stop it never run at the same time (vitest runs two files at once).
import { execFile } from 'node:child_process';
import os from 'node:os';
import { promisify } from 'node:util';
import pg from 'pg';
import type { Db } from '../../src/storage/db.js';
import { openPostgres } from '../../src/storage/postgres.js';
import { parseLsn, type ReadRouter } from '../../src/storage/replicas.js';

export const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `ok` until it holds (or throws after `ms`): waits for replication, never asserts on time. */
export async function until(what: string, ok: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** `<version> <cluster>` of the Debian cluster listening on the replica's port (to stop and start it). */
export async function replicaCluster(replicaUrl: string): Promise<[string, string] | undefined> {
  // pg_ctlcluster needs root (or the postgres user).
  if (process.getuid?.() !== 0 && os.userInfo().username !== 'postgres') return undefined;
  try {
    const port = new URL(replicaUrl).port || '5432';
    const { stdout } = await run('pg_lsclusters', ['-h']);
    const row = stdout
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .find((f) => f[2] === port);
    return row ? [row[0] as string, row[1] as string] : undefined;
  } catch {
    return undefined;
  }
}

/** Any number: the key of the session-level advisory lock on the primary that the replica's test files take. */
const LOCK_KEY = 30_0530_0433;

/**
 * Waits until no other test file drives the replica, then holds it (a session advisory lock on the primary, released
 * when the returned function runs or the process dies). Call it first in beforeAll, with a hook timeout that covers
 * the other file's run.
 */
export async function holdReplica(primaryUrl: string): Promise<() => Promise<void>> {
  const client = new pg.Client({ connectionString: primaryUrl });
  await client.connect();
  await client.query('SELECT pg_advisory_lock($1)', [LOCK_KEY]);
  return async () => {
    await client.query('SELECT pg_advisory_unlock($1)', [LOCK_KEY]).catch(() => undefined);
    await client.end().catch(() => undefined);
  };
}

/** Replay control of the replica (through its `postgres` database) and the wait for it to catch up with `primary`. */
export interface ReplicaControl {
  admin: Db;
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Waits until the replica has replayed everything the primary has written so far (and `router` knows). */
  caughtUp(router: ReadRouter): Promise<void>;
  /** Waits until the test schema's tables have reached the replica. */
  schemaArrived(schema: string): Promise<void>;
  /** Leaves the replica as found: replaying and running. */
  restore(): Promise<void>;
  close(): Promise<void>;
}

export async function replicaControl(primary: Db, replicaUrl: string): Promise<ReplicaControl> {
  const url = new URL(replicaUrl);
  url.pathname = '/postgres';
  const admin = await openPostgres(url.toString(), { max: 2 });
  const resume = async (): Promise<void> => {
    await admin.query('SELECT pg_wal_replay_resume()');
  };
  return {
    admin,
    resume,
    async pause() {
      await admin.query('SELECT pg_wal_replay_pause()');
      await until('replay paused', async () => {
        const r = await admin.query<{ s: string }>('SELECT pg_get_wal_replay_pause_state() AS s');
        return r.rows[0]?.s === 'paused';
      });
    },
    async caughtUp(router) {
      const target = parseLsn(
        (await primary.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]?.l as string,
      );
      await until('the replica to catch up', async () => {
        await router.check();
        const s = router.status()[0];
        return s?.state === 'ok' && s.replayLsn !== undefined && parseLsn(s.replayLsn) >= target;
      });
    },
    async schemaArrived(schema) {
      await until('the schema on the replica', async () => {
        const probe = await openPostgres(replicaUrl, { max: 1 });
        try {
          const r = await probe.query<{ t: string | null }>(
            `SELECT to_regclass('${schema}.resources')::text AS t`,
          );
          return r.rows[0]?.t != null;
        } finally {
          await probe.close();
        }
      });
    },
    async restore() {
      await resume().catch(() => undefined);
      const cluster = await replicaCluster(replicaUrl);
      if (cluster) await run('pg_ctlcluster', [...cluster, 'start']).catch(() => undefined);
    },
    close: () => admin.close(),
  };
}
