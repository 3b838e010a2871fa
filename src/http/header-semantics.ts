// HTTP semantics of FHIR reads and writes that depend only on request headers (https://hl7.org/fhir/R4/http.html):
// conditional read (`If-None-Match`, `If-Modified-Since` → 304, RFC 9110 §13.1.2 and §13.1.3) and the `Prefer: return`
// of create, update and patch (https://hl7.org/fhir/R4/http.html#ops: minimal, representation, OperationOutcome).
import type { FastifyRequest } from 'fastify';
import { outcome } from '../fhir/outcome.js';
import { notModified } from '../fhir/not-modified.js';
import type { FhirResult } from '../fhir/result.js';

/** A request header's value (Node joins repeated headers; an array, set-cookie only, is joined the same way). */
export function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

/** A 304 for a read whose version the client holds already; otherwise the result as it is. */
export function conditionalRead(req: FastifyRequest, result: FhirResult): FhirResult {
  const ifNoneMatch = header(req, 'if-none-match');
  const ifModifiedSince = header(req, 'if-modified-since');
  return notModified(result, {
    ...(ifNoneMatch !== undefined ? { ifNoneMatch } : {}),
    ...(ifModifiedSince !== undefined ? { ifModifiedSince } : {}),
  });
}

/** `Prefer: return=minimal | representation | OperationOutcome` applied to a successful write's answer. */
export function preferReturn(req: FastifyRequest, result: FhirResult): FhirResult {
  const m = /(?:^|[,;\s])return\s*=\s*"?(minimal|representation|OperationOutcome)"?/i.exec(
    header(req, 'prefer') ?? '',
  );
  if (!m || result.status >= 300) return result;
  const want = (m[1] as string).toLowerCase();
  if (want === 'minimal') return { ...result, body: null };
  if (want === 'operationoutcome') {
    const what = result.status === 201 ? 'Created' : 'Updated';
    const where = result.location ? ` ${result.location}` : '';
    return { ...result, body: outcome('information', 'informational', `${what}${where}`) };
  }
  return result;
}
