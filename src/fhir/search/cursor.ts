// The opaque `_cursor` of keyset paging: the sort key values and rid of the last row of a page.
import { FhirError } from '../outcome.js';

export interface Cursor {
  keys: (string | null)[];
  rid: number;
}

export function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.rid, ...c.keys]), 'utf8').toString('base64url');
}

/** Decodes a `_cursor` made by encodeCursor for a search with `keyCount` sort keys; 400 otherwise. */
export function decodeCursor(text: string, keyCount: number): Cursor {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (
    !Array.isArray(parsed) ||
    parsed.length !== keyCount + 1 ||
    !Number.isSafeInteger(parsed[0]) ||
    !parsed.slice(1).every((k) => k === null || typeof k === 'string')
  ) {
    throw new FhirError('invalid', 'Invalid _cursor: it does not belong to this search', 'search.bad-cursor');
  }
  return { rid: parsed[0] as number, keys: parsed.slice(1) as (string | null)[] };
}
