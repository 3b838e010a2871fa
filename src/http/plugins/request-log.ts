// A request id on every log line of a request, including lines logged below the HTTP layer (auth, cache, storage):
// code there is handed a logger from `contextLogger(root)`, which logs through the current request's logger
// (`request.log`, which carries `reqId`) while it runs for a request, and through the root logger otherwise.
// The current request is tracked with AsyncLocalStorage, re-entered after body parsing (whose stream events run
// in the socket's context), as @fastify/request-context does.
// Each request is logged once, when its answer is sent (config `requestLog`): method, path (without the query string:
// search parameters can hold names and identifiers, OAuth ones codes and states), status, response time, client IP;
// at logLevel debug also when it arrives ('request received').
import { AsyncLocalStorage, AsyncResource } from 'node:async_hooks';
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';

const current = new AsyncLocalStorage<FastifyBaseLogger>();

/** A logger that follows the request being served: its lines carry that request's `reqId`. */
export function contextLogger(root: FastifyBaseLogger): FastifyBaseLogger {
  return new Proxy(root, {
    get(target, prop) {
      const log = current.getStore() ?? target;
      const value: unknown = Reflect.get(log, prop, log);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(log) : value;
    },
  });
}

export type RequestLogMode = 'all' | 'errors' | 'none';

/** The request's path without its query string. */
function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** Register first, so that every later hook and the handler run inside the request's context. */
export function registerRequestLog(app: FastifyInstance, mode: RequestLogMode = 'all'): void {
  if (mode !== 'none') {
    const minStatus = mode === 'errors' ? 400 : 0;
    app.addHook('onResponse', (request, reply, done) => {
      if (reply.statusCode >= minStatus) {
        request.log.info(
          {
            method: request.method,
            url: pathOf(request.url),
            statusCode: reply.statusCode,
            responseTime: Math.round(reply.elapsedTime * 100) / 100,
            remoteAddress: request.ip,
          },
          'request completed',
        );
      }
      done();
    });
  }
  // At debug level a request is also logged when it arrives, so that one that never completes can be seen.
  const arrivals = mode !== 'none';
  const scopes = new WeakMap<FastifyRequest, AsyncResource>();
  app.addHook('onRequest', (request, _reply, done) => {
    if (arrivals && (request.log.level === 'debug' || request.log.level === 'trace'))
      request.log.debug({ method: request.method, url: pathOf(request.url) }, 'request received');
    current.run(request.log, () => {
      const scope = new AsyncResource('cinder-request');
      scopes.set(request, scope);
      scope.runInAsyncScope(done);
    });
  });
  app.addHook('preValidation', (request, _reply, done) => {
    const scope = scopes.get(request);
    if (scope) scope.runInAsyncScope(done);
    else done();
  });
}
