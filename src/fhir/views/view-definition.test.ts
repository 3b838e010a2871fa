// The structural check of a ViewDefinition and the checks compileView makes before any resource: each failure is a
// 422 processing FhirError with its own code, naming the element (API.md §7).
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { compileView } from './compile.js';
import { readViewDefinition } from './view-definition.js';

const errorOf = (view: unknown): FhirError => {
  try {
    compileView(view);
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    return err as FhirError;
  }
  throw new Error('compileView did not throw');
};

const view = (select: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  resourceType: 'ViewDefinition',
  resource: 'Patient',
  select,
  ...extra,
});
const idColumn = { column: [{ name: 'id', path: 'id' }] };

describe('readViewDefinition', () => {
  it('reads a view and keeps what it needs, typed', () => {
    const v = readViewDefinition(
      view(
        [
          {
            forEach: 'name',
            column: [
              { name: 'family', path: 'family', type: 'string', tag: [{ name: 'ansi/type', value: 'TEXT' }] },
            ],
          },
        ],
        {
          name: 'patient_names',
          status: 'active',
          url: 'http://example.org/v',
          constant: [{ name: 'use', valueCode: 'official' }],
          where: [{ path: 'active', description: 'active only' }],
        },
      ),
    );
    expect(v.resource).toBe('Patient');
    expect(v.name).toBe('patient_names');
    expect(v.constant).toEqual([{ name: 'use', type: 'Code', value: 'official' }]);
    expect(v.select[0]?.column?.[0]?.tag).toEqual([{ name: 'ansi/type', value: 'TEXT' }]);
    expect(v.where).toEqual([{ path: 'active', description: 'active only' }]);
  });

  it.each([
    ['an empty object', {}, 'ViewDefinition.resource'],
    ['no resource', { select: [idColumn] }, 'ViewDefinition.resource'],
    ['an unknown resource type', { resource: 'Patientx', select: [idColumn] }, 'ViewDefinition.resource'],
    ['no select', { resource: 'Patient' }, 'ViewDefinition.select'],
    ['an empty select', { resource: 'Patient', select: [] }, 'ViewDefinition.select'],
    [
      'a forEach that is not a string',
      view([{ forEach: 1, ...idColumn }]),
      'ViewDefinition.select[0].forEach',
    ],
    [
      'a column without path',
      view([{ column: [{ name: 'id' }] }]),
      'ViewDefinition.select[0].column[0].path',
    ],
    [
      'a column name that is not sql-name',
      view([{ column: [{ name: '1x', path: 'id' }] }]),
      'ViewDefinition.select[0].column[0].name',
    ],
    [
      'collection that is not boolean',
      view([{ column: [{ name: 'id', path: 'id', collection: 'yes' }] }]),
      'ViewDefinition.select[0].column[0].collection',
    ],
    [
      'an unknown select element',
      view([{ forEeach: 'name', ...idColumn }]),
      'ViewDefinition.select[0].forEeach',
    ],
    [
      'forEach with forEachOrNull',
      view([{ forEach: 'name', forEachOrNull: 'name', ...idColumn }]),
      'ViewDefinition.select[0]',
    ],
    ['a select without columns', view([{ forEach: 'name' }]), 'ViewDefinition.select[0]'],
    [
      'a constant without value',
      view([idColumn], { constant: [{ name: 'c' }] }),
      'ViewDefinition.constant[0]',
    ],
    [
      'a constant with two values',
      view([idColumn], { constant: [{ name: 'c', valueString: 'a', valueCode: 'b' }] }),
      'ViewDefinition.constant[0]',
    ],
    [
      'a constant of a complex type',
      view([idColumn], { constant: [{ name: 'c', valueQuantity: { value: 1 } }] }),
      'ViewDefinition.constant[0].valueQuantity',
    ],
    [
      'a constant defined twice',
      view([idColumn], {
        constant: [
          { name: 'c', valueString: 'a' },
          { name: 'c', valueString: 'b' },
        ],
      }),
      'ViewDefinition.constant[1].name',
    ],
    [
      'a where without path',
      view([idColumn], { where: [{ description: 'x' }] }),
      'ViewDefinition.where[0].path',
    ],
    ['another resourceType', { ...view([idColumn]), resourceType: 'Patient' }, 'ViewDefinition.resourceType'],
  ])('refuses %s, naming the element', (_what, input, element) => {
    const err = errorOf(input);
    expect(err.status).toBe(422);
    expect(err.issueCode).toBe('processing');
    expect(err.code).toBe('views.invalid-structure');
    expect(err.issues[0]?.expression).toEqual([element]);
    expect(err.message).toContain(element);
  });
});

