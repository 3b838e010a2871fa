// The words of full-text search (full-text.ts): how resources and query values are cut into words, and that nothing of
// a query value reaches PostgreSQL as tsquery syntax.
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import {
  fullTextWords,
  MAX_INDEXED_CHARS,
  MAX_WORD,
  parseFullText,
  supportsFullText,
  wordsOf,
  xhtmlText,
} from './full-text.js';

const query = (value: string, key = '_content', type = 'Observation'): string => {
  const v = parseFullText(type, key, value).values[0];
  if (v?.kind !== 'fulltext') throw new Error('not a full-text value');
  return v.query;
};

const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    if (err instanceof FhirError) return err.code;
    throw err;
  }
  throw new Error('not refused');
};

describe('full-text words', () => {
  it('folds case and accents and splits on anything but letters and digits', () => {
    expect(wordsOf('Ana MÜLLER, café-au-lait; Ångström 2019')).toEqual([
      'ana',
      'muller',
      'cafe',
      'au',
      'lait',
      'angstrom',
      '2019',
    ]);
    expect(wordsOf("O'Brien & !x | (y) :*")).toEqual(['o', 'brien', 'x', 'y']);
    // Letters of other scripts are words; characters without a decomposition stay as they are.
    expect(wordsOf('Straße Москва 東京')).toEqual(['straße', 'москва', '東京']);
    expect(wordsOf('x'.repeat(500))).toEqual(['x'.repeat(MAX_WORD)]);
  });

  it('reads the text of XHTML: tags dropped, character references decoded', () => {
    expect(
      wordsOf(xhtmlText('<div xmlns="http://www.w3.org/1999/xhtml"><p>Caf&#233; &amp; th&#xE9;</p></div>')),
    ).toEqual(['cafe', 'the']);
    expect(xhtmlText('<b>a</b>&lt;b&gt;&unknown;&#0;')).toBe(' a <b>  ');
  });

  it('indexes the narrative apart, and every string but id, meta and base64 data in content', () => {
    const r = {
      resourceType: 'Observation',
      id: 'secret-id',
      meta: { versionId: '7', tag: [{ code: 'tagged' }] },
      text: { status: 'generated', div: '<div xmlns="http://www.w3.org/1999/xhtml">Heart rate</div>' },
      status: 'final',
      code: { coding: [{ system: 'http://loinc.org', code: '8867-4', display: 'Heart rate' }] },
      presentedForm: [{ data: 'SGVsbG8gd29ybGQ=', title: 'Report' }],
      contained: [{ resourceType: 'Patient', name: [{ family: 'Contained' }] }],
      valueQuantity: { value: 72 },
    } as unknown as Resource;
    const { narrative, content } = fullTextWords(r);
    expect(narrative.split(' ')).toEqual(['heart', 'rate']);
    const words = content.split(' ');
    expect(words).toEqual(
      expect.arrayContaining(['heart', 'rate', 'final', 'loinc', '8867', 'report', 'contained']),
    );
    for (const w of ['secret', 'tagged', 'sgvsbg8gd29ybgq', 'div', 'xhtml', 'observation'])
      expect(words, w).not.toContain(w);
    // Distinct words only.
    expect(words.filter((w) => w === 'heart')).toHaveLength(1);
  });

  it('keeps at most MAX_INDEXED_CHARS of distinct words per resource', () => {
    const many = Array.from({ length: 60_000 }, (_, i) => `w${i}`).join(' ');
    const { content } = fullTextWords({ resourceType: 'Basic', id: 'b', note: many } as unknown as Resource);
    expect(content.length).toBeLessThanOrEqual(MAX_INDEXED_CHARS + MAX_WORD + 1);
    expect(content.length).toBeGreaterThan(MAX_INDEXED_CHARS - MAX_WORD - 1);
  });
});

describe('full-text queries', () => {
  it('quotes each word, ANDs words, ORs commas, and reads a trailing * as a prefix', () => {
    expect(query('Blood  Pressure')).toBe("'blood' & 'pressure'");
    expect(query('hyper*')).toBe("'hyper':*");
    expect(query('o’bri*')).toBe("'o' & 'bri':*");
    expect(query('a,b c')).toBe("('a') | ('b' & 'c')");
    expect(query('a\\,b')).toBe("'a' & 'b'");
  });

  it('never passes tsquery syntax on', () => {
    for (const v of ['a & !b', "'a':* | b", 'a <-> b', "a'); DROP TABLE x; --", '(a) & (b)']) {
      expect(query(v), v).toMatch(/^'[\p{L}\p{N}]+'(:\*)?( & '[\p{L}\p{N}]+'(:\*)?)*$/u);
    }
  });

  it('refuses values without words, too long or of too many words, modifiers and types without narrative', () => {
    expect(refusal(() => query("& | ! : * ( ) '"))).toBe('search.text-no-words');
    expect(refusal(() => query(' , '))).toBe('search.empty-value');
    expect(refusal(() => query('a '.repeat(5000)))).toBe('search.text-too-long');
    expect(refusal(() => query('a '.repeat(33)))).toBe('search.text-too-many-words');
    expect(refusal(() => parseFullText('Observation', '_text:exact', 'a'))).toBe('search.bad-modifier');
    expect(refusal(() => query('a', '_text', 'Bundle'))).toBe('search.unknown-param');
    expect(supportsFullText('Bundle', '_content')).toBe(true);
    expect(supportsFullText('Patient', '_text')).toBe(true);
    expect(supportsFullText('NotAType', '_content')).toBe(false);
  });
});
