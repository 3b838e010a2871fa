import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { CompiledCriteria, TriggerInteraction, WriteChange } from './model.js';
import { MAX_FHIRPATH_LENGTH } from './topic-fhirpath.js';
import { compileTopic, type CompileCriteria } from './topic.js';

/** A stand-in for the search matcher: `status=x` / `status:not=x` on resource.status; anything else does not compile. */
function fakeCompiler(): { compile: CompileCriteria; calls: string[] } {
  const calls: string[] = [];
  const compile: CompileCriteria = (query, resourceType): CompiledCriteria => {
    calls.push(`${resourceType}?${query}`);
    const m = /^status(:not)?=([a-z-]+)$/.exec(query);
    if (!m) throw new FhirError('invalid', `Unknown search '${query}'`, 'test.unknown');
    const not = m[1] !== undefined;
    return {
      resourceType,
      query,
      matches: (r: Resource) => r.resourceType === resourceType && (r.status === m[2]) !== not,
    };
  };
  return { compile, calls };
}

const enc = (status: string, id = 'e1'): Resource => ({ resourceType: 'Encounter', id, status });

function change(
  interaction: TriggerInteraction,
  previous: Resource | null,
  current: Resource | null,
): WriteChange {
  const r = (current ?? previous) as Resource;
  return {
    interaction,
    projectId: 'p1',
    resourceType: r.resourceType,
    id: r.id as string,
    versionId: 2,
    current,
    previous,
  };
}

const topic = (trigger: Record<string, unknown>, extra: Record<string, unknown> = {}): Resource => ({
  resourceType: 'SubscriptionTopic',
  url: 'https://example.org/topics/encounter-finished',
  status: 'active',
  resourceTrigger: [{ resource: 'Encounter', ...trigger }],
  ...extra,
});

/** R5's encounter-complete example: previous `status:not=finished`, current `status=finished`, both required. */
const finishedCriteria = {
  previous: 'status:not=finished',
  resultForCreate: 'test-passes',
  current: 'status=finished',
  resultForDelete: 'test-fails',
  requireBoth: true,
};

function thrown(fn: () => unknown): FhirError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    return err as FhirError;
  }
  throw new Error('expected a FhirError');
}

