// GET {base}metrics: the process's metrics in Prometheus's text format (src/metrics), for the operator's scraper only.
// It exists when the configuration sets `metricsToken`, and answers only a request bearing that token
// (`Authorization: Bearer <metricsToken>`, compared in constant time); FHIR access tokens, whoever they belong to,
// are not accepted. Without `metricsToken` the route is not registered (404).
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { FhirError } from '../../fhir/outcome.js';

export interface MetricsRouteDeps {
  token: string;
  /** The scrape's text: this process's metrics, or a cluster's aggregate (http/metrics-cluster.ts). */
  scrape(): Promise<string>;
  contentType: string;
}

const digest = (s: string): Buffer => createHash('sha256').update(s).digest();

/** Whether the Authorization header is `Bearer <token>`; digests of equal length are compared in constant time. */
export function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const m = header ? /^Bearer +(\S+) *$/i.exec(header) : null;
  return timingSafeEqual(digest(m?.[1] ?? ''), expected) && m !== null;
}

export function metricsRoutes(app: FastifyInstance, deps: MetricsRouteDeps): void {
  const expected = digest(deps.token);
  app.get(
    '/metrics',
    { config: { public: true }, schema: { querystring: { type: 'object', additionalProperties: true } } },
    async (request, reply) => {
      if (!bearerMatches(request.headers.authorization, expected))
        throw new FhirError(
          'login',
          'The metrics need the operator’s metrics token: Authorization: Bearer <metricsToken>',
          'metrics.token',
          { status: 401, headers: { 'www-authenticate': 'Bearer realm="metrics"' } },
        );
      const text = await deps.scrape().catch((err: unknown) => {
        // In a cluster: the primary or a worker did not answer in time; the scraper tries again at its next interval.
        throw new FhirError(
          'transient',
          `The metrics could not be gathered: ${err instanceof Error ? err.message : String(err)}`,
          'metrics.unavailable',
        );
      });
      return reply.header('content-type', deps.contentType).header('cache-control', 'no-store').send(text);
    },
  );
}
