import { describe, expect, it } from 'vitest';
import { FhirError } from '../../outcome.js';
import type { Resource } from '../../types.js';
import { splitCanonical, type At, type ConformanceResolver, type ConformanceType } from '../model.js';
import { createTerminology } from './index.js';

const AT: At = { projectId: 'p1' };
const CS = 'http://x/cs';

/** A resolver over an in-memory list, counting content reads, with versions that change on `put`. */
function fakeResolver(initial: Resource[]): ConformanceResolver & { put(r: Resource): void; reads: number } {
  const store = new Map<string, Resource>();
  let n = 0;
  const put = (r: Resource): void => {
    const key = `${r.resourceType} ${String(r.url)}`;
    const v = Number(store.get(key)?.meta?.versionId ?? 0) + 1;
    store.set(key, { ...r, id: r.id ?? `id${++n}`, meta: { project: 'p1', versionId: String(v) } });
  };
  initial.forEach(put);
  const find = (type: ConformanceType, canonical: string): Resource | undefined => {
    const { url, version } = splitCanonical(canonical);
    const r = store.get(`${type} ${url}`);
    return r && (version === undefined || r.version === version) ? r : undefined;
  };
  const self = {
    reads: 0,
    put,
    async resolve(_at: At, type: ConformanceType, canonical: string) {
      self.reads++;
      const r = find(type, canonical);
      return r ? (JSON.parse(JSON.stringify(r)) as Resource) : undefined;
    },
    async stamp(_at: At, type: ConformanceType, canonical: string) {
      const r = find(type, canonical);
      return r ? `p:p1:${type}/${String(r.id)}:${String(r.meta?.versionId)}` : `none ${type} ${canonical}`;
    },
  };
  return self;
}

const codeSystem: Resource = {
  resourceType: 'CodeSystem',
  url: CS,
  version: '2',
  content: 'complete',
  property: [{ code: 'kind', type: 'code' }],
  concept: [
    {
      code: 'animal',
      display: 'Animal',
      concept: [
        {
          code: 'mammal',
          display: 'Mammal',
          property: [{ code: 'kind', valueCode: 'warm' }],
          concept: [
            { code: 'dog', display: 'Dog', property: [{ code: 'kind', valueCode: 'pet' }] },
            { code: 'cat', display: 'Cat', property: [{ code: 'kind', valueCode: 'pet' }] },
          ],
        },
        { code: 'fish', display: 'Fish' },
      ],
    },
    { code: 'plant', display: 'Plant' },
  ],
};

const vs = (url: string, compose: Record<string, unknown>): Resource => ({
  resourceType: 'ValueSet',
  url,
  compose,
});
const codesOf = async (t: ReturnType<typeof createTerminology>, v: string | Resource): Promise<string[]> =>
  ((await t.expand(AT, v))?.contains ?? []).map((c) => c.code).sort();
const errorCode = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
    return 'no error';
  } catch (e) {
    return e instanceof FhirError ? `${e.status} ${e.code}` : String(e);
  }
};

