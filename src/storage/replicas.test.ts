// The read router without a replica (config, WAL positions, every read on the primary) and, when a real streaming
// replica is there (TEST_REPLICA_URL, scripts/test-replica.sh), two instances sharing a login's last write through
// Redis. The HTTP behaviour is tested in test/api/read-replicas.test.ts.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../config/config.js';
import { openTestPostgres } from '../../test/support/db.js';
import { openCache } from './cache/index.js';
import type { CacheStore } from './cache/cache.js';
import { DbUnavailableError, type Db } from './db.js';
import {
  createReadRouter,
  openReplicas,
  parseLsn,
  passwordRedactor,
  primaryOnly,
  redactCredentials,
  replicaName,
  replicaNames,
  type ReadRouter,
} from './replicas.js';

/** A Db whose queries answer `answer(sql)` (or throw what it throws): the primary's or a replica's probe. */
function fakeDb(answer: (sql: string) => Record<string, unknown>[]): Db {
  const query = async <T>(sql: string) => {
    const rows = answer(sql) as T[];
    return { rows, rowCount: rows.length };
  };
  return {
    kind: 'postgres',
    query,
    transaction: (fn) => fn({ query }),
    session: (fn) => fn({ query }),
    exec: async () => undefined,
    close: async () => undefined,
  };
}

/** A logger keeping every line as JSON text. */
function captureLog(): {
  lines: string[];
  warn(o: object, m: string): void;
  info(o: object, m: string): void;
} {
  const lines: string[] = [];
  return {
    lines,
    warn: (o, m) => void lines.push(JSON.stringify({ ...o, msg: m })),
    info: (o, m) => void lines.push(JSON.stringify({ ...o, msg: m })),
  };
}

