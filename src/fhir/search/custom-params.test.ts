// Custom search parameters, pure: what a SearchParameter defines, its index key, extraction and the rekeyed request.
import { describe, expect, it } from 'vitest';
import { paramSet, readSearchParameter, rekey } from './custom-params.js';
import { parseSearchRequest } from './parse.js';

const sp = (extra: Record<string, unknown> = {}): Record<string, unknown> & { resourceType: string } => ({
  resourceType: 'SearchParameter',
  status: 'active',
  code: 'nickname',
  base: ['Patient', 'RelatedPerson'],
  type: 'string',
  expression: "Patient.name.where(use='nickname').given | RelatedPerson.name.where(use='nickname').given",
  ...extra,
});

describe('custom search parameters', () => {
  it('defines one parameter per base, keyed by type and expression', () => {
    const [a, b] = readSearchParameter(sp());
    expect(a?.base).toBe('Patient');
    expect(b?.base).toBe('RelatedPerson');
    expect(a?.key).toMatch(/^nickname~[0-9a-f]{12}$/);
    expect(readSearchParameter(sp())[0]?.key).toBe(a?.key);
    expect(readSearchParameter(sp({ type: 'token' }))[0]?.key).not.toBe(a?.key);
    expect(readSearchParameter(sp({ expression: 'Patient.name.given' }))[0]?.key).not.toBe(a?.key);
  });

  it('extracts values of its type under the key, for the resource type only', () => {
    const set = paramSet(readSearchParameter(sp()));
    const key = set.get('Patient', 'nickname')?.key;
    const values = set.extract({
      resourceType: 'Patient',
      name: [{ use: 'nickname', given: ['Bobby'] }, { given: ['Robert'] }],
    });
    expect(values).toHaveLength(1);
    expect(values[0]?.code).toBe(key);
    expect(values[0]?.values).toHaveLength(1);
    expect(set.extract({ resourceType: 'Observation', status: 'final' })).toEqual([]);
  });

  it('rekeys filters, chains, _has, sort and includes; built-in codes stay', () => {
    const own = readSearchParameter(sp());
    const ref = readSearchParameter(
      sp({ code: 'doctor', base: ['Patient'], type: 'reference', expression: 'Patient.generalPractitioner' }),
    );
    const set = paramSet([...own, ...ref]);
    const key = (c: string): string => set.get('Patient', c)?.key as string;
    const req = parseSearchRequest(
      'Patient',
      {
        nickname: 'Bob',
        family: 'X',
        _sort: 'nickname',
        _include: 'Patient:doctor',
        'doctor:Practitioner.name': 'Welby',
      },
      { params: set.get },
    );
    const out = rekey(req, set);
    expect(out.filters.map((f) => f.code)).toEqual([key('nickname'), 'family', key('doctor')]);
    expect(out.sort[0]?.code).toBe(key('nickname'));
    expect(out.include[0]?.code).toBe(key('doctor'));
    const has = rekey(
      parseSearchRequest('Practitioner', { '_has:Patient:doctor:nickname': 'Bob' }, { params: set.get }),
      set,
    );
    expect(has.filters[0]?.has?.code).toBe(key('doctor'));
    expect(has.filters[0]?.has?.filter.code).toBe(key('nickname'));
    // Without the set, the same query is an unknown parameter.
    expect(() => parseSearchRequest('Patient', { nickname: 'Bob' })).toThrow(/Unknown search parameter/);
  });
});
