// Request metrics (src/metrics): each answered request is counted by method, route pattern and status, and timed.
// The route is Fastify's pattern (`/fhir/R4/:type/:id`), never the URL: no id or query string becomes a label.
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../../metrics/metrics.js';

export function registerHttpMetrics(app: FastifyInstance, metrics: Metrics): void {
  app.addHook('onResponse', (request, reply, done) => {
    metrics.request(request.method, request.routeOptions.url, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}