describe('read replica configuration', () => {
  it('takes databaseReadUrls (a comma-separated DATABASE_READ_URLS) only with an external PostgreSQL', () => {
    const c = loadConfig([], {
      DATABASE_URL: 'postgres://p@db/cinder',
      DATABASE_READ_URLS: 'postgres://r1/cinder, postgresql://r2:5433/cinder',
      DATABASE_READ_MAX_LAG_MS: '250',
    });
    expect(c.databaseReadUrls).toEqual(['postgres://r1/cinder', 'postgresql://r2:5433/cinder']);
    expect(c.databaseReadMaxLagMs).toBe(250);
    expect(parseConfig({}).databaseReadUrls).toEqual([]);
    expect(() => parseConfig({ databaseReadUrls: ['postgres://r1/cinder'] })).toThrow(ConfigError);
    expect(() => parseConfig({ databaseReadUrls: ['postgres://r1/cinder'] })).toThrow(/databaseUrl/);
    expect(() =>
      parseConfig({ databaseUrl: 'postgres://p/c', databaseReadUrls: ['http://r1/cinder'] }),
    ).toThrow(/^Invalid configuration: databaseReadUrls\.0: /);
    expect(() => parseConfig({ databaseUrl: 'postgres://p/c', databaseReadMaxLagMs: 0 })).toThrow(
      /databaseReadMaxLagMs/,
    );
  });

  it('reads WAL positions as PostgreSQL orders them, and names a replica without its password', () => {
    expect(parseLsn('0/0')).toBe(0n);
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
    expect(parseLsn('0/BA000018') > parseLsn('0/B9FFFFFF')).toBe(true);
    expect(() => parseLsn('nope')).toThrow();
    expect(replicaName('postgres://u:secret@r1.internal:5433/cinder')).toBe('r1.internal:5433/cinder');
  });

  it('removes passwords from the texts it logs: as written, percent-decoded, and in any URL quoted whole', () => {
    const redact = passwordRedactor([
      'postgres://reader:pl%40in%2Fpw@r1.internal:5433/cinder',
      'postgres://u:p@ss@r2/cinder',
      'postgres://u:n0tAp0rt@r3:99999/cinder',
      'postgres://u:sl/ash@r5/cinder',
      undefined,
      'postgres://nopassword@r4/cinder',
    ]);
    const text = [
      'connect to postgres://reader:pl%40in%2Fpw@r1.internal:5433/cinder failed',
      'password "pl@in/pw" refused',
      'also pl%40in%2Fpw',
      'Invalid URL postgres://u:p@ss@r2/cinder',
      'bad port in postgres://u:n0tAp0rt@r3:99999/cinder',
      'and p@ss alone, and sl/ash',
      'another server postgres://admin:hunter2@db.internal/x',
    ].join('\n');
    const out = redact(text);
    for (const secret of ['pl%40in%2Fpw', 'pl@in/pw', 'p@ss', 'n0tAp0rt', 'sl/ash', 'hunter2'])
      expect(out, secret).not.toContain(secret);
    // What is not secret stays, so that the message still says what failed.
    expect(out).toContain('postgres://reader:***@r1.internal:5433/cinder failed');
    expect(out).toContain('Invalid URL postgres://u:***@r2/cinder');
    expect(out).toContain('postgres://admin:***@db.internal/x');
    expect(redactCredentials('postgres://r1:5432/db and user@example.org')).toBe(
      'postgres://r1:5432/db and user@example.org',
    );
    expect(replicaNames(['postgres://a:x@r1/db', 'postgres://b:y@r1/db', 'postgres://r2/db', 'x'])).toEqual([
      'r1:5432/db',
      'r1:5432/db#2',
      'r2:5432/db',
      'replica',
    ]);
  });

  it('never logs or reports the password of a replica whose probes fail', async () => {
    const log = captureLog();
    // A replica that refuses connections (port 1 of this machine), with a password in its URL.
    const replicas = await openReplicas(['postgres://reader:Sup3rS3cret@127.0.0.1:1/cinder'], {
      max: 1,
      connectTimeoutMs: 1000,
      statementTimeoutMs: 1000,
    });
    // And one whose reads fail with a driver error that quotes its URL whole (as a URL parser's message may).
    const url = 'postgres://reader:An0therS3cret@r9.internal/cinder';
    const [quoting] = await openReplicas([url], { max: 1, connectTimeoutMs: 1000, statementTimeoutMs: 1000 });
    const q = quoting as (typeof replicas)[number];
    await Promise.all([q.db.close(), q.probe.close()]);
    const failing = fakeDb(() => {
      throw new DbUnavailableError(new Error(`cannot parse ${url}: password An0therS3cret`));
    });
    const healthy = fakeDb(() => [{ standby: true, replay: '0/10', age: 0 }]);
    const router = createReadRouter({
      primary: fakeDb(() => [{ lsn: '0/10', n: 'primary' }]),
      replicas: [...replicas, { ...q, db: failing, probe: healthy }],
      log,
    });
    try {
      await router.check();
      expect(router.status().map((r) => r.state)).toEqual(['down', 'ok']);
      // The read fails on the replica and is answered by the primary; the replica is marked down, saying why.
      const r = await router.reader().query<{ n: string }>('SELECT 1');
      expect(r.rows[0]?.n).toBe('primary');
      const status = router.status();
      expect(status.map((x) => x.state)).toEqual(['down', 'down']);
      expect(status.map((x) => x.name)).toEqual(['127.0.0.1:1/cinder', 'r9.internal:5432/cinder']);
      expect(status[0]?.reason).toMatch(/ECONNREFUSED/);
      expect(status[1]?.reason).toContain('postgres://reader:***@r9.internal/cinder');
      expect(log.lines.filter((l) => l.includes('read replica skipped'))).toHaveLength(2);
      const said = JSON.stringify(status) + log.lines.join('\n');
      expect(said).not.toContain('Sup3rS3cret');
      expect(said).not.toContain('An0therS3cret');
    } finally {
      await router.close();
    }
  });

  it('reports how far each replica is behind the primary at the last probe, in bytes and milliseconds', async () => {
    let primaryAt = '0/3000';
    let replay = '0/1000';
    let age: number | null = 1500;
    let standby = true;
    const probe = fakeDb((sql) => {
      if (sql.includes('pg_is_in_recovery')) return [{ standby, replay, age }];
      throw new Error(`unexpected ${sql}`);
    });
    const router = createReadRouter({
      primary: fakeDb(() => [{ lsn: primaryAt }]),
      replicas: [{ name: 'r1:5432/cinder', db: probe, probe }],
      maxLagMs: 1000,
      clock: () => 1_000_000,
    });
    await router.check();
    expect(router.status()[0]).toMatchObject({ state: 'lagging', lagMs: 1500, behindBytes: 0x2000 });
    replay = '0/3000';
    age = null;
    await router.check();
    expect(router.status()[0]).toMatchObject({ state: 'ok', lagMs: 0, behindBytes: 0 });
    // Beyond 4 GiB of WAL (the high half of the position).
    primaryAt = '1/10';
    replay = '0/FFFFFFF0';
    await router.check();
    expect(router.status()[0]?.behindBytes).toBe(0x20);
    // A server that is not a standby: nothing is known of its lag.
    standby = false;
    await router.check();
    expect(router.status()[0]?.state).toBe('not-standby');
    expect(router.status()[0]?.behindBytes).toBeUndefined();
    expect(router.status()[0]?.lagMs).toBeUndefined();
    await router.close();
  });

  it('without replicas, reads and writes all go to the primary', async () => {
    const db = { kind: 'pglite' } as unknown as Db;
    const router = createReadRouter({ primary: db, replicas: [] });
    expect(router.enabled).toBe(false);
    expect(router.reader({ login: 'x' })).toBe(db);
    await router.writing('x')();
    expect(await router.primaryLsn()).toBeUndefined();
    expect(primaryOnly(db).status()).toEqual([]);
  });
});

