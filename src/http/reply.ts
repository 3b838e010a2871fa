// The one place that turns a FHIR result (or error) into an HTTP response, as FHIR JSON or, when asked for, FHIR XML
// (format.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import type { OAuthError } from '../auth/oauth-error.js';
import { parseJson } from '../fhir/json/parse.js';
import { stringifyJson } from '../fhir/json/stringify.js';
import { FhirError, type OperationOutcome } from '../fhir/outcome.js';
import { RawBytes, RawJson, RawText, StreamedJson, type FhirResult } from '../fhir/result.js';
import { toXml } from '../fhir/xml/index.js';
import { responseFormat } from './format.js';

export const FHIR_JSON = 'application/fhir+json; charset=utf-8';
export const FHIR_XML = 'application/fhir+xml; charset=utf-8';

/**
 * The JSON text of each answer sent as XML: the audit trail reads the patients an answer held from its JSON text
 * (plugins/audit.ts, audit/patients.ts), whichever representation the client got.
 */
export const jsonOfXmlAnswer = new WeakMap<FastifyRequest, string>();

/** `xml`, sent as the request's answer, stands for the JSON `json` (text, or a function making it). */
function sendXml(reply: FastifyReply, xml: string, json: string | (() => string)): FastifyReply {
  jsonOfXmlAnswer.set(reply.request, typeof json === 'string' ? json : json());
  return reply.type(FHIR_XML).send(xml);
}

/** A FHIR answer's representation depends on Accept (format.ts): caches must know (RFC 9110 §12.5.5). */
function varyAccept(reply: FastifyReply): void {
  const vary = reply.getHeader('vary');
  if (vary === undefined) reply.header('vary', 'Accept');
  else if (!/(^|,)\s*accept\s*(,|$)/i.test(String(vary))) reply.header('vary', `${String(vary)}, Accept`);
}

const isResource = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && typeof (v as { resourceType?: unknown }).resourceType === 'string';

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
  varyAccept(reply);
  if (result.body instanceof StreamedJson) {
    if (responseFormat(reply.request) === 'xml') return sendStreamedXml(reply, result.body);
    return reply.type(FHIR_JSON).header('content-length', result.body.length).send(result.body.open());
  }
  if (result.body instanceof RawJson) return sendJsonText(reply, result.body.text);
  return sendValue(reply, result.body);
}

/** FHIR JSON text (e.g. as stored) as it is, or as XML when the request asks for XML. */
export function sendJsonText(reply: FastifyReply, text: string, value?: unknown): FastifyReply {
  varyAccept(reply);
  if (responseFormat(reply.request) === 'xml') {
    const parsed = value ?? parseJson(text);
    if (isResource(parsed)) return sendXml(reply, toXml(parsed), text);
  }
  return reply.type(FHIR_JSON).send(text);
}

/** A resource as FHIR JSON, or as XML when the request asks for XML (a body that is no resource stays JSON). */
function sendValue(reply: FastifyReply, value: unknown): FastifyReply {
  if (isResource(value) && responseFormat(reply.request) === 'xml') {
    return sendXml(reply, toXml(value), () => stringifyJson(value));
  }
  return reply.type(FHIR_JSON).send(stringifyJson(value));
}

/**
 * A resource whose last element is a streamed value (a Binary's `data`, https://hl7.org/fhir/R4/binary.html) as XML:
 * the rest of the resource, then the value streamed into the `value` attribute of its element (base64 needs no
 * escaping).
 */
function sendStreamedXml(reply: FastifyReply, body: StreamedJson): FastifyReply {
  const head = JSON.parse(body.head) as Record<string, unknown>;
  const type = String(head.resourceType);
  const xml = toXml(head);
  const close = `</${type}>`;
  const open = xml.endsWith(close) ? xml.slice(0, -close.length) : xml.replace(/\/>$/, '>');
  const prefix = `${open}<${body.property} value="`;
  const suffix = `"/>${close}`;
  const length = Buffer.byteLength(prefix) + body.valueLength + suffix.length;
  const stream = Readable.from(
    (async function* () {
      yield Buffer.from(prefix);
      for await (const piece of body.pieces()) yield Buffer.from(piece, 'latin1');
      yield Buffer.from(suffix);
    })(),
    { objectMode: false },
  );
  jsonOfXmlAnswer.set(reply.request, body.head);
  return reply.type(FHIR_XML).header('content-length', length).send(stream);
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
  reply.code(status);
  varyAccept(reply);
  if (responseFormat(reply.request) === 'xml') return sendXml(reply, toXml(body), () => JSON.stringify(body));
  return reply.type(FHIR_JSON).send(JSON.stringify(body));
}
