// FHIR functions return a result value; http/reply.ts is the one place that turns it into a response.
import type { Readable } from 'node:stream';
import type { OperationOutcome } from './outcome.js';
import type { Resource } from './types.js';

/** JSON text taken straight from storage, sent without parsing and re-serialising. */
export class RawJson {
  constructor(readonly text: string) {}
}

/** A body that is not FHIR JSON (e.g. the CSV of $csv), sent as it is with its own Content-Type. */
export class RawText {
  constructor(
    readonly text: string,
    readonly contentType: string,
  ) {}
}

/** Bytes that are not FHIR at all (a Binary's content), sent as they are with their own Content-Type. */
export class RawBytes {
  constructor(
    readonly data: Readable | Uint8Array,
    readonly contentType: string,
  ) {}
}

export interface FhirResult {
  status: number;
  body: Resource | OperationOutcome | RawJson | RawText | RawBytes | null;
  /** Relative to the FHIR base, e.g. `Patient/1/_history/2`. */
  location?: string;
  versionId?: string;
  lastModified?: Date;
  headers?: Record<string, string>;
}

export function ok(body: FhirResult['body'], extra: Omit<FhirResult, 'status' | 'body'> = {}): FhirResult {
  return { status: 200, body, ...extra };
}
