// CORS for browser apps (https://fetch.spec.whatwg.org/#http-cors-protocol, issue 14 point 9) on every route: the
// FHIR API, OAuth and discovery. Handled by @fastify/cors in an onRequest hook registered before authentication, so
// a preflight (which carries no token) is answered without one. No credentials: the API takes bearer tokens, not
// cookies.
import cors from '@fastify/cors';
import type { FastifyInstance } from 'fastify';

/** Response headers a browser app needs to read: paging, versions, job status, request ids. */
const EXPOSED = [
  'Location',
  'Content-Location',
  'ETag',
  'Last-Modified',
  'X-Progress',
  'Retry-After',
  'X-Request-Id',
  'X-Total-Count',
  'Content-Disposition',
  'WWW-Authenticate',
];

export async function registerCors(app: FastifyInstance, origins: readonly string[]): Promise<void> {
  await app.register(cors, {
    origin: origins.includes('*') ? '*' : [...origins],
    credentials: false,
    methods: ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'],
    exposedHeaders: EXPOSED,
    maxAge: 600,
  });
}
