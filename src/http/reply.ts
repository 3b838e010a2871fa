// The one place that turns a FHIR result (or error) into an HTTP response.
import type { FastifyReply } from 'fastify';
import type { OAuthError } from '../auth/oauth-error.js';
import { stringifyJson } from '../fhir/json/stringify.js';
import { FhirError, type OperationOutcome } from '../fhir/outcome.js';
import { RawBytes, RawJson, RawText, StreamedJson, type FhirResult } from '../fhir/result.js';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';

export function sendResult(reply: FastifyReply, result: FhirResult, fhirBase: string): FastifyReply {
  reply.code(result.status);
  if (result.versionId) reply.header('etag', `W/"${result.versionId}"`);
  if (result.lastModified) reply.header('last-modified', result.lastModified.toUTCString());
  if (result.location) {
    const abs = /^https?:/.test(result.location) ? result.location : `${fhirBase}/${result.location}`;
    reply.header(result.status === 202 ? 'content-location' : 'location', abs);
  }
  for (const [k, v] of Object.entries(result.headers ?? {})) reply.header(k, v);
  if (result.body === null) return reply.send();
  if (result.body instanceof RawText) return reply.type(result.body.contentType).send(result.body.text);
  if (result.body instanceof RawBytes) {
    // Uploaded content served from the API's origin: never sniffed into something else, never run as a page.
    reply.header('x-content-type-options', 'nosniff').header('content-security-policy', 'sandbox');
    return reply.type(result.body.contentType).send(result.body.data);
  }
  reply.type(FHIR_JSON);
  if (result.body instanceof StreamedJson)
    return reply.header('content-length', result.body.length).send(result.body.open());
  return reply.send(result.body instanceof RawJson ? result.body.text : stringifyJson(result.body));
}

export function sendError(reply: FastifyReply, err: FhirError): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
  return sendOutcome(reply, err.status, err.toOutcome());
}

/** OAuth endpoints answer errors as RFC 6749 §5.2 JSON, not as OperationOutcomes. */
export function sendOAuthError(reply: FastifyReply, err: OAuthError): FastifyReply {
  for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
  return reply.code(err.status).send(err.toJSON());
}

export function sendOutcome(reply: FastifyReply, status: number, body: OperationOutcome): FastifyReply {
  return reply.code(status).type(FHIR_JSON).send(JSON.stringify(body));
}
