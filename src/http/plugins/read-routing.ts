// Read replicas at the HTTP edge (storage/replicas.ts decides): a request that may write announces its login's write
// before its handler runs and records the primary's WAL position once it has committed, before the answer leaves;
// read routes take their database from `reader(request)`. A route that only reads although it is not a GET (POST
// _search, a POSTed view) says so with `config: { readOnly: true }`.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Db } from '../../storage/db.js';
import type { ReadRouter } from '../../storage/replicas.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route only reads, whatever its method: it does not count as its login's write (read-routing.ts). */
    readOnly?: boolean;
  }
}

const wroteKey = Symbol('read-routing.wrote');
type Tracked = FastifyRequest & { [wroteKey]?: () => Promise<void> };

/** Registers the hooks; returns the function read routes take their database from. */
export function registerReadRouting(
  app: FastifyInstance,
  router: ReadRouter,
): (request: FastifyRequest) => Db {
  if (!router.enabled) return () => router.reader();
  app.addHook('preHandler', async (request) => {
    const login = request.principal?.loginId;
    if (!login || request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS')
      return;
    if (request.routeOptions.config.readOnly) return;
    (request as Tracked)[wroteKey] = router.writing(login);
  });
  const committed = async (request: FastifyRequest): Promise<void> => {
    const done = (request as Tracked)[wroteKey];
    if (done) await done();
  };
  // onSend: the write has committed and the client cannot send its next request before this answer; onResponse
  // covers answers that never reached onSend (the done function runs once).
  app.addHook('onSend', async (request) => committed(request));
  app.addHook('onResponse', async (request) => committed(request));
  return (request) => router.reader(request.principal ? { login: request.principal.loginId } : {});
}
