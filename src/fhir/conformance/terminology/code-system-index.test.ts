import { describe, expect, it } from 'vitest';
import { buildCodeSystemIndex } from './code-system-index.js';

const codes = (cs: ReturnType<typeof buildCodeSystemIndex>, list: readonly number[]): string[] =>
  list.map((i) => cs.concepts[i]?.code as string).sort();

describe('code system index', () => {
  const nested = buildCodeSystemIndex({
    resourceType: 'CodeSystem',
    url: 'http://x/cs',
    version: '1',
    concept: [
      {
        code: 'A',
        display: 'Alpha',
        designation: [{ language: 'fr', value: 'Alpha fr' }],
        concept: [
          { code: 'A1', concept: [{ code: 'A11' }, { code: 'A12' }] },
          { code: 'A2', property: [{ code: 'status', valueCode: 'retired' }] },
        ],
      },
      { code: 'B' },
    ],
  });

  it('flattens nested concepts in document order with display, designations and properties', () => {
    expect(nested.concepts.map((c) => c.code)).toEqual(['A', 'A1', 'A11', 'A12', 'A2', 'B']);
    expect(nested.concepts[0]).toMatchObject({ display: 'Alpha', designations: [{ language: 'fr' }] });
    expect(nested.concepts[4]?.properties).toEqual([{ code: 'status', type: 'valueCode', value: 'retired' }]);
    expect(nested.version).toBe('1');
  });

  it('answers descendants, ancestors, children, parents and subsumption from nesting', () => {
    const a = nested.find('A') as number;
    const a1 = nested.find('A1') as number;
    const a11 = nested.find('A11') as number;
    expect(codes(nested, nested.descendants(a))).toEqual(['A1', 'A11', 'A12', 'A2']);
    expect(codes(nested, nested.descendants(a1))).toEqual(['A11', 'A12']);
    expect(codes(nested, nested.ancestors(a11))).toEqual(['A', 'A1']);
    expect(codes(nested, nested.children(a))).toEqual(['A1', 'A2']);
    expect(codes(nested, nested.parents(a11))).toEqual(['A1']);
    expect(nested.subsumes(a, a11)).toBe(true);
    expect(nested.subsumes(a11, a)).toBe(false);
    expect(nested.subsumes(a, nested.find('B') as number)).toBe(false);
    expect(nested.find('nope')).toBeUndefined();
  });

  it('takes the hierarchy from parent, child and subsumedBy properties, a polyhierarchy too', () => {
    const cs = buildCodeSystemIndex({
      resourceType: 'CodeSystem',
      url: 'http://x/poly',
      concept: [
        { code: 'root', property: [{ code: 'child', valueCode: 'x' }] },
        { code: 'x', property: [{ code: 'child', valueCode: 'y' }] },
        { code: 'z', property: [{ code: 'parent', valueCode: 'root' }] },
        { code: 'y', property: [{ code: 'subsumedBy', valueCode: 'z' }] },
      ],
    });
    const root = cs.find('root') as number;
    expect(codes(cs, cs.descendants(root))).toEqual(['x', 'y', 'z']);
    expect(codes(cs, cs.ancestors(cs.find('y') as number))).toEqual(['root', 'x', 'z']);
    expect(cs.subsumes(cs.find('z') as number, cs.find('y') as number)).toBe(true);
    expect(cs.subsumes(cs.find('x') as number, cs.find('z') as number)).toBe(false);
  });

  it('survives a cycle of parent properties', () => {
    const cs = buildCodeSystemIndex({
      resourceType: 'CodeSystem',
      url: 'http://x/cycle',
      concept: [
        { code: 'a', property: [{ code: 'parent', valueCode: 'b' }] },
        { code: 'b', property: [{ code: 'parent', valueCode: 'a' }] },
      ],
    });
    expect(codes(cs, cs.descendants(cs.find('a') as number))).toEqual(['b']);
    expect(codes(cs, cs.ancestors(cs.find('a') as number))).toEqual(['b']);
  });

  it('flattens a 20,000-level nesting without recursion', () => {
    let concept: Record<string, unknown> = { code: 'c19999' };
    for (let i = 19998; i >= 0; i--) concept = { code: `c${i}`, concept: [concept] };
    const cs = buildCodeSystemIndex({ resourceType: 'CodeSystem', url: 'http://x/deep', concept: [concept] });
    expect(cs.concepts).toHaveLength(20000);
    expect(cs.descendants(0)).toHaveLength(19999);
    expect(cs.ancestors(19999)).toHaveLength(19999);
  });

  it('finds codes case-insensitively when the code system says so', () => {
    const cs = buildCodeSystemIndex({
      resourceType: 'CodeSystem',
      url: 'http://x/ci',
      caseSensitive: false,
      concept: [{ code: 'Abc' }],
    });
    expect(cs.find('aBC')).toBe(0);
    expect(nested.find('a')).toBeUndefined();
  });
});
