// Unit tests of the profile validator's rules: cardinality, types, fixed and pattern values, each discriminator and
// the slicing rules, extensions by their definitions, invariants (test/support/profiles.ts builds the profiles).
import { describe, expect, it } from 'vitest';
import type { Resource } from '../../types.js';
import { errors, el, P, run, sd, type Json } from '../../../../test/support/profiles.js';

describe('cardinality, types, fixed and pattern', () => {
  const profile = sd('card', 'Patient', [
    el('Patient.identifier', { min: 1, max: '2' }),
    el('Patient.identifier.system', { min: 1, max: '1', fixedUri: 'urn:sys' }),
    el('Patient.maritalStatus', { patternCodeableConcept: { coding: [{ system: 'urn:m', code: 'M' }] } }),
    el('Patient.deceased[x]', { type: [{ code: 'boolean' }] }),
    el('Patient.name', { max: '0' }),
  ]);

  it('accepts a conforming resource', async () => {
    const r = {
      resourceType: 'Patient',
      identifier: [{ system: 'urn:sys', value: '1' }],
      maritalStatus: { coding: [{ system: 'urn:m', code: 'M', display: 'Married' }], text: 'x' },
      deceasedBoolean: false,
    };
    expect(errors(await run([profile], r, 'card'))).toEqual([]);
  });

  it('reports each rule with its expression', async () => {
    const r = {
      resourceType: 'Patient',
      identifier: [{ value: '1' }, { system: 'urn:other' }, { system: 'urn:sys' }],
      maritalStatus: { coding: [{ system: 'urn:m', code: 'S' }] },
      deceasedDateTime: '2020-01-01',
      name: [{ family: 'X' }],
    };
    expect(errors(await run([profile], r, 'card')).sort()).toEqual(
      [
        'required Patient.identifier[0].system',
        'structure Patient.identifier',
        'value Patient.identifier[1].system',
        'value Patient.maritalStatus',
        'structure Patient.deceasedDateTime',
        'structure Patient.name',
      ].sort(),
    );
  });

  it('counts a primitive present only by its extension', async () => {
    const p = sd('prim', 'Patient', [el('Patient.birthDate', { min: 1, max: '1' })]);
    const r = {
      resourceType: 'Patient',
      _birthDate: { extension: [{ url: 'urn:x', valueCode: 'unknown' }] },
    };
    expect(errors(await run([p], r, 'prim'))).toEqual([]);
  });
});

