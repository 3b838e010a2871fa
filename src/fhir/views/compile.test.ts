// compileView's processing algorithm: select, column, forEach, forEachOrNull, repeat, unionAll, nested select, where,
// %rowIndex, collection and column order (https://sql-on-fhir.org/ig/StructureDefinition-ViewDefinition.html).
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { compileView, type Row } from './compile.js';

const patient = {
  resourceType: 'Patient',
  id: 'p1',
  active: true,
  name: [
    { use: 'official', family: 'Lee', given: ['Ann', 'Marie'] },
    { family: 'Second', given: ['Nan'] },
  ],
  contact: [
    { name: { family: 'C1' }, telecom: [{ value: 't1' }, { value: 't2' }] },
    { name: { family: 'C2' } },
  ],
};
const bare = { resourceType: 'Patient', id: 'p2' };

const rows = (
  select: unknown[],
  resources: unknown[] = [patient, bare],
  extra: Record<string, unknown> = {},
): Row[] => {
  const v = compileView({ resource: 'Patient', select, ...extra });
  return resources.flatMap((r) => v.rows(r));
};

describe('compileView rows', () => {
  it('one row per resource of the view type; columns in order; empty cells null', () => {
    const v = compileView({
      resource: 'Patient',
      select: [
        {
          column: [
            { name: 'id', path: 'id' },
            { name: 'birth', path: 'birthDate' },
          ],
        },
      ],
    });
    expect(v.rows(patient)).toEqual([{ id: 'p1', birth: null }]);
    expect(v.rows({ resourceType: 'Observation', id: 'o1' })).toEqual([]);
    expect(v.rows(null)).toEqual([]);
  });

  it('forEach: a row per item, none when empty; forEachOrNull: a row of nulls when empty', () => {
    const forEach = [
      { column: [{ name: 'id', path: 'id' }] },
      { forEach: 'name', column: [{ name: 'family', path: 'family' }] },
    ];
    expect(rows(forEach)).toEqual([
      { id: 'p1', family: 'Lee' },
      { id: 'p1', family: 'Second' },
    ]);
    const orNull = [
      { column: [{ name: 'id', path: 'id' }] },
      { forEachOrNull: 'name', column: [{ name: 'family', path: 'family' }] },
    ];
    expect(rows(orNull)).toContainEqual({ id: 'p2', family: null });
  });

  it('sibling selects are cross joined; nested selects repeat their parent', () => {
    const r = rows(
      [
        { forEach: 'name', column: [{ name: 'family', path: 'family' }] },
        {
          forEach: 'contact',
          column: [{ name: 'contact', path: 'name.family' }],
          select: [{ forEach: 'telecom', column: [{ name: 'tel', path: 'value' }] }],
        },
      ],
      [patient],
    );
    expect(r).toEqual([
      { family: 'Lee', contact: 'C1', tel: 't1' },
      { family: 'Lee', contact: 'C1', tel: 't2' },
      { family: 'Second', contact: 'C1', tel: 't1' },
      { family: 'Second', contact: 'C1', tel: 't2' },
    ]);
  });

  it('unionAll concatenates its branches, after the columns of its select', () => {
    const v = compileView({
      resource: 'Patient',
      select: [
        {
          unionAll: [
            {
              forEach: 'name',
              column: [
                { name: 'family', path: 'family' },
                { name: 'source', path: "'name'" },
              ],
            },
            {
              forEach: 'contact',
              column: [
                { name: 'family', path: 'name.family' },
                { name: 'source', path: "'contact'" },
              ],
            },
          ],
          column: [{ name: 'id', path: 'id' }],
        },
      ],
    });
    expect(v.columns.map((c) => c.name)).toEqual(['id', 'family', 'source']);
    expect(v.rows(patient).map((r) => Object.keys(r))).toEqual(Array(4).fill(['id', 'family', 'source']));
    expect(v.rows(patient).map((r) => `${r.family as string}/${r.source as string}`)).toEqual([
      'Lee/name',
      'Second/name',
      'C1/contact',
      'C2/contact',
    ]);
  });

  it('repeat walks the paths depth first, at any depth', () => {
    const qr = {
      resourceType: 'QuestionnaireResponse',
      id: 'q1',
      item: [
        { linkId: '1', item: [{ linkId: '1.1' }] },
        { linkId: '2', answer: [{ item: [{ linkId: '2.1', item: [{ linkId: '2.1.1' }] }] }] },
      ],
    };
    const v = compileView({
      resource: 'QuestionnaireResponse',
      select: [
        {
          repeat: ['item', 'answer.item'],
          column: [
            { name: 'link', path: 'linkId' },
            { name: 'i', path: '%rowIndex' },
          ],
        },
      ],
    });
    expect(v.rows(qr)).toEqual([
      { link: '1', i: 0 },
      { link: '1.1', i: 1 },
      { link: '2', i: 2 },
      { link: '2.1', i: 3 },
      { link: '2.1.1', i: 4 },
    ]);
  });

  it('repeat ends on a path back to the same node, and refuses one that never ends', () => {
    const qr = { resourceType: 'QuestionnaireResponse', id: 'q1', item: [{ linkId: '1' }] };
    const run = (repeat: string[]): Row[] =>
      compileView({
        resource: 'QuestionnaireResponse',
        select: [{ repeat, column: [{ name: 'link', path: 'linkId' }] }],
      }).rows(qr);
    expect(run(['item', '$this'])).toEqual([{ link: '1' }]);
    expect(() => run(["'x'"])).toThrow(
      expect.objectContaining({ code: 'views.repeat-too-deep' }) as unknown as Error,
    );
  });

  it('%rowIndex: 0 at the top, the index inside an iteration, inherited by selects without one, 0 in a null row', () => {
    const r = rows([
      { column: [{ name: 'top', path: '%rowIndex' }] },
      {
        forEachOrNull: 'contact',
        column: [{ name: 'c', path: '%rowIndex' }],
        select: [
          {
            unionAll: [
              { forEach: 'telecom', column: [{ name: 't', path: '%rowIndex' }] },
              { column: [{ name: 't', path: '%rowIndex' }] },
            ],
          },
        ],
      },
    ]);
    expect(r).toEqual([
      { top: 0, c: 0, t: 0 },
      { top: 0, c: 0, t: 1 },
      { top: 0, c: 0, t: 0 },
      { top: 0, c: 1, t: 1 },
      { top: 0, c: 0, t: 0 },
    ]);
  });

  it('where: only resources whose paths are all true; empty is false; a non-boolean is an error', () => {
    const select = [{ column: [{ name: 'id', path: 'id' }] }];
    expect(rows(select, [patient, bare], { where: [{ path: 'active' }] })).toEqual([{ id: 'p1' }]);
    expect(rows(select, [patient, bare], { where: [{ path: 'active' }, { path: "id = 'p2'" }] })).toEqual([]);
    expect(rows(select, [patient, bare], { where: [{ path: 'name.empty()' }] })).toEqual([{ id: 'p2' }]);
    expect(() => rows(select, [patient], { where: [{ path: 'name.family' }] })).toThrow(
      expect.objectContaining({ code: 'views.where-not-boolean', status: 422 }) as unknown as Error,
    );
  });

  it('collection: true gives arrays (empty: []); several values without it is an error naming the column', () => {
    const r = rows([{ column: [{ name: 'given', path: 'name.given', collection: true }] }]);
    expect(r).toEqual([{ given: ['Ann', 'Marie', 'Nan'] }, { given: [] }]);
    let err: FhirError | undefined;
    try {
      rows([{ column: [{ name: 'family', path: 'name.family' }] }]);
    } catch (e) {
      err = e as FhirError;
    }
    expect(err).toBeInstanceOf(FhirError);
    expect(err?.code).toBe('views.multiple-values');
    expect(err?.status).toBe(422);
    expect(err?.message).toContain('family');
    expect(err?.issues[0]?.expression).toEqual(['ViewDefinition.select[0].column[0]']);
  });

  it('values keep their JSON types: numbers, booleans, objects', () => {
    const obs = {
      resourceType: 'Observation',
      id: 'o1',
      valueRange: { low: { value: 2 }, high: { value: 3.5 } },
      status: 'final',
    };
    const v = compileView({
      resource: 'Observation',
      select: [
        {
          column: [
            {
              name: 'sum',
              path: 'value.ofType(Range).low.value + value.ofType(Range).high.value',
              type: 'decimal',
            },
            { name: 'gt', path: 'value.ofType(Range).high.value > 3', type: 'boolean' },
            { name: 'count', path: 'status.count()', type: 'integer' },
            { name: 'low', path: 'value.ofType(Range).low', type: 'Quantity' },
          ],
        },
      ],
    });
    expect(v.rows(obs)).toEqual([{ sum: 5.5, gt: true, count: 1, low: { value: 2 } }]);
  });

  it('a FHIRPath that fails on a resource is a 422 naming the element', () => {
    expect(() =>
      rows([{ column: [{ name: 'x', path: "name.given.substring(0, 'a')" }] }], [patient]),
    ).toThrow(FhirError);
  });
});
