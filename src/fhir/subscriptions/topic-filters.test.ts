import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import { EXT, type CompiledCriteria } from './model.js';
import { compileFilters, filterCriteria, filtersMatch } from './topic-filters.js';
import { compileTopic, type CompileCriteria } from './topic.js';

/** A stand-in for the search matcher: `<param>=<value>` compares resource[param] (the param name as element name). */
function fakeCompiler(): { compile: CompileCriteria; calls: string[] } {
  const calls: string[] = [];
  const compile: CompileCriteria = (query, resourceType): CompiledCriteria => {
    calls.push(`${resourceType}?${query}`);
    if (query.startsWith('broken')) throw new FhirError('invalid', 'Unknown parameter broken', 'test.broken');
    const tests = query.split('&').map((p) => {
      const [key = '', value = ''] = p.split('=');
      const [name = '', modifier] = key.split(':');
      return (r: Resource) => (String(r[name]) === value) !== (modifier === 'not');
    });
    return { resourceType, query, matches: (r) => tests.every((t) => t(r)) };
  };
  return { compile, calls };
}

const subscription = (...filters: string[]): Resource => ({
  resourceType: 'Subscription',
  status: 'requested',
  criteria: 'https://example.org/topics/t',
  _criteria: {
    extension: [
      ...filters.map((valueString) => ({ url: EXT.filterCriteria, valueString })),
      { url: 'https://example.org/other-extension', valueString: 'status=ignored' },
    ],
  },
});

const topicOf = (types: string[], canFilterBy: Record<string, unknown>[]) =>
  compileTopic(
    {
      resourceType: 'SubscriptionTopic',
      url: 'https://example.org/topics/t',
      status: 'active',
      resourceTrigger: types.map((resource) => ({ resource })),
      canFilterBy,
    },
    fakeCompiler().compile,
  );

function refusal(fn: () => unknown): { code: string; status: number; expression?: string[] } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    const e = err as FhirError;
    return { code: e.code, status: e.status, expression: e.issues[0]?.expression };
  }
  throw new Error('expected a FhirError');
}

describe('topic filters (backport-filter-criteria)', () => {
  const encounterTopic = topicOf(
    ['Encounter'],
    [
      { resource: 'Encounter', filterParameter: 'status', modifier: ['not'] },
      {
        resource: 'Encounter',
        filterParameter: 'state',
        filterDefinition: 'http://hl7.org/fhir/SearchParameter/Encounter-status',
      },
    ],
  );

  it('reads the extension values of Subscription.criteria only', () => {
    expect(filterCriteria(subscription('Encounter?status=finished', 'status=planned'))).toEqual([
      'Encounter?status=finished',
      'status=planned',
    ]);
    expect(filterCriteria({ resourceType: 'Subscription' })).toEqual([]);
  });

  it('compiles Type?query, Type.query and bare filters, and matches resources of their type', () => {
    const { compile, calls } = fakeCompiler();
    const filters = compileFilters(
      subscription('Encounter?status=finished', 'Encounter.status:not=cancelled', 'state=finished'),
      encounterTopic,
      compile,
    );
    // `state` stands for Encounter-status (its filterDefinition): compiled as `status`.
    expect(calls).toEqual([
      'Encounter?status=finished',
      'Encounter?status:not=cancelled',
      'Encounter?status=finished',
    ]);
    expect(filters.map((f) => f.resourceType)).toEqual(['Encounter', 'Encounter', 'Encounter']);
    expect(filtersMatch(filters, { resourceType: 'Encounter', status: 'finished' })).toBe(true);
    expect(filtersMatch(filters, { resourceType: 'Encounter', status: 'planned' })).toBe(false);
    // A filter applies to resources of its own type only.
    expect(filtersMatch(filters, { resourceType: 'Patient', status: 'planned' })).toBe(true);
    expect(filtersMatch([], { resourceType: 'Encounter' })).toBe(true);
  });

  it('refuses parameters, modifiers and types the topic does not allow', () => {
    const { compile } = fakeCompiler();
    const at = ['Subscription.criteria.extension[1]'];
    const cases: [string, string][] = [
      ['Encounter?subject=Patient/1', 'subscription.filter-not-allowed'],
      ['Encounter?status:missing=true', 'subscription.filter-modifier-not-allowed'],
      ['Encounter?state:not=finished', 'subscription.filter-modifier-not-allowed'],
      ['Observation?status=final', 'subscription.filter-type'],
      ['Nope?status=final', 'subscription.filter-type'],
      ['Encounter?status', 'subscription.filter-syntax'],
      ['Encounter?', 'subscription.filter-syntax'],
    ];
    for (const [filter, code] of cases) {
      expect(
        refusal(() => compileFilters(subscription('status=planned', filter), encounterTopic, compile)),
        filter,
      ).toEqual({
        code,
        status: 400,
        expression: at,
      });
    }
    const broken = topicOf(['Encounter'], [{ filterParameter: 'broken' }]);
    expect(refusal(() => compileFilters(subscription('broken=1'), broken, compile))).toMatchObject({
      code: 'subscription.filter-invalid',
      status: 400,
    });
  });

  it('needs the type of a bare filter when the topic has several, unless canFilterBy names one', () => {
    const { compile } = fakeCompiler();
    const multi = topicOf(
      ['Encounter', 'Observation'],
      [{ resource: 'Encounter', filterParameter: 'class' }, { filterParameter: 'status' }],
    );
    const [f] = compileFilters(subscription('class=IMP'), multi, compile);
    expect(f?.resourceType).toBe('Encounter');
    expect(refusal(() => compileFilters(subscription('status=final'), multi, compile)).code).toBe(
      'subscription.filter-type',
    );
    const filters = compileFilters(
      subscription('Observation?status=final', 'Encounter?status=finished'),
      multi,
      compile,
    );
    expect(filtersMatch(filters, { resourceType: 'Observation', status: 'final' })).toBe(true);
    expect(filtersMatch(filters, { resourceType: 'Observation', status: 'preliminary' })).toBe(false);
    expect(filtersMatch(filters, { resourceType: 'Encounter', status: 'finished' })).toBe(true);
  });

  it('allows only the comparators canFilterBy lists, on parameters that take them', () => {
    const { compile } = fakeCompiler();
    const obs = topicOf(
      ['Observation'],
      [
        { resource: 'Observation', filterParameter: 'date', comparator: ['gt', 'ge'] },
        { resource: 'Observation', filterParameter: 'value-quantity' },
        { resource: 'Observation', filterParameter: 'code' },
      ],
    );
    expect(
      compileFilters(subscription('date=gt2020-01-01', 'date=2020', 'date=eq2021'), obs, compile),
    ).toHaveLength(3);
    expect(refusal(() => compileFilters(subscription('date=lt2020-01-01'), obs, compile)).code).toBe(
      'subscription.filter-comparator-not-allowed',
    );
    expect(refusal(() => compileFilters(subscription('value-quantity=ge5'), obs, compile)).code).toBe(
      'subscription.filter-comparator-not-allowed',
    );
    // A token is never prefixed: `le` is part of the code.
    expect(compileFilters(subscription('code=le1234'), obs, compile)).toHaveLength(1);
  });
});