describe('terminology engine', () => {
  const filter = (property: string, op: string, value: string) =>
    vs('http://x/f', { include: [{ system: CS, filter: [{ property, op, value }] }] });

  it('expands a whole system, listed concepts, and every filter', async () => {
    const t = createTerminology({ resolver: fakeResolver([codeSystem]) });
    expect(await codesOf(t, vs('http://x/all', { include: [{ system: CS }] }))).toEqual([
      'animal',
      'cat',
      'dog',
      'fish',
      'mammal',
      'plant',
    ]);
    const listed = await t.expand(
      AT,
      vs('http://x/l', { include: [{ system: CS, concept: [{ code: 'dog' }, { code: 'nope' }] }] }),
    );
    expect(listed?.contains).toEqual([{ system: CS, version: '2', code: 'dog', display: 'Dog' }]);
    expect(await codesOf(t, filter('concept', 'is-a', 'mammal'))).toEqual(['cat', 'dog', 'mammal']);
    expect(await codesOf(t, filter('concept', 'descendent-of', 'mammal'))).toEqual(['cat', 'dog']);
    expect(await codesOf(t, filter('concept', 'is-not-a', 'mammal'))).toEqual(['animal', 'fish', 'plant']);
    expect(await codesOf(t, filter('concept', 'generalizes', 'dog'))).toEqual(['animal', 'dog', 'mammal']);
    expect(await codesOf(t, filter('kind', '=', 'pet'))).toEqual(['cat', 'dog']);
    expect(await codesOf(t, filter('kind', 'in', 'warm, pet'))).toEqual(['cat', 'dog', 'mammal']);
    expect(await codesOf(t, filter('kind', 'not-in', 'pet'))).toEqual(['animal', 'fish', 'mammal', 'plant']);
    expect(await codesOf(t, filter('display', '=', 'Fish'))).toEqual(['fish']);
    expect(await codesOf(t, filter('code', 'regex', '[cd].*'))).toEqual(['cat', 'dog']);
    expect(await codesOf(t, filter('display', 'regex', 'F.*'))).toEqual(['fish']);
    expect(await codesOf(t, filter('kind', 'exists', 'true'))).toEqual(['cat', 'dog', 'mammal']);
    expect(await codesOf(t, filter('kind', 'exists', 'false'))).toEqual(['animal', 'fish', 'plant']);
    expect(await codesOf(t, filter('concept', 'is-a', 'unknown'))).toEqual([]);
    expect(await errorCode(t.expand(AT, filter('concept', 'sideways', 'x')))).toBe(
      '422 terminology.filter-op',
    );
    expect(await errorCode(t.expand(AT, filter('code', 'regex', '(a+)+$')))).toBe('422 terminology.regex');
  });

  it('applies filters together, and excludes', async () => {
    const t = createTerminology({ resolver: fakeResolver([codeSystem]) });
    const both = vs('http://x/b', {
      include: [
        {
          system: CS,
          filter: [
            { property: 'concept', op: 'is-a', value: 'animal' },
            { property: 'kind', op: '=', value: 'pet' },
          ],
        },
      ],
    });
    expect(await codesOf(t, both)).toEqual(['cat', 'dog']);
    const minus = vs('http://x/m', {
      include: [{ system: CS }],
      exclude: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }],
    });
    expect(await codesOf(t, minus)).toEqual(['animal', 'fish', 'plant']);
  });

  it('imports value sets: alone a union, beside a system an intersection', async () => {
    const r = fakeResolver([
      codeSystem,
      vs('http://x/mammals', {
        include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }],
      }),
      vs('http://x/pets', {
        include: [{ system: CS, filter: [{ property: 'kind', op: '=', value: 'pet' }] }],
      }),
      vs('http://x/other', {
        include: [{ system: 'http://x/other-cs', concept: [{ code: 'q', display: 'Q' }] }],
      }),
    ]);
    const t = createTerminology({ resolver: r });
    expect(
      await codesOf(
        t,
        vs('http://x/u', { include: [{ valueSet: ['http://x/pets'] }, { valueSet: ['http://x/other'] }] }),
      ),
    ).toEqual(['cat', 'dog', 'q']);
    expect(
      await codesOf(t, vs('http://x/i', { include: [{ valueSet: ['http://x/mammals', 'http://x/pets'] }] })),
    ).toEqual(['cat', 'dog']);
    expect(
      await codesOf(
        t,
        vs('http://x/s', {
          include: [
            { system: CS, concept: [{ code: 'dog' }, { code: 'fish' }], valueSet: ['http://x/mammals'] },
          ],
        }),
      ),
    ).toEqual(['dog']);
    expect(
      await errorCode(t.expand(AT, vs('http://x/n', { include: [{ valueSet: ['http://x/missing'] }] }))),
    ).toBe('422 terminology.import-not-found');
  });

  it('answers a cycle of imports with 422, never a stack overflow', async () => {
    const r = fakeResolver([
      vs('http://x/a', { include: [{ valueSet: ['http://x/b'] }] }),
      vs('http://x/b', { include: [{ valueSet: ['http://x/a'] }] }),
      vs('http://x/self', { include: [{ valueSet: ['http://x/self'] }] }),
    ]);
    const t = createTerminology({ resolver: r });
    expect(await errorCode(t.expand(AT, 'http://x/a'))).toBe('422 terminology.cycle');
    expect(await errorCode(t.expand(AT, 'http://x/self'))).toBe('422 terminology.cycle');
    expect(await t.validateCode(AT, 'http://x/a', { system: CS, code: 'dog' })).toBeUndefined();
  });

  it('bounds import chains', async () => {
    const chain = Array.from({ length: 40 }, (_, i) =>
      vs(`http://x/c${i}`, { include: [{ valueSet: [`http://x/c${i + 1}`] }] }),
    );
    const t = createTerminology({ resolver: fakeResolver(chain) });
    expect(await errorCode(t.expand(AT, 'http://x/c0'))).toBe('422 terminology.too-deep');
  });

  it('is too costly beyond the limit, never partial', async () => {
    const t = createTerminology({ resolver: fakeResolver([codeSystem]), limits: { maxCodes: 3 } });
    expect(await errorCode(t.expand(AT, vs('http://x/all', { include: [{ system: CS }] })))).toBe(
      '422 terminology.too-costly',
    );
    expect(await errorCode(t.expand(AT, filter('concept', 'is-a', 'animal')))).toBe(
      '422 terminology.too-costly',
    );
    expect(await codesOf(t, filter('concept', 'is-a', 'mammal'))).toEqual(['cat', 'dog', 'mammal']);
  });

  it('cannot expand code systems it does not hold; validateCode answers undefined then', async () => {
    const t = createTerminology({ resolver: fakeResolver([]) });
    const loinc = vs('http://x/loinc', { include: [{ system: 'http://loinc.org' }] });
    expect(await errorCode(t.expand(AT, loinc))).toBe('422 terminology.unknown-system');
    expect(await t.validateCode(AT, loinc, { system: 'http://loinc.org', code: '1-8' })).toBeUndefined();
    const listed = vs('http://x/ll', {
      include: [{ system: 'http://loinc.org', concept: [{ code: '1-8', display: 'One' }] }],
    });
    expect((await t.expand(AT, listed))?.contains).toEqual([
      { system: 'http://loinc.org', code: '1-8', display: 'One' },
    ]);
    expect(await t.expand(AT, 'http://x/unknown')).toBeUndefined();
  });

  it('uses a carried expansion when there is no compose', async () => {
    const t = createTerminology({ resolver: fakeResolver([]) });
    const carried: Resource = {
      resourceType: 'ValueSet',
      expansion: {
        contains: [
          { system: 's', code: 'a', contains: [{ system: 's', code: 'b' }] },
          { abstract: true, code: 'h' },
        ],
      },
    };
    expect(await codesOf(t, carried)).toEqual(['a', 'b']);
  });

  it('marks inactive codes, leaves them out with compose.inactive = false or activeOnly', async () => {
    const cs: Resource = {
      resourceType: 'CodeSystem',
      url: 'http://x/status',
      concept: [
        { code: 'live' },
        { code: 'old', property: [{ code: 'status', valueCode: 'retired' }] },
        { code: 'off', property: [{ code: 'inactive', valueBoolean: true }] },
      ],
    };
    const t = createTerminology({ resolver: fakeResolver([cs]) });
    const all = vs('http://x/s', { include: [{ system: 'http://x/status' }] });
    expect((await t.expand(AT, all))?.contains.filter((c) => c.inactive).map((c) => c.code)).toEqual([
      'old',
      'off',
    ]);
    expect(await codesOf(t, { ...all, compose: { ...(all.compose as object), inactive: false } })).toEqual([
      'live',
    ]);
    expect((await t.expand(AT, all, { activeOnly: true }))?.contains.map((c) => c.code)).toEqual(['live']);
    const listed = vs('http://x/l', {
      inactive: false,
      include: [{ system: 'http://x/status', concept: [{ code: 'old' }, { code: 'live' }] }],
    });
    expect(await codesOf(t, listed)).toEqual(['live']);
  });

  it('filters text on code and display, and pages', async () => {
    const t = createTerminology({ resolver: fakeResolver([codeSystem]) });
    const all = vs('http://x/all', { include: [{ system: CS }] });
    const e = await t.expand(AT, all, { filter: 'A', offset: 1, count: 2 });
    expect(e?.total).toBe(4); // animal, mammal, cat, plant
    expect(e?.contains).toHaveLength(2);
    expect((await t.expand(AT, all, { filter: 'dOg' }))?.contains.map((c) => c.code)).toEqual(['dog']);
  });

  it('validates codes with their display', async () => {
    const t = createTerminology({
      resolver: fakeResolver([codeSystem, filter('concept', 'is-a', 'mammal')]),
    });
    expect(await t.validateCode(AT, 'http://x/f', { system: CS, code: 'dog' })).toEqual({
      result: true,
      display: 'Dog',
    });
    expect(await t.validateCode(AT, 'http://x/f', { code: 'cat' })).toEqual({ result: true, display: 'Cat' });
    expect((await t.validateCode(AT, 'http://x/f', { system: CS, code: 'fish' }))?.result).toBe(false);
    const wrong = await t.validateCode(AT, 'http://x/f', { system: CS, code: 'dog', display: 'Wolf' });
    expect(wrong).toMatchObject({ result: false, display: 'Dog' });
    expect(await t.validateCode(AT, 'http://x/nope', { system: CS, code: 'dog' })).toBeUndefined();
  });

  it('answers below and above', async () => {
    const t = createTerminology({ resolver: fakeResolver([codeSystem]) });
    expect((await t.below(AT, CS, 'mammal'))?.sort()).toEqual(['cat', 'dog', 'mammal']);
    expect((await t.above(AT, CS, 'dog'))?.sort()).toEqual(['animal', 'dog', 'mammal']);
    expect(await t.below(AT, CS, 'nope')).toBeUndefined();
    expect(await t.below(AT, 'http://x/unknown', 'a')).toBeUndefined();
  });

  it('caches compiled code systems and expansions, and sees a change to any input', async () => {
    const r = fakeResolver([codeSystem, filter('concept', 'is-a', 'mammal')]);
    const t = createTerminology({ resolver: r });
    expect(await codesOf(t, 'http://x/f')).toEqual(['cat', 'dog', 'mammal']);
    const reads = r.reads;
    expect(await codesOf(t, 'http://x/f')).toEqual(['cat', 'dog', 'mammal']);
    await t.below(AT, CS, 'mammal');
    expect(r.reads).toBe(reads); // no content read: stamps only
    r.put({ ...codeSystem, concept: [{ code: 'mammal', concept: [{ code: 'whale' }] }] });
    expect(await codesOf(t, 'http://x/f')).toEqual(['mammal', 'whale']);
    r.put(filter('concept', 'is-a', 'whale'));
    expect(await codesOf(t, 'http://x/f')).toEqual(['whale']);
  });
});
