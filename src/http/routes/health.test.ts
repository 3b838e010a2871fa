// GET /healthcheck with read replicas (health.ts): a replica down or lagging never fails it (the primary serves), and
// its public answer says only how many replicas are configured and in use, never a name, host, URL or reason.
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { Cache } from '../../storage/cache/cache.js';
import type { Db } from '../../storage/db.js';
import type { ReplicaStatus } from '../../storage/replicas.js';
import { healthRoutes } from './health.js';

function primary(up: boolean): Db {
  return {
    kind: 'postgres',
    query: async () => {
      if (!up) throw new Error('down');
      return { rows: [], rowCount: 0 };
    },
  } as unknown as Db;
}
const cache = { kind: 'memory' } as unknown as Cache;

async function healthcheck(db: Db, replicas?: { enabled: boolean; status(): ReplicaStatus[] }) {
  const app = Fastify();
  healthRoutes(app, { db, cache, ...(replicas ? { replicas } : {}) });
  try {
    const res = await app.inject({ method: 'GET', url: '/healthcheck' });
    return { status: res.statusCode, body: res.body, json: res.json() as Record<string, unknown> };
  } finally {
    await app.close();
  }
}

const secretive: ReplicaStatus[] = [
  { name: 'replica-a.internal:5433/cinder', state: 'ok', lagMs: 3, replayLsn: '0/10' },
  {
    name: 'replica-b.internal:5432/cinder',
    state: 'down',
    reason: 'connect ECONNREFUSED 10.1.2.3:5432 postgres://reader:***@replica-b.internal/cinder',
  },
  { name: 'replica-c.internal:5432/cinder', state: 'lagging', lagMs: 60_000 },
];

describe('healthcheck with read replicas', () => {
  it('counts the replicas configured and in use, and says nothing else of them', async () => {
    const res = await healthcheck(primary(true), { enabled: true, status: () => secretive });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ ok: true, replicas: { configured: 3, inUse: 1 } });
    expect(Object.keys(res.json.replicas as object).sort()).toEqual(['configured', 'inUse']);
    expect(res.body).not.toMatch(/internal|5433|10\.1\.2\.3|postgres:|reader|ECONNREFUSED|lag|0\/10/);
  });

  it('stays 200 with every replica down: the primary serves the reads', async () => {
    const down = secretive.map((r) => ({ ...r, state: 'down' as const }));
    const res = await healthcheck(primary(true), { enabled: true, status: () => down });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ ok: true, replicas: { configured: 3, inUse: 0 } });
  });

  it('is decided by the primary alone: 503 when it is unreachable, whatever the replicas', async () => {
    const res = await healthcheck(primary(false), { enabled: true, status: () => secretive });
    expect(res.status).toBe(503);
    expect(res.json).toMatchObject({ ok: false, database: { status: 'unreachable' } });
  });

  it('answers as before without replicas', async () => {
    for (const replicas of [undefined, { enabled: false, status: () => [] }]) {
      const res = await healthcheck(primary(true), replicas);
      expect(res.json).toEqual({
        ok: true,
        database: { kind: 'postgres', status: 'ok' },
        cache: { kind: 'memory', status: 'ok' },
      });
    }
  });
});
