import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  inexactNumber,
  JsonTooDeep,
  MAX_BODY_DEPTH,
  nestsDeeperThan,
  parseJson,
  parseJsonBody,
} from './parse.js';
import { copyRawNumbers, hasRawNumbers, numberText, rawNumberText, RAW_NUMBERS } from './raw-numbers.js';
import { stringifyJson } from './stringify.js';

const roundTrip = (text: string): string => stringifyJson(parseJson(text));

describe('exact JSON numbers', () => {
  it.each([
    '1.50',
    '0.010',
    '3.0',
    '1.0e2',
    '-0.0',
    '-0',
    '12345678901234567890.12',
    '1E-7',
    '1e21',
    '0.1234567890123456789',
  ])('keeps %s as written', (n) => {
    const text = `{"resourceType":"Observation","valueQuantity":{"value":${n},"unit":"mg"}}`;
    expect(roundTrip(text)).toBe(text);
    const parsed = parseJson(text) as { valueQuantity: { value: number } };
    expect(parsed.valueQuantity.value).toBe(Number(n));
  });

  it('keeps numbers inside arrays and nested extension values', () => {
    const text =
      '{"a":[1.50,2,3.0,[4.00,{"b":5.10}]],"extension":[{"url":"x","extension":[{"url":"y","valueDecimal":0.010}]}]}';
    expect(roundTrip(text)).toBe(text);
  });

  it('writes the usual form of canonical numbers and drops whitespace like JSON.stringify', () => {
    expect(roundTrip('{ "a" : 1.5 , "b" : [ 1.50 , 2 ] }')).toBe('{"a":1.5,"b":[1.50,2]}');
  });

  it('writes a changed value as the new value', () => {
    const r = parseJson('{"v":1.50,"w":[1.0]}') as { v: number; w: number[] };
    r.v = 2;
    r.w[0] = 3;
    expect(stringifyJson(r)).toBe('{"v":2,"w":[3]}');
    r.v = 1.5; // back to the value the text denotes: its text again
    expect(stringifyJson(r)).toBe('{"v":1.50,"w":[3]}');
  });

  it('does not copy texts by spread, and copyRawNumbers carries them', () => {
    const r = parseJson('{"factor":1.50,"id":"a"}') as Record<string, unknown>;
    const spread = { ...r, id: 'b' };
    expect(stringifyJson(spread)).toBe('{"factor":1.5,"id":"b"}');
    copyRawNumbers(r, spread);
    expect(stringifyJson(spread)).toBe('{"factor":1.50,"id":"b"}');
    expect(Object.keys(r)).toEqual(['factor', 'id']);
    expect(JSON.stringify(r)).toBe('{"factor":1.5,"id":"a"}');
  });

  it('leaves resources without inexact numbers untouched (the fast path)', () => {
    const text =
      '{"resourceType":"Patient","id":"3f2e1e5","meta":{"lastUpdated":"2020-01-01T00:00:00.000Z"},"multipleBirthInteger":2,"x":[0.5,-3,1e-7]}';
    expect(inexactNumber(text)).toBe(false);
    const r = parseJson(text);
    expect(hasRawNumbers(r)).toBe(false);
    expect(stringifyJson(r)).toBe(JSON.stringify(JSON.parse(text)));
  });

  it('is not fooled by numbers inside strings or escaped keys', () => {
    const text = '{"s":"a:1.50,","k\\"ey":1.50,"t":"\\\\","u":[true,false,null,2.0]}';
    const r = parseJson(text) as Record<string, unknown>;
    expect(rawNumberText(r, 'k"ey')).toBe('1.50');
    expect(rawNumberText(r, 's')).toBeUndefined();
    expect(roundTrip(text)).toBe(text);
  });

  it('follows JSON.parse on duplicate keys (the last one wins)', () => {
    expect(roundTrip('{"a":1.50,"a":2.50}')).toBe('{"a":2.50}');
    expect(roundTrip('{"a":1.50,"a":1.5}')).toBe('{"a":1.5}');
    expect(roundTrip('{"a":{"x":1.50},"a":{"x":1.5}}')).toBe('{"a":{"x":1.5}}');
  });

  it('keeps an own __proto__ property as JSON.parse does', () => {
    const r = parseJson('{"__proto__":{"v":1.50}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(r)).toBe(Object.prototype);
    expect(stringifyJson(r)).toBe('{"__proto__":{"v":1.50}}');
  });

  it('handles deep nesting without using the call stack', () => {
    const depth = 100_000;
    const text = `${'['.repeat(depth)}1.50${']'.repeat(depth)}`;
    let v = parseJson(text) as unknown[];
    for (let i = 1; i < depth; i++) v = v[0] as unknown[];
    expect(rawNumberText(v, 0)).toBe('1.50');
  });

  it('throws the SyntaxError of JSON.parse on malformed text', () => {
    expect(() => parseJson('{"a":1.50,')).toThrow(SyntaxError);
  });

  it('numberText gives the written text, else the JS form', () => {
    const r = parseJson('{"a":1.50,"b":2}') as object;
    expect(numberText(r, 'a')).toBe('1.50');
    expect(numberText(r, 'b')).toBe('2');
    expect(numberText(r, 'c')).toBeUndefined();
    expect(Object.getOwnPropertySymbols(r)).toEqual([RAW_NUMBERS]);
  });

  it('writes what JSON.stringify writes for any JSON value, and parses back to what JSON.parse gives', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const text = JSON.stringify(v);
        const parsed = parseJson(text);
        expect(parsed).toEqual(JSON.parse(text));
        expect(stringifyJson(parsed)).toBe(text);
      }),
      { numRuns: 300 },
    );
  });

  it('round-trips any JSON number text exactly', () => {
    const numberText = fc
      .tuple(
        fc.boolean(),
        fc.stringMatching(/^(0|[1-9]\d{0,25})$/),
        fc.option(fc.stringMatching(/^\d{1,20}$/)),
        fc.option(fc.stringMatching(/^[eE][+-]?\d{1,2}$/)),
      )
      .map(([neg, int, frac, exp]) => `${neg ? '-' : ''}${int}${frac ? `.${frac}` : ''}${exp ?? ''}`);
    fc.assert(
      fc.property(fc.array(numberText, { maxLength: 5 }), (nums) => {
        const text = `{"a":[${nums.join(',')}],"b":{"c":${nums[0] ?? '1'}}}`;
        expect(roundTrip(text)).toBe(text);
      }),
      { numRuns: 500 },
    );
  });
});

