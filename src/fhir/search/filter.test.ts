import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { paramSet, readSearchParameter, rekey } from './custom-params.js';
import { FILTER_LIMITS, leaves, parseFilterSyntax } from './filter.js';
import { parseSearchRequest } from './parse.js';
import type { FilterExpr, SearchFilter } from './request.js';
import { searchSql } from './sql.js';

/** The FhirError code a function throws. */
function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof FhirError) return err.code;
    throw err;
  }
  return undefined;
}

const expr = (type: string, text: string): FilterExpr => {
  const req = parseSearchRequest(type, { _filter: text }, { filter: true });
  expect(req.filters).toHaveLength(1);
  return (req.filters[0] as SearchFilter).expr as FilterExpr;
};
const leaf = (e: FilterExpr): SearchFilter => {
  if (e.op !== 'leaf') throw new Error(`not a leaf: ${e.op}`);
  return e.filter;
};

describe('_filter syntax', () => {
  it('gives and precedence over or, and groups with parentheses and not', () => {
    expect(parseFilterSyntax('a eq 1 or b eq 2 and c eq 3')).toEqual({
      kind: 'or',
      args: [
        { kind: 'compare', path: 'a', op: 'eq', value: '1' },
        {
          kind: 'and',
          args: [
            { kind: 'compare', path: 'b', op: 'eq', value: '2' },
            { kind: 'compare', path: 'c', op: 'eq', value: '3' },
          ],
        },
      ],
    });
    expect(parseFilterSyntax('not (a eq 1 or b eq 2) and (c eq 3)')).toEqual({
      kind: 'and',
      args: [
        {
          kind: 'not',
          arg: {
            kind: 'or',
            args: [
              { kind: 'compare', path: 'a', op: 'eq', value: '1' },
              { kind: 'compare', path: 'b', op: 'eq', value: '2' },
            ],
          },
        },
        { kind: 'compare', path: 'c', op: 'eq', value: '3' },
      ],
    });
  });

  it('reads JSON strings with escapes, tokens with bars and colons, chained paths', () => {
    expect(parseFilterSyntax('name eq "a \\"b\\" \\\\ c\\u00e9 (x)"')).toEqual({
      kind: 'compare',
      path: 'name',
      op: 'eq',
      value: 'a "b" \\ cé (x)',
    });
    expect(parseFilterSyntax('code eq http://loinc.org|1234-5')).toMatchObject({
      value: 'http://loinc.org|1234-5',
    });
    expect(parseFilterSyntax('subject:Patient.name co pet')).toMatchObject({ path: 'subject:Patient.name' });
    expect(parseFilterSyntax('date GE 2020-01-01T10:00:00+01:00')).toMatchObject({
      op: 'ge',
      value: '2020-01-01T10:00:00+01:00',
    });
  });

  it('refuses malformed filters with a 400 naming the problem', () => {
    expect(codeOf(() => parseFilterSyntax('name eq "unterminated'))).toBe('search.filter-string');
    expect(codeOf(() => parseFilterSyntax('name eq "bad \\q escape"'))).toBe('search.filter-string');
    expect(codeOf(() => parseFilterSyntax(''))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax('name xx 1'))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax('name eq'))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax('name eq 1 extra'))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax('(name eq 1'))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax('name eq 1)'))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax("'; drop table x eq 1"))).toBe('search.filter-syntax');
    expect(codeOf(() => parseFilterSyntax('related[type eq x].target pr true'))).toBe(
      'search.filter-unsupported',
    );
  });

  it('bounds nesting and length before doing the work', () => {
    const ok = `${'('.repeat(FILTER_LIMITS.depth)}a eq 1${')'.repeat(FILTER_LIMITS.depth)}`;
    expect(parseFilterSyntax(ok)).toMatchObject({ kind: 'compare' });
    const deep = `${'('.repeat(FILTER_LIMITS.depth + 1)}a eq 1${')'.repeat(FILTER_LIMITS.depth + 1)}`;
    expect(codeOf(() => parseFilterSyntax(deep))).toBe('search.filter-too-deep');
    const notNot = `${'not ('.repeat(FILTER_LIMITS.depth + 1)}a eq 1${')'.repeat(FILTER_LIMITS.depth + 1)}`;
    expect(codeOf(() => parseFilterSyntax(notNot))).toBe('search.filter-too-deep');
    const started = Date.now();
    expect(codeOf(() => parseFilterSyntax('('.repeat(10_000)))).toBe('search.filter-too-long');
    expect(codeOf(() => parseFilterSyntax('('.repeat(3_000)))).toBe('search.filter-too-deep');
    expect(codeOf(() => parseFilterSyntax('a'.repeat(100_000)))).toBe('search.filter-too-long');
    expect(Date.now() - started).toBeLessThan(1000);
  });
});

