import { describe, expect, it } from 'vitest';
import { isMapped, translate } from './translate.js';

const map = {
  resourceType: 'ConceptMap',
  url: 'http://x/cm',
  group: [
    {
      source: 'http://x/a',
      target: 'http://x/b',
      element: [
        {
          code: '1',
          display: 'One',
          target: [
            { code: 'one', equivalence: 'equivalent' },
            { code: 'uno', equivalence: 'wider' },
          ],
        },
        { code: '2', target: [{ code: 'two', equivalence: 'disjoint' }] },
      ],
      unmapped: { mode: 'fixed', code: 'other', display: 'Other' },
    },
    {
      source: 'http://x/a',
      target: 'http://x/c',
      element: [{ code: '1', target: [{ code: 'I' }] }],
      unmapped: { mode: 'provided' },
    },
  ],
};

describe('ConceptMap translation', () => {
  it('maps a source code to every target, with equivalence and source', () => {
    const m = translate(map, { system: 'http://x/a', code: '1', reverse: false });
    expect(m.map((x) => `${x.concept.system} ${x.concept.code} ${x.equivalence}`)).toEqual([
      'http://x/b one equivalent',
      'http://x/b uno wider',
      'http://x/c I equivalent',
    ]);
    expect(m.every((x) => x.source === 'http://x/cm')).toBe(true);
  });

  it('narrows by target system, and answers unmapped codes by the group’s rule', () => {
    expect(
      translate(map, { system: 'http://x/a', code: '1', targetSystem: 'http://x/c', reverse: false }),
    ).toHaveLength(1);
    const fixed = translate(map, {
      system: 'http://x/a',
      code: '9',
      targetSystem: 'http://x/b',
      reverse: false,
    });
    expect(fixed[0]).toMatchObject({ equivalence: 'inexact', concept: { code: 'other', display: 'Other' } });
    const provided = translate(map, {
      system: 'http://x/a',
      code: '9',
      targetSystem: 'http://x/c',
      reverse: false,
    });
    expect(provided[0]).toMatchObject({ equivalence: 'equal', concept: { system: 'http://x/c', code: '9' } });
    expect(translate(map, { system: 'http://x/other', code: '1', reverse: false })).toEqual([]);
  });

  it('maps back in reverse, and tells disjoint from mapped', () => {
    const back = translate(map, { system: 'http://x/b', code: 'uno', reverse: true });
    expect(back).toEqual([
      {
        equivalence: 'wider',
        concept: { system: 'http://x/a', code: '1', display: 'One' },
        source: 'http://x/cm',
      },
    ]);
    const disjoint = translate(map, {
      system: 'http://x/a',
      code: '2',
      targetSystem: 'http://x/b',
      reverse: false,
    });
    expect(disjoint.some(isMapped)).toBe(false);
  });
});