describe('compileTopic', () => {
  it('fires on its resource type (a name or a StructureDefinition URL) and supported interactions', () => {
    const { compile } = fakeCompiler();
    const t = compileTopic(
      topic({
        resource: 'http://hl7.org/fhir/StructureDefinition/Encounter',
        supportedInteraction: ['create'],
      }),
      compile,
    );
    expect(t.url).toBe('https://example.org/topics/encounter-finished');
    expect(t.resourceTypes).toEqual(['Encounter']);
    expect(t.triggers(change('create', null, enc('planned')))).toBe(true);
    expect(t.triggers(change('update', enc('planned'), enc('finished')))).toBe(false);
    const patient: Resource = { resourceType: 'Patient', id: 'p' };
    expect(t.triggers(change('create', null, patient))).toBe(false);

    const all = compileTopic(topic({}), compile);
    for (const i of ['create', 'update', 'delete'] as const) {
      expect(
        all.triggers(change(i, i === 'create' ? null : enc('a'), i === 'delete' ? null : enc('b'))),
      ).toBe(true);
    }
  });

  it('tests queryCriteria on the previous and current versions, with resultForCreate/Delete for the missing one', () => {
    const { compile, calls } = fakeCompiler();
    const t = compileTopic(topic({ queryCriteria: finishedCriteria }), compile);
    expect(calls).toEqual(['Encounter?status:not=finished', 'Encounter?status=finished']);
    expect(t.triggers(change('create', null, enc('finished')))).toBe(true);
    expect(t.triggers(change('create', null, enc('in-progress')))).toBe(false);
    expect(t.triggers(change('update', enc('in-progress'), enc('finished')))).toBe(true);
    expect(t.triggers(change('update', enc('finished'), enc('finished')))).toBe(false);
    expect(t.triggers(change('update', enc('finished'), enc('cancelled')))).toBe(false);
    expect(t.triggers(change('delete', enc('in-progress'), null))).toBe(false); // resultForDelete: test-fails
    // Compiled once: matching calls no compiler.
    expect(calls).toHaveLength(2);

    // requireBoth false: one passing side is enough.
    const either = compileTopic(
      topic({ queryCriteria: { ...finishedCriteria, requireBoth: false } }),
      compile,
    );
    expect(either.triggers(change('update', enc('finished'), enc('finished')))).toBe(true);
    expect(either.triggers(change('update', enc('finished'), enc('in-progress')))).toBe(false);
    expect(either.triggers(change('create', null, enc('planned')))).toBe(true); // resultForCreate: test-passes
    expect(either.triggers(change('delete', enc('finished'), null))).toBe(false);
    const deletes = compileTopic(
      topic({ queryCriteria: { ...finishedCriteria, resultForDelete: 'test-passes' } }),
      compile,
    );
    expect(deletes.triggers(change('delete', enc('in-progress'), null))).toBe(true);
    expect(deletes.triggers(change('delete', enc('finished'), null))).toBe(false);

    // resultForCreate test-fails with requireBoth: no create can fire.
    const noCreate = compileTopic(
      topic({ queryCriteria: { ...finishedCriteria, resultForCreate: 'test-fails' } }),
      compile,
    );
    expect(noCreate.triggers(change('create', null, enc('finished')))).toBe(false);
    // No resultForCreate: the previous side is not tested, the current one decides.
    const { resultForCreate: _, ...unspecified } = finishedCriteria;
    const open = compileTopic(topic({ queryCriteria: unspecified }), compile);
    expect(open.triggers(change('create', null, enc('finished')))).toBe(true);
    expect(open.triggers(change('create', null, enc('planned')))).toBe(false);
  });

  it('accepts criteria written with their type, and refuses another type', () => {
    const { compile } = fakeCompiler();
    const t = compileTopic(topic({ queryCriteria: { current: 'Encounter?status=finished' } }), compile);
    expect(t.triggers(change('update', enc('a'), enc('finished')))).toBe(true);
    expect(t.triggers(change('update', enc('a'), enc('b')))).toBe(false);
    const err = thrown(() =>
      compileTopic(topic({ queryCriteria: { current: 'Patient?status=x' } }), compile),
    );
    expect(err).toMatchObject({ status: 422, code: 'subscription.topic-criteria-type' });
    expect(err.issues[0]?.expression).toEqual(['SubscriptionTopic.resourceTrigger[0].queryCriteria.current']);
  });

  it('evaluates fhirPathCriteria with %previous and %current, an evaluation error being no match', () => {
    const { compile } = fakeCompiler();
    const t = compileTopic(
      topic({
        fhirPathCriteria:
          "(%previous.empty() or %previous.status != 'finished') and %current.status = 'finished'",
      }),
      compile,
    );
    expect(t.triggers(change('create', null, enc('finished')))).toBe(true);
    expect(t.triggers(change('update', enc('in-progress'), enc('finished')))).toBe(true);
    expect(t.triggers(change('update', enc('finished'), enc('finished')))).toBe(false);
    expect(t.triggers(change('delete', enc('finished'), null))).toBe(false);

    // single() over two names fails at run time: no match, no throw.
    const failing = compileTopic(topic({ fhirPathCriteria: "%current.name.single().text = 'x'" }), compile);
    const twoNames = { ...enc('x'), name: [{ text: 'x' }, { text: 'y' }] };
    expect(failing.triggers(change('update', enc('x'), twoNames))).toBe(false);
    expect(failing.triggers(change('update', enc('x'), { ...enc('x'), name: [{ text: 'x' }] }))).toBe(true);

    // A refused function's name inside a string is text.
    const literal = compileTopic(topic({ fhirPathCriteria: "%current.status = 'repeat(x)'" }), compile);
    expect(literal.triggers(change('create', null, enc('repeat(x)')))).toBe(true);

    // A non-boolean result is no match; both criteria kinds must pass together.
    expect(
      compileTopic(topic({ fhirPathCriteria: '%current.status' }), compile).triggers(
        change('create', null, enc('a')),
      ),
    ).toBe(false);
    const both = compileTopic(
      topic({ queryCriteria: { current: 'status=finished' }, fhirPathCriteria: "%current.id = 'e1'" }),
      compile,
    );
    expect(both.triggers(change('create', null, enc('finished')))).toBe(true);
    expect(both.triggers(change('create', null, enc('finished', 'e2')))).toBe(false);
  });

  it('ORs several triggers and lists their types once', () => {
    const { compile } = fakeCompiler();
    const t = compileTopic(
      topic(
        { queryCriteria: { current: 'status=finished' } },
        {
          resourceTrigger: [
            { resource: 'Encounter', queryCriteria: { current: 'status=finished' } },
            { resource: 'Encounter', supportedInteraction: ['delete'] },
            { resource: 'Observation', supportedInteraction: ['create'] },
          ],
        },
      ),
      compile,
    );
    expect(t.resourceTypes).toEqual(['Encounter', 'Observation']);
    expect(t.triggers(change('update', enc('a'), enc('finished')))).toBe(true);
    expect(t.triggers(change('delete', enc('a'), null))).toBe(true);
    expect(t.triggers(change('update', enc('a'), enc('b')))).toBe(false);
    expect(t.triggers(change('create', null, { resourceType: 'Observation', id: 'o' }))).toBe(true);
  });

  it('refuses topics it cannot run, with a code per reason and the element', () => {
    const { compile } = fakeCompiler();
    const cases: [Resource, string, string][] = [
      [{ resourceType: 'Patient' }, 'subscription.topic-type', 'Patient'],
      [{ ...topic({}), url: undefined }, 'subscription.topic-url', 'SubscriptionTopic.url'],
      [
        { ...topic({}), resourceTrigger: [] },
        'subscription.topic-no-trigger',
        'SubscriptionTopic.resourceTrigger',
      ],
      [
        {
          ...topic({}),
          resourceTrigger: undefined,
          eventTrigger: [{ event: { text: 'x' }, resource: 'Encounter' }],
        },
        'subscription.topic-no-trigger',
        'SubscriptionTopic.resourceTrigger',
      ],
      [
        topic({ resource: 'Encounterz' }),
        'subscription.topic-resource',
        'SubscriptionTopic.resourceTrigger[0].resource',
      ],
      [
        topic({ resource: 'http://example.org/StructureDefinition/Encounter' }),
        'subscription.topic-resource',
        'SubscriptionTopic.resourceTrigger[0].resource',
      ],
      [
        topic({ supportedInteraction: ['create', 'read'] }),
        'subscription.topic-interaction',
        'SubscriptionTopic.resourceTrigger[0].supportedInteraction[1]',
      ],
      [
        topic({ queryCriteria: { current: 'code=1234' } }),
        'subscription.topic-criteria',
        'SubscriptionTopic.resourceTrigger[0].queryCriteria.current',
      ],
      [
        topic({ queryCriteria: { current: 'status=x', resultForDelete: 'maybe' } }),
        'subscription.topic-result-code',
        'SubscriptionTopic.resourceTrigger[0].queryCriteria.resultForDelete',
      ],
      [
        topic({ fhirPathCriteria: "%current.status = 'finished' and" }),
        'subscription.topic-fhirpath',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ fhirPathCriteria: '%current.noSuchFunction()' }),
        'subscription.topic-fhirpath',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ fhirPathCriteria: '%undefinedVariable.exists()' }),
        'subscription.topic-fhirpath',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ fhirPathCriteria: `%current.id = '${'x'.repeat(MAX_FHIRPATH_LENGTH)}'` }),
        'subscription.topic-fhirpath-length',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ fhirPathCriteria: "%current.name.text.matches('(a+)+$')" }),
        'subscription.topic-fhirpath-function',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ fhirPathCriteria: '%current.`descendants` ( ).exists()' }),
        'subscription.topic-fhirpath-function',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ fhirPathCriteria: '' }),
        'subscription.topic-fhirpath-empty',
        'SubscriptionTopic.resourceTrigger[0].fhirPathCriteria',
      ],
      [
        topic({ queryCriteria: 'status=finished' }),
        'subscription.topic-criteria-object',
        'SubscriptionTopic.resourceTrigger[0].queryCriteria',
      ],
      [
        topic({}, { canFilterBy: [{ resource: 'Nope', filterParameter: 'status' }] }),
        'subscription.topic-filter-resource',
        'SubscriptionTopic.canFilterBy[0].resource',
      ],
      [
        topic({}, { canFilterBy: [{ resource: 'Encounter', filterParameter: 'status:not' }] }),
        'subscription.topic-filter-parameter',
        'SubscriptionTopic.canFilterBy[0].filterParameter',
      ],
    ];
    for (const [t, code, expression] of cases) {
      const err = thrown(() => compileTopic(t, compile));
      expect({ code: err.code, status: err.status, expression: err.issues[0]?.expression }, code).toEqual({
        code,
        status: 422,
        expression: [expression],
      });
      expect(err.issues[0]?.code).toBe('processing');
    }
  });

  it('reads canFilterBy', () => {
    const { compile } = fakeCompiler();
    const t = compileTopic(
      topic(
        {},
        {
          canFilterBy: [
            {
              resource: 'http://hl7.org/fhir/StructureDefinition/Encounter',
              filterParameter: 'patient',
              filterDefinition: 'http://hl7.org/fhir/SearchParameter/clinical-patient',
              modifier: ['missing'],
            },
            { filterParameter: 'status', comparator: ['eq'] },
          ],
        },
      ),
      compile,
    );
    expect(t.canFilterBy).toEqual([
      {
        resourceType: 'Encounter',
        filterParameter: 'patient',
        filterDefinition: 'http://hl7.org/fhir/SearchParameter/clinical-patient',
        modifiers: ['missing'],
        comparators: [],
      },
      { filterParameter: 'status', modifiers: [], comparators: ['eq'] },
    ]);
  });
});