describe('_filter as search filters', () => {
  it('maps string operators onto the string matches', () => {
    expect(leaf(expr('Patient', 'name co "pet"'))).toMatchObject({ code: 'name', modifier: 'contains' });
    expect(leaf(expr('Patient', 'name sw pet')).values).toEqual([{ kind: 'string', value: 'pet' }]);
    expect(leaf(expr('Patient', 'name eq "Pét,er|x"')).values).toEqual([
      { kind: 'string', value: 'Pét,er|x', match: 'eq' },
    ]);
    expect(leaf(expr('Patient', 'name ew "er"')).values).toEqual([
      { kind: 'string', value: 'er', match: 'ew' },
    ]);
    const ne = expr('Patient', 'family ne "smith"');
    expect(ne.op).toBe('not');
  });

  it('maps tokens, dates, quantities, references, presence and chains', () => {
    expect(leaf(expr('Observation', 'code eq http://loinc.org|1234-5')).values).toEqual([
      { kind: 'token', system: 'http://loinc.org', code: '1234-5' },
    ]);
    expect(leaf(expr('Patient', 'birthdate ge 2014-10-10')).values[0]).toMatchObject({
      kind: 'date',
      prefix: 'ge',
    });
    expect(
      leaf(expr('Observation', 'value-quantity lt 5.4|http://unitsofmeasure.org|mg')).values[0],
    ).toMatchObject({
      kind: 'number',
      prefix: 'lt',
      value: '5.4',
      system: 'http://unitsofmeasure.org',
      unit: 'mg',
    });
    expect(leaf(expr('Observation', 'subject eq Patient/123')).values).toEqual([
      { kind: 'reference', refs: ['Patient/123'] },
    ]);
    expect(leaf(expr('Patient', 'birthdate pr true'))).toMatchObject({ code: 'birthdate', missing: false });
    expect(leaf(expr('Patient', '_id eq abc'))).toMatchObject({ column: 'id' });
    const words = expr('Patient', '_content eq "alpha beta" or _text ne gamma');
    expect(words.op === 'or' && words.args.map((x) => x.op)).toEqual(['leaf', 'not']);
    expect(codeOf(() => expr('Patient', '_content co alpha'))).toBe('search.filter-operator');
    const chain = leaf(expr('Observation', 'patient.name co "pet"'));
    expect(chain.chain?.targetType).toBe('Patient');
    expect(chain.chain?.filter).toMatchObject({ code: 'name', modifier: 'contains' });
  });

  it('refuses unknown parameters, unsupported and misapplied operators', () => {
    const parse = (type: string, text: string) => () =>
      parseSearchRequest(type, { _filter: text }, { filter: true });
    expect(codeOf(parse('Patient', 'nope eq 1'))).toBe('search.unknown-param');
    expect(() => parse('Patient', 'nope eq 1')()).toThrow(/'nope'/);
    expect(codeOf(parse('Patient', 'name in http://x/vs'))).toBe('search.filter-unsupported');
    expect(codeOf(parse('Patient', 'name re Patient/1'))).toBe('search.filter-unsupported');
    expect(codeOf(parse('Patient', 'name gt "x"'))).toBe('search.filter-operator');
    expect(codeOf(parse('Patient', 'gender co m'))).toBe('search.filter-operator');
    expect(codeOf(parse('Patient', 'birthdate co 2020'))).toBe('search.filter-operator');
    expect(codeOf(parse('Patient', 'birthdate eq yesterday'))).toBe('search.bad-date');
    expect(codeOf(parse('Patient', 'birthdate pr maybe'))).toBe('search.filter-value');
    expect(codeOf(parse('Observation', 'code.name eq x'))).toBe('search.bad-chain');
    // Each comparison counts as a parameter against the search's limits.
    const many = Array.from({ length: 13 }, (_, i) => `family eq "f${i}"`).join(' or ');
    expect(codeOf(parse('Patient', many))).toBe('search.too-costly');
    // Searches that do not take _filter (conditional writes, Subscription criteria) treat it as unknown.
    expect(codeOf(() => parseSearchRequest('Patient', { _filter: 'name eq x' }))).toBe(
      'search.unknown-param',
    );
  });

  it("takes a project's custom parameters, rekeyed to their index keys", () => {
    const set = paramSet(
      readSearchParameter({
        resourceType: 'SearchParameter',
        status: 'active',
        code: 'nickname',
        base: ['Patient'],
        type: 'string',
        expression: "Patient.name.where(use='nickname').given",
      }),
    );
    const key = set.get('Patient', 'nickname')?.key as string;
    const req = parseSearchRequest(
      'Patient',
      { _filter: 'nickname eq "bob" or not (family co x)' },
      { filter: true, params: set.get },
    );
    const out = rekey(req, set);
    const codes = leaves(out.filters[0]?.expr as FilterExpr).map((f) => f.code);
    expect(codes).toEqual([key, 'family']);
    expect(() => parseSearchRequest('Patient', { _filter: 'nickname eq "bob"' }, { filter: true })).toThrow(
      /'nickname'/,
    );
  });

  it('becomes SQL with and, or, not around the ordinary conditions, every value bound', () => {
    const req = parseSearchRequest(
      'Patient',
      { _filter: `(name co "x'; drop table resources; --" or family eq smith) and not (gender eq male)` },
      { filter: true },
    );
    const q = searchSql(req, { projectId: 'p1' });
    expect(q.text).toContain(' OR ');
    expect(q.text).toContain('NOT (');
    expect(q.text).not.toContain('drop table');
    expect(q.values).toContain("%x'; drop table resources; --%");
    // Under `or` and `not`, leaves probe the row's own index rows; AND'ed at the top they stay semi-joins.
    expect(q.text).toContain('OR EXISTS (SELECT 1 FROM sp_string');
    expect(q.text).toContain('NOT (EXISTS (SELECT 1 FROM sp_token');
    const and = searchSql(
      parseSearchRequest('Patient', { _filter: 'name co "x" and gender eq male' }, { filter: true }),
      { projectId: 'p1' },
    );
    expect(and.text).not.toContain('EXISTS');
    expect(and.text.match(/r\.rid IN \(SELECT/g)).toHaveLength(2);
  });
});
