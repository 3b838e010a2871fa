// The representation a FHIR answer takes (https://hl7.org/fhir/R4/http.html#mime-type): `_format` wins over Accept,
// and JSON is the default. XML (https://hl7.org/fhir/R4/xml.html) when `_format` names it, or when Accept ranks an XML
// type above every JSON one (a wildcard counts for JSON). Only the FHIR API answers XML; Bulk Data kick-offs answer
// JSON whatever is asked.
import type { FastifyRequest } from 'fastify';

export type Format = 'json' | 'xml';

const XML_TYPES = new Set(['application/fhir+xml', 'application/xml', 'text/xml', 'application/xml+fhir']);
const JSON_TYPES = new Set([
  'application/fhir+json',
  'application/json',
  'application/json+fhir',
  'application/*',
  '*/*',
]);
const XML_FORMATS = new Set(['xml', ...XML_TYPES]);

/** The `_format` value as a lower-case media type or name; an unencoded `+` arrives as a space. */
function formatParam(req: FastifyRequest): string | undefined {
  const raw = (req.query as Record<string, unknown> | undefined)?._format;
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (typeof value !== 'string') return undefined;
  return (value.split(';')[0] ?? '').trim().replace(/ /g, '+').toLowerCase();
}

/** The highest q that an Accept header gives any of `types` (0 when none is named). */
function quality(accept: string, types: ReadonlySet<string>): number {
  let best = 0;
  for (const range of accept.split(',')) {
    const [type, ...params] = range.split(';').map((x) => x.trim().toLowerCase());
    if (!type || !types.has(type)) continue;
    const q = params.find((p) => p.startsWith('q='));
    const value = q === undefined ? 1 : Number(q.slice(2));
    if (Number.isFinite(value) && value > best) best = value;
  }
  return best;
}

/** Bulk Data (`$export` kick-off, https://hl7.org/fhir/uv/bulkdata/) answers in JSON only. */
const BULK_EXPORT = /\/(?:\$|%24)export(?:[?/]|$)/i;

/** The FHIR API's paths (app.ts); OAuth, admin and console endpoints keep their JSON whatever a browser accepts. */
const FHIR_PATH = '/fhir/R4';

export function responseFormat(req: FastifyRequest): Format {
  if (!req.url.startsWith(FHIR_PATH) || BULK_EXPORT.test(req.url)) return 'json';
  const format = formatParam(req);
  if (format !== undefined) return XML_FORMATS.has(format) ? 'xml' : 'json';
  const raw = req.headers.accept;
  const accept = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  if (!accept.includes('xml')) return 'json';
  const xml = quality(accept, XML_TYPES);
  return xml > 0 && xml > quality(accept, JSON_TYPES) ? 'xml' : 'json';
}
