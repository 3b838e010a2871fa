// parse.ts and sql.ts are pure: query parameters → SearchRequest → SQL text with bind values.
import { describe, expect, it } from 'vitest';
import { FhirError } from '../outcome.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { parseSearchRequest } from './parse.js';
import { countSql, escapeLike, includeSql, revincludeSql, searchSql } from './sql.js';

describe('parseSearchRequest', () => {
  it('repeated parameters AND, commas OR, backslash escapes', () => {
    const req = parseSearchRequest('Patient', { family: ['a,b', 'c\\,d'], _format: 'json' });
    expect(req.filters).toEqual([
      {
        code: 'family',
        type: 'string',
        values: [
          { kind: 'string', value: 'a' },
          { kind: 'string', value: 'b' },
        ],
      },
      { code: 'family', type: 'string', values: [{ kind: 'string', value: 'c,d' }] },
    ]);
  });

  it('token forms', () => {
    const values = parseSearchRequest('Patient', { identifier: 'sys|v,|nosys,sys|,code,a\\|b|c' }).filters[0]
      ?.values;
    expect(values).toEqual([
      { kind: 'token', system: 'sys', code: 'v' },
      { kind: 'token', system: '', code: 'nosys' },
      { kind: 'token', system: 'sys' },
      { kind: 'token', code: 'code' },
      { kind: 'token', system: 'a|b', code: 'c' },
    ]);
    expect(parseSearchRequest('Observation', { 'code:text': 'weight' }).filters[0]).toMatchObject({
      modifier: 'text',
      values: [{ kind: 'text', value: 'weight' }],
    });
  });

  it('reference forms', () => {
    const v = (q: Record<string, string>, type = 'Observation') =>
      parseSearchRequest(type, q).filters[0]?.values;
    expect(v({ subject: 'Patient/1' })).toEqual([{ kind: 'reference', refs: ['Patient/1'] }]);
    expect(v({ patient: '1' })).toEqual([{ kind: 'reference', refs: ['Patient/1'] }]);
    expect(v({ 'subject:Device': '1' })).toEqual([{ kind: 'reference', refs: ['Device/1'] }]);
    expect(v({ subject: 'https://x.org/fhir/Patient/1/_history/2' })).toEqual([
      { kind: 'reference', refs: ['Patient/1'] },
    ]);
    expect(v({ subject: 'urn:uuid:0a' })).toEqual([{ kind: 'reference', refs: ['urn:uuid:0a'] }]);
    expect(v({ 'subject:Device': 'Patient/1' })).toEqual([{ kind: 'reference', refs: [] }]);
    expect(v({ user: 'u1' }, 'ProjectMembership')).toEqual([
      { kind: 'reference', refs: ['Bot/u1', 'ClientApplication/u1', 'User/u1'] },
    ]);
  });

  it('prefixes on dates, numbers and quantities', () => {
    const d = parseSearchRequest('Patient', { birthdate: 'ge2020-01' }).filters[0]?.values[0];
    expect(d).toEqual({
      kind: 'date',
      prefix: 'ge',
      low: '2020-01-01T00:00:00.000Z',
      high: '2020-02-01T00:00:00.000Z',
    });
    const q = parseSearchRequest('Observation', { 'value-quantity': 'lt5.4|http://unitsofmeasure.org|mg' })
      .filters[0]?.values[0];
    expect(q).toMatchObject({
      kind: 'number',
      prefix: 'lt',
      value: '5.4',
      system: 'http://unitsofmeasure.org',
      unit: 'mg',
    });
    const n = parseSearchRequest('RiskAssessment', { probability: '0.8' }).filters[0]?.values[0];
    expect(n).toMatchObject({ prefix: 'eq', low: '0.75', high: '0.85' });
  });

  it('result parameters', () => {
    const req = parseSearchRequest('Observation', {
      _count: '50',
      _sort: '-date,code,_id',
      _total: 'accurate',
      _summary: 'data',
      _elements: 'status,Observation.code',
      _include: ['Observation:subject:Patient', 'Observation:performer'],
      _revinclude: 'Provenance:target',
    });
    expect(req).toMatchObject({
      count: 50,
      total: 'accurate',
      summary: 'data',
      elements: ['status', 'code'],
      sort: [
        { code: 'date', type: 'date', descending: true },
        { code: 'code', type: 'token', descending: false },
        { code: '_id', type: 'token', descending: false },
      ],
      include: [
        { sourceType: 'Observation', code: 'subject', targetType: 'Patient' },
        { sourceType: 'Observation', code: 'performer' },
      ],
      revinclude: [{ sourceType: 'Provenance', code: 'target' }],
    });
  });

  it('chains to the one target type that has the parameter', () => {
    const f = parseSearchRequest('Observation', { 'patient.birthdate': 'lt2000' }).filters[0];
    expect(f).toMatchObject({
      code: 'patient',
      chain: { targetType: 'Patient', filter: { code: 'birthdate' } },
    });
    const e = parseSearchRequest('Encounter', { 'subject:Group.code': 'x' }).filters[0];
    expect(e?.chain?.targetType).toBe('Group');
  });

  it('ignores empty values and callers’ own parameters', () => {
    expect(parseSearchRequest('Patient', { family: '', name: undefined }).filters).toEqual([]);
    expect(parseSearchRequest('Patient', { _fields: 'name' }, { ignore: ['_fields'] }).filters).toEqual([]);
    expect(() => parseSearchRequest('Patient', { _fields: 'name' })).toThrow(FhirError);
  });

  it('cursors round-trip and are checked against the sort', () => {
    const c = encodeCursor({ rid: 42, keys: ['2020-01-01 00:00:00+00', null] });
    expect(decodeCursor(c, 2)).toEqual({ rid: 42, keys: ['2020-01-01 00:00:00+00', null] });
    expect(() => decodeCursor(c, 1)).toThrow(FhirError);
    expect(parseSearchRequest('Patient', { _sort: 'family,_id', _cursor: c }).cursor?.rid).toBe(42);
  });
});

