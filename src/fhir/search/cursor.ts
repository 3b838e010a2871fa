// The opaque `_cursor` of keyset paging: the sort key values and rid of the last row of a page (the `next` link),
// or of the first row of a page (`before`: the `previous` link, read backwards).
import { FhirError } from '../outcome.js';

export interface Cursor {
  keys: (string | null)[];
  rid: number;
  /** Rows before this one (a `previous` page), rather than after it. */
  before?: boolean;
}

const BEFORE = 'b';

export function encodeCursor(c: Cursor): string {
  const body = [c.rid, ...c.keys];
  return Buffer.from(JSON.stringify(c.before ? [BEFORE, ...body] : body), 'utf8').toString('base64url');
}

/** Decodes a `_cursor` made by encodeCursor for a search with `keyCount` sort keys; 400 otherwise. */
export function decodeCursor(text: string, keyCount: number): Cursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const before = Array.isArray(parsed) && parsed[0] === BEFORE;
  const body = Array.isArray(parsed) ? parsed.slice(before ? 1 : 0) : undefined;
  if (
    !body ||
    body.length !== keyCount + 1 ||
    !Number.isSafeInteger(body[0]) ||
    !body.slice(1).every((k) => k === null || typeof k === 'string')
  ) {
    throw new FhirError('invalid', 'Invalid _cursor: it does not belong to this search', 'search.bad-cursor');
  }
  return { rid: body[0] as number, keys: body.slice(1) as (string | null)[], ...(before ? { before } : {}) };
}
