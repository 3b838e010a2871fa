// GET /healthcheck (API.md §1): 200 {ok: true} when the server accepts requests and reaches its database.
import type { FastifyInstance } from 'fastify';
import type { Db } from '../../storage/db.js';

export function healthRoutes(app: FastifyInstance, deps: { db: Db }): void {
  app.get('/healthcheck', { config: { public: true } }, async (_req, reply) => {
    let database = 'ok';
    try {
      await deps.db.query('SELECT 1');
    } catch {
      database = 'unreachable';
    }
    const ok = database === 'ok';
    return reply.code(ok ? 200 : 503).send({ ok, database: { kind: deps.db.kind, status: database } });
  });
}