describe('compileView checks', () => {
  it.each([
    [
      'a FHIRPath that does not parse',
      view([{ forEach: '@@', ...idColumn }]),
      'views.fhirpath-syntax',
      'ViewDefinition.select[0].forEach',
    ],
    [
      'an unknown function',
      view([{ column: [{ name: 'x', path: 'name.where(nope())' }] }]),
      'views.unknown-function',
      'ViewDefinition.select[0].column[0].path',
    ],
    [
      'a known function with the wrong arity',
      view([{ column: [{ name: 'x', path: 'name.first(1, 2)' }] }]),
      'views.unknown-function',
      'ViewDefinition.select[0].column[0].path',
    ],
    [
      'an undefined constant, even where no data reaches it',
      view([{ forEach: 'name.where(use = %wrong)', ...idColumn }]),
      'views.unknown-variable',
      'ViewDefinition.select[0].forEach',
    ],
    [
      'a duplicate column name',
      view([idColumn, { forEach: 'name', column: [{ name: 'id', path: 'family' }] }]),
      'views.duplicate-column',
      'ViewDefinition.select[1].column[0]',
    ],
    [
      'unionAll branches with other names',
      view([
        { unionAll: [{ column: [{ name: 'a', path: 'id' }] }, { column: [{ name: 'b', path: 'id' }] }] },
      ]),
      'views.union-mismatch',
      'ViewDefinition.select[0].unionAll[1]',
    ],
    [
      'unionAll branches in another order',
      view([
        {
          unionAll: [
            {
              column: [
                { name: 'a', path: 'id' },
                { name: 'b', path: 'id' },
              ],
            },
            {
              column: [
                { name: 'b', path: 'id' },
                { name: 'a', path: 'id' },
              ],
            },
          ],
        },
      ]),
      'views.union-mismatch',
      'ViewDefinition.select[0].unionAll[1]',
    ],
    [
      'unionAll branches with other types',
      view([
        {
          unionAll: [
            { column: [{ name: 'a', path: 'id', type: 'id' }] },
            { column: [{ name: 'a', path: 'active', type: 'boolean' }] },
          ],
        },
      ]),
      'views.union-mismatch',
      'ViewDefinition.select[0].unionAll[1]',
    ],
    [
      'a date constant that is not a date',
      view([idColumn], { constant: [{ name: 'd', valueDate: "2020') or true or ('" }] }),
      'views.invalid-constant',
      'ViewDefinition.constant.valueDate',
    ],
    [
      'an integer constant that is a string',
      view([idColumn], { constant: [{ name: 'n', valueInteger: '1' }] }),
      'views.invalid-constant',
      'ViewDefinition.constant.valueInteger',
    ],
  ])('refuses %s', (_what, input, code, element) => {
    const err = errorOf(input);
    expect(err.status).toBe(422);
    expect(err.issueCode).toBe('processing');
    expect(err.code).toBe(code);
    expect(err.issues[0]?.expression).toEqual([element]);
  });

  it('accepts a view without status (an inline viewResource) and lists its columns', () => {
    const v = compileView(
      view([
        {
          column: [
            { name: 'id', path: 'id', type: 'id', description: 'the id' },
            { name: 'given', path: 'name.given', collection: true },
          ],
        },
      ]),
    );
    expect(v.resource).toBe('Patient');
    expect(v.columns).toEqual([
      { name: 'id', type: 'id', collection: false, description: 'the id' },
      { name: 'given', collection: true },
    ]);
  });
});