describe('slicing', () => {
  const sliced = (discriminator: Json[], slices: Json[][], rules = 'open', ordered = false): Resource =>
    sd('s', 'Observation', [
      el('Observation.component', { slicing: { discriminator, rules, ordered } }),
      ...slices.flat(),
    ]);
  const comp = (code: string, value?: Json): Json => ({
    code: { coding: [{ system: 'urn:c', code }] },
    ...value,
  });

  it('value and pattern discriminators, per-slice cardinality, closed and ordered slicing', async () => {
    const p = sliced(
      [{ type: 'pattern', path: 'code' }],
      [
        [
          el('Observation.component:a', { sliceName: 'a', min: 1, max: '1' }),
          el('Observation.component:a.code', {
            patternCodeableConcept: { coding: [{ system: 'urn:c', code: 'A' }] },
          }),
        ],
        [
          el('Observation.component:b', { sliceName: 'b', min: 0, max: '1' }),
          el('Observation.component:b.code', { patternCodeableConcept: { coding: [{ code: 'B' }] } }),
        ],
      ],
      'closed',
      true,
    );
    const ok = { resourceType: 'Observation', component: [comp('A'), comp('B')] };
    expect(errors(await run([p], ok, 's'))).toEqual([]);
    const bad = { resourceType: 'Observation', component: [comp('B'), comp('Z')] };
    expect(errors(await run([p], bad, 's')).sort()).toEqual(
      ['required Observation.component', 'structure Observation.component[1]'].sort(),
    );
    const twice = { resourceType: 'Observation', component: [comp('A'), comp('A')] };
    expect(errors(await run([p], twice, 's'))).toEqual(['structure Observation.component']);
    const unordered = { resourceType: 'Observation', component: [comp('A'), comp('B')] };
    const p2 = sliced(
      [{ type: 'value', path: 'code.coding.code' }],
      [
        [
          el('Observation.component:b', { sliceName: 'b' }),
          el('Observation.component:b.code'),
          el('Observation.component:b.code.coding'),
          el('Observation.component:b.code.coding.code', { fixedCode: 'B' }),
        ],
        [
          el('Observation.component:a', { sliceName: 'a' }),
          el('Observation.component:a.code'),
          el('Observation.component:a.code.coding'),
          el('Observation.component:a.code.coding.code', { fixedCode: 'A' }),
        ],
      ],
      'open',
      true,
    );
    expect(errors(await run([p2], unordered, 's'))).toEqual(['structure Observation.component[1]']);
  });

  it('does not guess slices it cannot tell apart (resolve() discriminators): a warning, no error', async () => {
    const p = sliced(
      [{ type: 'type', path: 'valueReference.resolve()' }],
      [[el('Observation.component:r', { sliceName: 'r', min: 1 })]],
      'closed',
    );
    const issues = await run([p], { resourceType: 'Observation', component: [comp('A')] }, 's');
    expect(issues.map((i) => `${i.severity} ${i.code} ${i.expression?.[0] ?? ''}`)).toEqual([
      'warning not-supported Observation.component',
    ]);
  });

  it('openAtEnd: items of no slice come after the sliced ones', async () => {
    const p = sliced(
      [{ type: 'pattern', path: 'code' }],
      [
        [
          el('Observation.component:a', { sliceName: 'a' }),
          el('Observation.component:a.code', { patternCodeableConcept: { coding: [{ code: 'A' }] } }),
        ],
      ],
      'openAtEnd',
    );
    expect(
      errors(await run([p], { resourceType: 'Observation', component: [comp('A'), comp('Z')] }, 's')),
    ).toEqual([]);
    expect(
      errors(await run([p], { resourceType: 'Observation', component: [comp('Z'), comp('A')] }, 's')),
    ).toEqual(['structure Observation.component[1]']);
  });

  it('type discriminator on a choice', async () => {
    const p = sd('t', 'Observation', [
      el('Observation.value[x]', {
        max: '1',
        type: [{ code: 'Quantity' }, { code: 'string' }],
        slicing: { discriminator: [{ type: 'type', path: '$this' }], rules: 'closed' },
      }),
      el('Observation.value[x]:valueQuantity', {
        sliceName: 'valueQuantity',
        max: '1',
        type: [{ code: 'Quantity' }],
      }),
      el('Observation.value[x]:valueQuantity.system', { min: 1, max: '1' }),
    ]);
    expect(errors(await run([p], { resourceType: 'Observation', valueQuantity: { value: 1 } }, 't'))).toEqual(
      ['required Observation.valueQuantity.system'],
    );
    expect(errors(await run([p], { resourceType: 'Observation', valueString: 'x' }, 't'))).toEqual([
      'structure Observation.valueString',
    ]);
  });

  it('exists discriminator', async () => {
    const p = sliced(
      [{ type: 'exists', path: 'dataAbsentReason' }],
      [
        [
          el('Observation.component:absent', { sliceName: 'absent', min: 1 }),
          el('Observation.component:absent.dataAbsentReason', { min: 1 }),
        ],
        [
          el('Observation.component:present', { sliceName: 'present', min: 1 }),
          el('Observation.component:present.dataAbsentReason', { max: '0' }),
        ],
      ],
    );
    const r = {
      resourceType: 'Observation',
      component: [comp('A'), comp('B', { dataAbsentReason: { text: 'x' } })],
    };
    expect(errors(await run([p], r, 's'))).toEqual([]);
    expect(errors(await run([p], { resourceType: 'Observation', component: [comp('A')] }, 's'))).toEqual([
      'required Observation.component',
    ]);
  });

  it('profile discriminator', async () => {
    const big = sd('bigq', 'Quantity', [el('Quantity.value', { min: 1 }), el('Quantity.unit', { min: 1 })]);
    const p = sliced(
      [{ type: 'profile', path: 'valueQuantity' }],
      [
        [
          el('Observation.component:full', { sliceName: 'full', min: 1, max: '1' }),
          el('Observation.component:full.value[x]', { type: [{ code: 'Quantity', profile: [`${P}bigq`] }] }),
        ],
      ],
    );
    const full = comp('A', { valueQuantity: { value: 1, unit: 'mg' } });
    const partial = comp('B', { valueQuantity: { value: 1 } });
    expect(
      errors(await run([p, big], { resourceType: 'Observation', component: [partial, full] }, 's')),
    ).toEqual([]);
    expect(errors(await run([p, big], { resourceType: 'Observation', component: [partial] }, 's'))).toEqual([
      'required Observation.component',
    ]);
  });
});

