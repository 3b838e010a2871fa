// FHIR functions return a result value; http/reply.ts is the one place that turns it into a response.
import { Readable } from 'node:stream';
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

/**
 * Bytes that are not FHIR at all (a Binary's content), sent as they are with their own Content-Type; `length`, known
 * before sending, decides whether the response counts as large. (A stream is still sent chunked: with its length as
 * Content-Length, Node 20 kept the keep-alive connection from counting as idle, so closing the server waited out
 * the keep-alive timeout.)
 */
export class RawBytes {
  constructor(
    readonly data: Readable | Uint8Array,
    readonly contentType: string,
    readonly length?: number,
  ) {}
}

/**
 * A resource's JSON with one string property too large to hold as one string (a Binary's base64 `data`, tens of
 * megabytes): `head` is the resource without it, `pieces` produce the value (JSON-safe ASCII, `valueLength`
 * characters in all) when the response is sent, and the property is written last. So a response is a few KB of
 * JavaScript strings at a time, whatever the content's size, and its length is known before it is sent.
 */
export class StreamedJson {
  constructor(
    readonly head: string,
    readonly property: string,
    readonly valueLength: number,
    readonly pieces: () => AsyncIterable<string>,
  ) {}

  /** `head` up to its closing brace, then `"<property>":"`. */
  private prefix(): string {
    const open = this.head.slice(0, this.head.lastIndexOf('}')).trimEnd();
    return `${open}${open.endsWith('{') ? '' : ','}${JSON.stringify(this.property)}:"`;
  }

  /** The JSON's length in bytes. */
  get length(): number {
    return Buffer.byteLength(this.prefix()) + this.valueLength + 2;
  }

  /** The JSON as a stream of bytes, pulled as the connection takes them. */
  open(): Readable {
    const { pieces } = this;
    const prefix = this.prefix();
    return Readable.from(
      (async function* () {
        yield Buffer.from(prefix);
        for await (const piece of pieces()) yield Buffer.from(piece, 'latin1');
        yield Buffer.from('"}');
      })(),
      { objectMode: false },
    );
  }

  /** The whole JSON as one string: only for the bounded amounts a Bundle inlines. */
  async text(): Promise<string> {
    const parts = [this.prefix()];
    for await (const piece of this.pieces()) parts.push(piece);
    parts.push('"}');
    return parts.join('');
  }

  /**
   * The JSON cut by `cut` (`_summary`, `_elements`, which take and give resource JSON text): applied to the head with
   * a stand-in value, so the streamed value is kept (still streamed) only when the cut keeps its property.
   */
  subset(cut: (json: string) => string): RawJson | StreamedJson {
    const standIn = JSON.parse(this.head) as Record<string, unknown>;
    standIn[this.property] = 'AAAA';
    const out = JSON.parse(cut(JSON.stringify(standIn))) as Record<string, unknown>;
    if (!(this.property in out)) return new RawJson(JSON.stringify(out));
    delete out[this.property];
    return new StreamedJson(JSON.stringify(out), this.property, this.valueLength, this.pieces);
  }
}

export interface FhirResult {
  status: number;
  body: Resource | OperationOutcome | RawJson | StreamedJson | RawText | RawBytes | null;
  /** Relative to the FHIR base, e.g. `Patient/1/_history/2`. */
  location?: string;
  versionId?: string;
  lastModified?: Date;
  headers?: Record<string, string>;
}

export function ok(body: FhirResult['body'], extra: Omit<FhirResult, 'status' | 'body'> = {}): FhirResult {
  return { status: 200, body, ...extra };
}