const primaryUrl = process.env.TEST_DATABASE_URL;
const replicaUrl = process.env.TEST_REPLICA_URL;
const redisUrl = process.env.TEST_REDIS_URL;

describe.skipIf(!primaryUrl || !replicaUrl || !redisUrl)(
  'read replicas on two instances (needs TEST_DATABASE_URL, TEST_REPLICA_URL and TEST_REDIS_URL)',
  () => {
    const schema = `t_${randomBytes(6).toString('hex')}`;
    let db: Db;
    let caches: CacheStore[];
    let routers: ReadRouter[];
    /** Whether the statement ran on a standby: which server answered. */
    const onReplica = async (d: Db): Promise<boolean> =>
      (await d.query<{ r: boolean }>('SELECT pg_is_in_recovery() AS r')).rows[0]?.r === true;

    beforeAll(async () => {
      db = await openTestPostgres(primaryUrl as string, schema);
      caches = [0, 1].map(() =>
        openCache({
          redisUrl: redisUrl as string,
          keyPrefix: `test-${schema}:`,
          log: { warn: () => undefined },
        }),
      );
      routers = await Promise.all(
        caches.map(async (shared) =>
          createReadRouter({
            primary: db,
            replicas: await openReplicas([replicaUrl as string], {
              max: 2,
              connectTimeoutMs: 2000,
              statementTimeoutMs: 10_000,
            }),
            maxLagMs: 60_000,
            // No periodic probe: the positions the routers know change only when the test probes.
            checkMs: 3_600_000,
            shared,
          }),
        ),
      );
    });
    afterAll(async () => {
      await Promise.all((routers ?? []).map((r) => r.close()));
      await Promise.all((caches ?? []).map((c) => c.close()));
      await db?.close();
    });

    it("sends a login's reads on instance B to the primary after its write on instance A", async () => {
      const [a, b] = routers as [ReadRouter, ReadRouter];
      await Promise.all([a.check(), b.check()]);
      expect(b.status()[0]?.state).toBe('ok');
      const writer = `login-${randomUUID()}`;
      const bystander = `login-${randomUUID()}`;
      expect(await onReplica(b.reader({ login: writer }))).toBe(true);
      // A write by `writer` through instance A (it commits after the replica's last probe).
      const done = a.writing(writer);
      // While it runs, A sends the login's reads to the primary.
      expect(await onReplica(a.reader({ login: writer }))).toBe(false);
      await db.query('CREATE TABLE IF NOT EXISTS rw_marker (n int)');
      await done();
      // B has not seen the write itself; Redis tells it the login's position, which the replica has not been seen to
      // pass: the primary. Another login stays on the replica.
      expect(await onReplica(b.reader({ login: writer }))).toBe(false);
      expect(await onReplica(b.reader({ login: bystander }))).toBe(true);
      // A job reading from a position not yet probed on the replica reads from the primary too.
      expect(await onReplica(b.reader({ after: (await a.primaryLsn()) as string }))).toBe(false);
      // Once the replica is probed past the write, the login is served by the replica again.
      for (let i = 0; i < 200; i++) {
        await b.check();
        if (await onReplica(b.reader({ login: writer }))) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(await onReplica(b.reader({ login: writer }))).toBe(true);
    });
  },
);
