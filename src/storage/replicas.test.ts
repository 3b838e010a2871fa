// The read router without a replica (config, WAL positions, every read on the primary) and, when a real streaming
// replica is there (TEST_REPLICA_URL, scripts/test-replica.sh), two instances sharing a login's last write through
// Redis. The HTTP behaviour is tested in test/api/read-replicas.test.ts.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from '../config/config.js';
import { openTestPostgres } from '../../test/support/db.js';
import { openCache } from './cache/index.js';
import type { CacheStore } from './cache/cache.js';
import type { Db } from './db.js';
import {
  createReadRouter,
  openReplicas,
  parseLsn,
  primaryOnly,
  replicaName,
  type ReadRouter,
} from './replicas.js';

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
