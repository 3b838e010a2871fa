// storableJson (model.ts): what the audit table stores is JSON without a NUL character (PostgreSQL's text holds none);
// the fast path (no replacer) must give exactly what the replacer gives.
import { describe, expect, it } from 'vitest';
import { storableJson } from './model.js';

const slow = (value: unknown): string =>
  JSON.stringify(value, (_key, v: unknown) =>
    typeof v === 'string' && v.includes('\0') ? v.replace(/\0/g, '\uFFFD') : v,
  );

describe('storableJson', () => {
  it('replaces a NUL in any string, a key deep down or the value itself, by U+FFFD', () => {
    expect(storableJson('a\0b')).toBe('"a\uFFFDb"');
    expect(storableJson({ outer: [{ inner: 'x\0\0y' }] })).toBe('{"outer":[{"inner":"x\uFFFD\uFFFDy"}]}');
    expect(storableJson({ a: 'no nul', b: 'nul\0' })).not.toContain('\\u0000');
  });

  it('keeps six characters that only look like an escaped NUL', () => {
    // A backslash then `u0000` is escaped as `\\u0000`: text that holds the sequence, not a NUL.
    const value = { path: 'C:\\u0000\\file', n: 1 };
    expect(storableJson(value)).toBe(JSON.stringify(value));
    expect(JSON.parse(storableJson(value))).toEqual(value);
  });

  it('gives what JSON.stringify with the NUL replacer gives', () => {
    const values: unknown[] = [
      { id: 'x', arr: ['a', 'b\0'], nested: { deep: [1, null, true, 'z\0z'] } },
      ['\0', '\\u0000', '\\\0'],
      'plain',
      42,
      null,
      { toJSON: () => 'from toJSON\0' },
      { skipped: undefined, kept: 'k' },
    ];
    for (const v of values) expect(storableJson(v)).toBe(slow(v));
  });

  it('answers undefined for what JSON.stringify answers undefined', () => {
    expect(storableJson(undefined)).toBeUndefined();
  });
});
