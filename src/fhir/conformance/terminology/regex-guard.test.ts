import { describe, expect, it } from 'vitest';
import { FhirError } from '../../outcome.js';
import { compileRegexFilter, MAX_INPUT } from './regex-guard.js';

const refused = (p: string): string | undefined => {
  try {
    compileRegexFilter(p);
    return undefined;
  } catch (e) {
    return (e as FhirError).code;
  }
};

describe('regex filter guard', () => {
  it('matches whole values', () => {
    const m = compileRegexFilter('A[0-9]+');
    expect(m('A12')).toBe(true);
    expect(m('xA12')).toBe(false);
    expect(compileRegexFilter('(?:ab|cd)x')('cdx')).toBe(true);
    expect(compileRegexFilter('a{2,3}')('aaa')).toBe(true);
  });

  it('refuses nested quantifiers, backreferences, lookaround and long patterns', () => {
    for (const p of [
      '(a+)+$',
      '(a|aa)*',
      '(.*a){20}',
      '((ab)*c)+',
      '(\\w+\\s?)*$',
      '(a)\\1',
      '(?=a)a',
      'x'.repeat(300),
    ])
      expect(refused(p), p).toBe('terminology.regex');
    expect(refused('.*a.*b.*c')).toBe('terminology.regex');
    expect(refused('([')).toBe('terminology.regex-syntax');
  });

  it('does not match values longer than the input bound', () => {
    expect(compileRegexFilter('a*')('a'.repeat(MAX_INPUT + 1))).toBe(false);
  });

  it('answers quickly on the classic catastrophic inputs it allows', () => {
    const started = Date.now();
    const m = compileRegexFilter('.*a.*b');
    for (let i = 0; i < 1000; i++) m('a'.repeat(MAX_INPUT));
    expect(Date.now() - started).toBeLessThan(20_000);
  });
});
