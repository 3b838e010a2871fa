// The single error handler: every error becomes an OperationOutcome with the status of its issue code.
// Framework errors (bad media type, oversized or malformed body) keep Fastify's 4xx status.
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance } from 'fastify';
import { FhirError, outcome, type IssueCode } from '../../fhir/outcome.js';
import { storageErrorToFhir } from '../../fhir/repository/storage-errors.js';
import { DbUnavailableError } from '../../storage/db.js';
import { OAuthError } from '../../auth/oauth-error.js';
import { sendError, sendOAuthError } from '../reply.js';

const ISSUE_BY_STATUS: Record<number, IssueCode> = {
  400: 'invalid',
  401: 'login',
  403: 'forbidden',
  404: 'not-found',
  405: 'not-supported',
  406: 'not-supported',
  408: 'timeout',
  413: 'too-long',
  414: 'too-long',
  415: 'not-supported',
  429: 'throttled',
  431: 'too-long',
};

/** Connection-level failures of the database: answered 503 so that clients retry. */
const UNAVAILABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08003',
  '08006',
  '08001',
  '53300',
]);

export function toFhirError(err: unknown): FhirError | undefined {
  if (err instanceof FhirError) return err;
  const fromStorage = storageErrorToFhir(err);
  if (fromStorage) return fromStorage;
  const e = err as FastifyError & { code?: string };
  if (
    err instanceof DbUnavailableError ||
    (typeof e?.code === 'string' && UNAVAILABLE.has(e.code)) ||
    /Connection terminated|timeout exceeded when trying to connect/.test(e?.message ?? '')
  ) {
    return new FhirError('transient', 'The database is unavailable; retry later', 'storage.unavailable', {
      headers: { 'retry-after': '2' },
    });
  }
  const status = e?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const message =
      e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
        ? 'Unsupported media type: use application/fhir+json or application/fhir+xml'
        : e.code === 'FST_ERR_CTP_BODY_TOO_LARGE'
          ? 'Request body is too large'
          : e.message;
    return new FhirError(
      ISSUE_BY_STATUS[status] ?? 'invalid',
      message,
      `http.${String(e.code ?? status).toLowerCase()}`,
      { status },
    );
  }
  return undefined;
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err, request, reply) => {
    // Thrown by hooks of the OAuth endpoints (e.g. a rate limit), whose errors are OAuth JSON.
    if (err instanceof OAuthError) return sendOAuthError(reply, err);
    const fhirErr = toFhirError(err);
    if (fhirErr) {
      if (fhirErr.status >= 500) request.log.warn({ err, code: fhirErr.code }, fhirErr.message);
      return sendError(reply, fhirErr);
    }
    request.log.error({ err }, 'unhandled error');
    return sendError(
      reply,
      new FhirError('exception', 'Internal server error', 'http.internal', { status: 500 }),
    );
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(
      reply,
      new FhirError(
        'not-found',
        `No route for ${request.method} ${request.url.split('?')[0]}`,
        'http.no-route',
      ),
    ),
  );
}

/**
 * Fastify `clientErrorHandler`: requests Node refuses before any route sees them (headers beyond `maxHeaderSize`,
 * a malformed request line, a request timeout) still get an OperationOutcome (instead of Fastify's own JSON).
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Socket): void {
  // A reset connection has nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, text]: [number, IssueCode, string] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'too-long', 'Request headers are too large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'timeout', 'The request was not received in time']
        : [400, 'structure', 'Malformed HTTP request'];
  if (socket.writable) {
    const body = JSON.stringify(outcome('error', code, text));
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/fhir+json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}
