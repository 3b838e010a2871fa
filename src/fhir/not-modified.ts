// Conditional read (https://hl7.org/fhir/R4/http.html#cread; RFC 9110 §13.1.2, §13.1.3): a read whose version the
// client holds already answers 304. Used by the REST read and vread and by batch/transaction GET entries
// (`request.ifNoneMatch`, `request.ifModifiedSince`).
import type { FhirResult } from './result.js';

export interface ReadPreconditions {
  ifNoneMatch?: string;
  ifModifiedSince?: string;
}

export function notModified(result: FhirResult, pre: ReadPreconditions): FhirResult {
  if (result.status !== 200 || !result.versionId) return result;
  const unchanged: FhirResult = {
    status: 304,
    body: null,
    versionId: result.versionId,
    ...(result.lastModified ? { lastModified: result.lastModified } : {}),
  };
  if (pre.ifNoneMatch !== undefined) {
    // Weak comparison: W/"3" and "3" name the same version; `*` matches any current version.
    const tags = pre.ifNoneMatch.split(',').map((t) => t.trim().replace(/^W\//, ''));
    return tags.some((t) => t === '*' || t === `"${result.versionId}"`) ? unchanged : result;
  }
  // If-Modified-Since counts only without If-None-Match (RFC 9110 §13.1.3), in whole seconds as HTTP dates are.
  const since = Date.parse(pre.ifModifiedSince ?? '');
  if (
    !Number.isNaN(since) &&
    result.lastModified &&
    Math.floor(result.lastModified.getTime() / 1000) * 1000 <= since
  )
    return unchanged;
  return result;
}