describe('extensions', () => {
  const ext = sd('ext', 'Extension', [
    el('Extension.url', { min: 1, max: '1', fixedUri: `${P}ext` }),
    el('Extension.value[x]', { min: 1, max: '1', type: [{ code: 'code' }] }),
  ]);
  const profile = sd('withext', 'Patient', [
    el('Patient.extension', { slicing: { discriminator: [{ type: 'value', path: 'url' }], rules: 'open' } }),
    el('Patient.extension:e', {
      sliceName: 'e',
      min: 1,
      max: '1',
      type: [{ code: 'Extension', profile: [`${P}ext`] }],
    }),
  ]);

  it('checks a sliced extension against its definition, with the right value type', async () => {
    const ok = { resourceType: 'Patient', extension: [{ url: `${P}ext`, valueCode: 'a' }] };
    expect(errors(await run([profile, ext], ok, 'withext'))).toEqual([]);
    const bad = { resourceType: 'Patient', extension: [{ url: `${P}ext`, valueString: 'a' }] };
    expect(errors(await run([profile, ext], bad, 'withext'))).toEqual([
      'structure Patient.extension[0].valueString',
    ]);
    const missing = { resourceType: 'Patient', extension: [{ url: 'urn:other', valueString: 'a' }] };
    expect(errors(await run([profile, ext], missing, 'withext'))).toEqual(['required Patient.extension']);
  });

  it('checks an extension the profile does not slice by its url, wherever it is', async () => {
    const plain = sd('plain', 'Patient', []);
    const r = {
      resourceType: 'Patient',
      name: [{ family: 'X', _family: { extension: [{ url: `${P}ext` }] } }],
    };
    const issues = errors(await run([plain, ext], r, 'plain'));
    expect(issues).toContain('required Patient.name[0].family.extension[0].value');
  });
});

describe('invariants', () => {
  const profile = sd('inv', 'Patient', [], {
    constraint: [
      { key: 'i-1', severity: 'error', human: 'needs a name', expression: 'name.exists()' },
      { key: 'i-2', severity: 'warning', human: 'active', expression: 'active = true' },
      {
        key: 'i-3',
        severity: 'error',
        human: 'throws',
        expression: 'name.empty() or name.single().exists()',
      },
      { key: 'i-4', severity: 'error', human: 'root', expression: '%resource.id = %rootResource.id' },
    ],
  });

  it('maps severities, and reports an expression that throws without failing', async () => {
    const issues = await run([profile], { resourceType: 'Patient', active: false }, 'inv');
    expect(issues.map((i) => `${i.severity} ${i.code} ${i.details?.text?.split(':')[1] ?? ''}`)).toEqual([
      'error invariant  i-1',
      'warning invariant  i-2',
    ]);
    const two = await run(
      [profile],
      { resourceType: 'Patient', active: true, name: [{ text: 'a' }, { text: 'b' }] },
      'inv',
    );
    expect(two).toEqual([
      expect.objectContaining({ severity: 'warning', code: 'processing', expression: ['Patient'] }),
    ]);
  });

  it('ele-1 natively: an empty element', async () => {
    const p = sd('ele', 'Patient', [
      el('Patient.contact', {
        constraint: [
          {
            key: 'ele-1',
            severity: 'error',
            human: 'x',
            expression: 'hasValue() or (children().count() > id.count())',
          },
        ],
      }),
    ]);
    expect(errors(await run([p], { resourceType: 'Patient', contact: [{ id: 'a' }] }, 'ele'))).toEqual([
      'invariant Patient.contact[0]',
    ]);
  });
});