describe('the nesting bound of request bodies', () => {
  /** The nesting of a JSON value, walked without recursion. */
  const depthOf = (value: unknown): number => {
    let max = 0;
    const stack: [unknown, number][] = [[value, 1]];
    while (stack.length > 0) {
      const [v, d] = stack.pop() as [unknown, number];
      if (typeof v !== 'object' || v === null) continue;
      max = Math.max(max, d);
      for (const c of Object.values(v)) stack.push([c, d + 1]);
    }
    return max;
  };

  it('measures what JSON.parse builds, brackets inside strings and escapes not counted', () => {
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 8 }),
        fc.integer({ min: 0, max: 10 }),
        fc.string({ unit: fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a') }),
        (value, max, text) => {
          // Strings full of brackets, quotes and backslashes beside the value, as keys and values.
          const json = JSON.stringify([text, { [text]: value }, text]);
          expect(nestsDeeperThan(json, max)).toBe(depthOf(JSON.parse(json)) > max);
        },
      ),
      { numRuns: 300, seed: 25 },
    );
  });

  it(`parseJsonBody refuses ${MAX_BODY_DEPTH + 1} levels before parsing and accepts ${MAX_BODY_DEPTH}`, () => {
    const nested = (levels: number) => `${'[{"a":'.repeat(levels / 2)}1${'}]'.repeat(levels / 2)}`;
    expect(depthOf(parseJsonBody(nested(MAX_BODY_DEPTH)))).toBe(MAX_BODY_DEPTH);
    expect(() => parseJsonBody(`[${nested(MAX_BODY_DEPTH)}]`)).toThrow(JsonTooDeep);
    // Far deeper, and unbalanced: refused as too deep, at any depth, without a stack overflow.
    expect(() => parseJsonBody('['.repeat(1_000_000))).toThrow(JsonTooDeep);
    expect(() => parseJsonBody('{"a":1')).toThrow(SyntaxError);
  });
});
