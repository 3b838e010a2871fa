// Binary over REST (https://hl7.org/fhir/R4/binary.html#rest): POST {fhir}/Binary and PUT {fhir}/Binary/<id> take any
// Content-Type, raw bytes becoming the Binary's content; reads answer the raw bytes unless FHIR JSON is asked for.
import { withAudit } from '../../fhir/repository/audit-writes.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isResourceType } from '../../fhir/definitions/index.js';
import { FhirError } from '../../fhir/outcome.js';
import type { RepoContext } from '../../fhir/repository/context.js';
import { createResource } from '../../fhir/repository/create.js';
import { isValidId } from '../../fhir/id.js';
import { assertBody } from '../../fhir/repository/prepare.js';
import { updateResource } from '../../fhir/repository/update.js';
import type { FhirResult } from '../../fhir/result.js';
import type { Resource } from '../../fhir/types.js';
import type { Db } from '../../storage/db.js';
import { preferReturn, header } from '../header-semantics.js';

export interface BinaryRouteDeps {
  db: Db;
  /** Largest raw upload in bytes (config `binaryMaxBytes`); FHIR JSON bodies keep `maxBodySize`. */
  maxBytes: number;
  ctx: (req: FastifyRequest) => RepoContext;
  send: (reply: FastifyReply, r: FhirResult) => FastifyReply;
  written: (rows: number) => void;
  methodNotAllowed: (req: FastifyRequest) => never;
}

const FHIR_JSON_TYPES = new Set(['application/fhir+json', 'application/json', 'application/json+fhir']);
// `application/xml` in Accept is taken for the content (an XML document uploaded as a Binary), not for FHIR XML.
const FHIR_TYPES = new Set([...FHIR_JSON_TYPES, 'application/fhir+xml', 'application/xml+fhir']);
const FHIR_FORMATS = new Set([...FHIR_TYPES, 'json', 'xml', 'application/xml', 'text/xml']);

/**
 * Whether a read of a Binary asks for the resource (FHIR JSON or XML, with base64 `data`) rather than its raw content:
 * `_format=json` or `xml` (or a FHIR media type), or an Accept naming a FHIR JSON or FHIR XML media type. `*\/*`, no Accept and any
 * other type get the content (https://hl7.org/fhir/R4/binary.html#rest).
 */
export function wantsFhirBinary(req: FastifyRequest): boolean {
  const format = (req.query as Record<string, unknown> | undefined)?._format;
  // An unencoded `+` in the query arrives as a space (`_format=application/fhir+json`).
  if (typeof format === 'string') return FHIR_FORMATS.has(format.replace(/ /g, '+').toLowerCase());
  const accept = [req.headers.accept ?? ''].flat().join(',');
  return accept.split(',').some((range) => FHIR_TYPES.has((range.split(';')[0] ?? '').trim().toLowerCase()));
}

/** `X-Security-Context: Type/id` as Binary.securityContext (the header Medplum and HAPI clients send). */
function securityContextOf(req: FastifyRequest): { reference: string } | undefined {
  const value = header(req, 'x-security-context')?.trim();
  if (value === undefined || value === '') return undefined;
  const m = /^([A-Za-z]{1,64})\/([^/]+)$/.exec(value);
  if (!m || !isResourceType(m[1] as string) || !isValidId(m[2] as string)) {
    throw new FhirError(
      'invalid',
      `X-Security-Context must be a reference Type/id to a resource: ${value.slice(0, 80)}`,
      'binary.security-context',
    );
  }
  return { reference: value };
}

/** The Binary a request body stands for: FHIR JSON as it is, raw bytes as the content of a new version. */
function binaryOf(req: FastifyRequest, id?: string): Resource {
  if (!Buffer.isBuffer(req.body)) return assertBody(req.body, 'Binary');
  const securityContext = securityContextOf(req);
  const contentType = header(req, 'content-type')?.trim().replace(/\s+/g, ' ') || 'application/octet-stream';
  return {
    resourceType: 'Binary',
    ...(id !== undefined ? { id } : {}),
    contentType,
    ...(securityContext ? { securityContext } : {}),
    // Decoded again by prepareWrite into the file store: one path for raw and JSON uploads.
    ...(req.body.length > 0 ? { data: req.body.toString('base64') } : {}),
  };
}

export function binaryRoutes(app: FastifyInstance, deps: BinaryRouteDeps): void {
  // A plugin of its own: the catch-all parser below applies to these routes only, so every other route still
  // answers 415 to a body that is not FHIR JSON (or a form where one is taken).
  void app.register(async (b) => {
    // `application/xml` and `text/xml` uploads are content; only `application/fhir+xml` is a FHIR XML Binary.
    b.removeContentTypeParser([
      'application/x-www-form-urlencoded',
      'application/json-patch+json',
      'application/xml',
      'text/xml',
    ]);
    b.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: deps.maxBytes }, (_req, body, done) =>
      done(null, body),
    );

    b.post('/Binary', async (req, reply) => {
      const body = binaryOf(req);
      const ifNoneExist = header(req, 'if-none-exist');
      const c = deps.ctx(req);
      const result = await createResource(withAudit(deps.db, c), c, body, ifNoneExist ? { ifNoneExist } : {});
      deps.written(1);
      return deps.send(reply, preferReturn(req, result));
    });

    b.put<{ Params: { id: string } }>('/Binary/:id', async (req, reply) => {
      const body = binaryOf(req, req.params.id);
      const ifMatch = header(req, 'if-match');
      const c = deps.ctx(req);
      const result = await updateResource(
        withAudit(deps.db, c),
        c,
        'Binary',
        req.params.id,
        body,
        ifMatch ? { ifMatch } : {},
      );
      return deps.send(reply, preferReturn(req, result));
    });
    // `/Binary/:id` must not take `_history` for an id: that path allows no writes (as for every type).
    b.put('/Binary/_history', deps.methodNotAllowed);
  });
}
