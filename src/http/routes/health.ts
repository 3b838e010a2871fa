// GET /healthcheck (API.md §1): 200 {ok: true, ...} when the server accepts requests and reaches its database;
// 503 {ok: false, ...} when the database is unreachable. Redis is reported but does not decide `ok`: while it is
// down, caches and rate limits fall back to this process's memory and requests are still served.
import type { FastifyInstance } from 'fastify';
import type { Cache } from '../../storage/cache/cache.js';
import type { Db } from '../../storage/db.js';

type Status = 'ok' | 'unreachable';

export function healthRoutes(app: FastifyInstance, deps: { db: Db; cache: Cache }): void {
  app.get('/healthcheck', { config: { public: true } }, async (_req, reply) => {
    const [database, cache] = await Promise.all([
      deps.db.query('SELECT 1').then(
        (): Status => 'ok',
        (): Status => 'unreachable',
      ),
      deps.cache.health ? deps.cache.health().catch((): Status => 'unreachable') : ('ok' as Status),
    ]);
    const ok = database === 'ok';
    return reply.code(ok ? 200 : 503).send({
      ok,
      database: { kind: deps.db.kind, status: database },
      cache: { kind: deps.cache.kind, status: cache },
    });
  });
}
