// HTTP semantics of FHIR reads and writes that depend only on request headers (https://hl7.org/fhir/R4/http.html):
// conditional read (`If-None-Match`, `If-Modified-Since` → 304, RFC 9110 §13.1.2 and §13.1.3) and the `Prefer: return`
// of create, update and patch (https://hl7.org/fhir/R4/http.html#ops: minimal, representation, OperationOutcome).
import type { FastifyRequest } from 'fastify';
import { outcome } from '../fhir/outcome.js';
import type { FhirResult } from '../fhir/result.js';

function header(req: FastifyRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

/** A 304 for a read whose version the client holds already; otherwise the result as it is. */
export function conditionalRead(req: FastifyRequest, result: FhirResult): FhirResult {
  if (result.status !== 200 || !result.versionId) return result;
  const etag = `W/"${result.versionId}"`;
  const notModified: FhirResult = {
    status: 304,
    body: null,
    versionId: result.versionId,
    ...(result.lastModified ? { lastModified: result.lastModified } : {}),
  };
  const ifNoneMatch = header(req, 'if-none-match');
  if (ifNoneMatch !== undefined) {
    // Weak comparison: W/"3" and "3" name the same version; `*` matches any current version.
    const tags = ifNoneMatch.split(',').map((t) => t.trim());
    const same = (t: string): boolean => t === '*' || t.replace(/^W\//, '') === etag.replace(/^W\//, '');
    return tags.some(same) ? notModified : result;
  }
  // If-Modified-Since counts only without If-None-Match (RFC 9110 §13.1.3), in whole seconds as HTTP dates are.
  const since = Date.parse(header(req, 'if-modified-since') ?? '');
  if (
    !Number.isNaN(since) &&
    result.lastModified &&
    Math.floor(result.lastModified.getTime() / 1000) * 1000 <= since
  )
    return notModified;
  return result;
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
