// GET /healthcheck (API.md §1): 200 {ok: true, ...} when the server accepts requests and reaches its database;
// 503 {ok: false, ...} when the database is unreachable. Redis is reported but does not decide `ok`: while it is
// down, caches and rate limits fall back to this process's memory and requests are still served. Read replicas
// (databaseReadUrls) do not decide it either: reads go to the primary while none is in use. The answer is public, so
// of them it says only how many are configured and how many are in use (as last probed; it sends no query to them):
// never a name, host, URL or reason. The details are in /metrics, for the operator.
import type { FastifyInstance } from 'fastify';
import type { Cache } from '../../storage/cache/cache.js';
import type { Db } from '../../storage/db.js';
import type { ReadRouter } from '../../storage/replicas.js';

type Status = 'ok' | 'unreachable';

export function healthRoutes(
  app: FastifyInstance,
  deps: { db: Db; cache: Cache; replicas?: Pick<ReadRouter, 'enabled' | 'status'> },
): void {
  app.get('/healthcheck', { config: { public: true } }, async (_req, reply) => {
    const [database, cache] = await Promise.all([
      deps.db.query('SELECT 1').then(
        (): Status => 'ok',
        (): Status => 'unreachable',
      ),
      deps.cache.health ? deps.cache.health().catch((): Status => 'unreachable') : ('ok' as Status),
    ]);
    const ok = database === 'ok';
    const replicas = deps.replicas?.enabled ? deps.replicas.status() : undefined;
    return reply.code(ok ? 200 : 503).send({
      ok,
      database: { kind: deps.db.kind, status: database },
      cache: { kind: deps.cache.kind, status: cache },
      ...(replicas
        ? {
            replicas: {
              configured: replicas.length,
              inUse: replicas.filter((r) => r.state === 'ok').length,
            },
          }
        : {}),
    });
  });
}