describe('sql', () => {
  const nasty = ["'; DROP TABLE resources; --", '%_\\', '$999 x', 'a" OR "1"="1'];

  it('never puts request values into the SQL text', () => {
    for (const v of nasty) {
      const req = parseSearchRequest('Patient', {
        family: v,
        'name:contains': v,
        'given:exact': v,
        identifier: `${v}|${v}`,
        'identifier:text': v,
        _id: v,
        organization: `Organization/${v}`,
        'general-practitioner': `urn:x:${v}`,
        _include: 'Patient:organization',
      });
      const queries = [
        searchSql(req, { projectId: v }),
        countSql(req, { projectId: v }),
        includeSql({ sourceType: 'Patient', code: 'organization' }, [1], { projectId: v }),
        revincludeSql({ sourceType: 'Observation', code: 'subject' }, [`Patient/${v}`], { projectId: v }),
      ];
      for (const q of queries) {
        expect(q.text).not.toContain(v);
        expect(q.text).not.toContain("'");
        expect(q.text.match(/\$\d+/g)?.length).toBeGreaterThan(0);
      }
    }
  });

  it('escapes LIKE metacharacters', () => {
    expect(escapeLike('50%_a\\b')).toBe('50\\%\\_a\\\\b');
    const q = searchSql(parseSearchRequest('Patient', { family: '10%', 'name:contains': 'a_b' }), {
      projectId: null,
    });
    // A prefix match is a byte range, where % is an ordinary character; :contains uses LIKE with escaping.
    expect(q.values).toContain('10%');
    expect(q.text).not.toMatch(/value_norm LIKE \$\d+ AND/);
    expect(q.values).toContain('%a\\_b%');
  });

  it('scopes to the project when the scope has one', () => {
    const req = parseSearchRequest('Patient', {});
    expect(searchSql(req, { projectId: 'p1' }).text).toContain('r.project_id = $2');
    expect(searchSql(req, { projectId: null }).text).not.toContain('project_id');
  });
});
