// Request bodies Cinder accepts: FHIR JSON (and JSON Patch), FHIR XML and form posts (OAuth, POST _search).
// Anything else is 415; malformed JSON, or JSON nested deeper than MAX_BODY_DEPTH, is 400; an empty body parses to undefined (e.g. `$cancel`).
import type { FastifyInstance } from 'fastify';
import { JsonTooDeep, parseJsonBody } from '../../fhir/json/parse.js';
import { FhirError } from '../../fhir/outcome.js';
import { fromXml } from '../../fhir/xml/index.js';
import { MAX_RESOURCE_DEPTH } from '../../fhir/validation/depth.js';

/** Media types of FHIR XML request bodies. */
export const XML_TYPES = ['application/fhir+xml', 'application/xml', 'text/xml'];

export type FormBody = Record<string, string | string[]>;

export function parseForm(text: string): FormBody {
  const out: FormBody = {};
  for (const [k, v] of new URLSearchParams(text)) {
    const prev = out[k];
    out[k] = prev === undefined ? v : Array.isArray(prev) ? [...prev, v] : [prev, v];
  }
  return out;
}

/**
 * XML bodies up to this many characters are read on the request's own thread (a few milliseconds); larger ones in a
 * worker thread, so that reading megabytes of XML (about 6 MB/s) never holds up other tenants' requests.
 */
export const XML_INLINE_CHARS = 64 * 1024;

export interface ContentTypeOptions {
  /** Reads a large XML body off the event loop: the JSON text of fromXml (the FHIRPath worker pool's `xml`). */
  xmlOffThread?: (text: string) => Promise<string>;
}

export function registerContentTypes(app: FastifyInstance, opts: ContentTypeOptions = {}): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    ['application/fhir+json', 'application/json', 'application/json-patch+json'],
    { parseAs: 'string' },
    (_req, body, done) => {
      const text = body as string;
      if (text.trim() === '') return done(null, undefined);
      try {
        // Numbers keep the text they were sent with (decimal precision, src/fhir/json/raw-numbers.ts). A body nested
        // deeper than MAX_BODY_DEPTH is refused here, before any route, operation or worker walks it.
        done(null, parseJsonBody(text));
      } catch (err) {
        done(
          err instanceof JsonTooDeep
            ? new FhirError(
                'structure',
                `The body nests deeper than ${err.max} levels of JSON objects and arrays (a resource may nest ${MAX_RESOURCE_DEPTH} levels)`,
                'http.too-deep',
              )
            : new FhirError('structure', `Malformed JSON: ${(err as Error).message}`, 'http.malformed-json'),
          undefined,
        );
      }
    },
  );
  // FHIR XML (https://hl7.org/fhir/R4/xml.html) becomes the JSON a client would have sent; fromXml refuses DTDs and
  // nesting beyond its bound before anything is built.
  app.addContentTypeParser(XML_TYPES, { parseAs: 'string' }, (_req, body, done) => {
    const text = body as string;
    if (text.trim() === '') return done(null, undefined);
    const offThread = opts.xmlOffThread;
    if (offThread && text.length > XML_INLINE_CHARS) {
      offThread(text)
        .then((json) => parseJsonBody(json))
        .then(
          (value) => done(null, value),
          (err: Error) => done(err, undefined),
        );
      return;
    }
    try {
      done(null, fromXml(text));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, (_req, body, done) => {
    done(null, parseForm(body as string));
  });
}
