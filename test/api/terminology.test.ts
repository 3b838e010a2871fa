// Terminology operations through HTTP (API.md §9, issue 27 point 3): ValueSet $expand and $validate-code, CodeSystem
// $lookup, $validate-code and $subsumes, ConceptMap $translate — GET and POST, type and instance level — over
// resources stored in a project; bad input answers 400, unknown targets 404, too many codes 422; another project never
// sees them, a narrowly scoped token may not use them, and hostile input answers 4xx without harming the server.
import { beforeAll, describe, expect, it } from 'vitest';
import { created, startTestApp, scopedClientToken, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { afterAll } from 'vitest';

type Json = Record<string, unknown>;
type Param = { name: string; part?: Param[]; [k: string]: unknown };

const CS = 'http://example.org/cs/animals';
const VS = 'http://example.org/vs/mammals';
const CM = 'http://example.org/cm/animals-to-kinds';

const codeSystem = {
  resourceType: 'CodeSystem',
  url: CS,
  version: '1.0',
  name: 'Animals',
  status: 'active',
  content: 'complete',
  concept: [
    {
      code: 'animal',
      display: 'Animal',
      concept: [
        {
          code: 'mammal',
          display: 'Mammal',
          designation: [{ language: 'fr', value: 'Mammifère' }],
          concept: [
            { code: 'dog', display: 'Dog', property: [{ code: 'legs', valueInteger: 4 }] },
            { code: 'cat', display: 'Cat' },
          ],
        },
        { code: 'fish', display: 'Fish' },
      ],
    },
  ],
};
const mammals = {
  resourceType: 'ValueSet',
  url: VS,
  status: 'active',
  compose: { include: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }] },
};
const conceptMap = {
  resourceType: 'ConceptMap',
  url: CM,
  status: 'active',
  sourceUri: VS,
  targetUri: 'http://example.org/vs/kinds',
  group: [
    {
      source: CS,
      target: 'http://example.org/cs/kinds',
      element: [
        { code: 'dog', target: [{ code: 'pet', display: 'Pet', equivalence: 'wider' }] },
        { code: 'fish', target: [{ code: 'food', equivalence: 'disjoint' }] },
      ],
    },
  ],
};

const param = (body: Json, name: string): Param | undefined =>
  (body.parameter as Param[]).find((p) => p.name === name);
const pbody = (...parameter: Json[]): Json => ({ resourceType: 'Parameters', parameter });

describe.each(testDatabases())('terminology operations on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let member: string;
  let other: { adminToken: string; memberToken: string };
  let narrow: string;
  const ids: Record<string, string> = {};

  const call = (method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, payload?: unknown, token = admin) =>
    t.request({
      method,
      url: `${t.fhir}/${path}`,
      token,
      ...(payload !== undefined ? { payload: payload as Json } : {}),
    });
  const ok = async (
    method: 'GET' | 'POST',
    path: string,
    payload?: unknown,
    token = admin,
  ): Promise<Json> => {
    const res = await call(method, path, payload, token);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Json;
  };
  const fails = async (
    status: number,
    method: 'GET' | 'POST',
    path: string,
    payload?: unknown,
    token = admin,
  ) => {
    const res = await call(method, path, payload, token);
    expect(res.statusCode, res.body).toBe(status);
    const oo = res.json() as { resourceType: string; issue: { code: string }[] };
    expect(oo.resourceType).toBe('OperationOutcome');
    return oo.issue[0]?.code;
  };
  const codes = (vs: Json): string[] =>
    (((vs.expansion as Json).contains as { code: string }[] | undefined) ?? []).map((c) => c.code).sort();

  beforeAll(async () => {
    t = await startTestApp(database);
    const p = await t.newProject('Terminology');
    admin = p.adminToken;
    member = p.memberToken;
    other = await t.newProject('Terminology other');
    for (const [k, r] of Object.entries({ codeSystem, mammals, conceptMap }))
      ids[k] = (await created(t, admin, r)).id as string;
    // A client whose token may only read and search Patients.
    narrow = await scopedClientToken(t, admin, p.projectId, 'system/Patient.rs');
  });
  afterAll(async () => t?.close());

  describe('ValueSet/$expand', () => {
    it('expands by url (GET and POST), by id, and inline', async () => {
      const get = await ok('GET', `ValueSet/$expand?url=${encodeURIComponent(VS)}`);
      expect(get).toMatchObject({ resourceType: 'ValueSet', url: VS });
      const e = get.expansion as Json;
      expect(e).toMatchObject({ total: 3, offset: 0 });
      expect(e.identifier).toMatch(/^urn:uuid:/);
      expect(typeof e.timestamp).toBe('string');
      expect(codes(get)).toEqual(['cat', 'dog', 'mammal']);
      expect((e.contains as Json[]).find((c) => c.code === 'dog')).toEqual({
        system: CS,
        version: '1.0',
        code: 'dog',
        display: 'Dog',
      });
      expect(codes(await ok('POST', 'ValueSet/$expand', pbody({ name: 'url', valueUri: VS })))).toEqual([
        'cat',
        'dog',
        'mammal',
      ]);
      expect(codes(await ok('GET', `ValueSet/${ids.mammals}/$expand`))).toEqual(['cat', 'dog', 'mammal']);
      expect(codes(await ok('POST', `ValueSet/${ids.mammals}/$expand`, pbody()))).toEqual([
        'cat',
        'dog',
        'mammal',
      ]);
      const inline = {
        resourceType: 'ValueSet',
        compose: {
          include: [{ system: CS }],
          exclude: [{ system: CS, filter: [{ property: 'concept', op: 'is-a', value: 'mammal' }] }],
        },
      };
      expect(
        codes(await ok('POST', 'ValueSet/$expand', pbody({ name: 'valueSet', resource: inline }))),
      ).toEqual(['animal', 'fish']);
      // A member of the project may use them too.
      expect(
        codes(await ok('GET', `ValueSet/$expand?url=${encodeURIComponent(VS)}`, undefined, member)),
      ).toHaveLength(3);
    });

    it('filters on code and display, and pages with count and offset', async () => {
      const url = `ValueSet/$expand?url=${encodeURIComponent(VS)}`;
      const f = await ok('GET', `${url}&filter=DO`);
      expect(codes(f)).toEqual(['dog']);
      expect((f.expansion as Json).total).toBe(1);
      expect((f.expansion as Json).parameter).toContainEqual({ name: 'filter', valueString: 'DO' });
      const pages = [];
      for (let offset = 0; offset < 3; offset += 2) {
        const page = await ok('GET', `${url}&count=2&offset=${offset}`);
        expect((page.expansion as Json).total).toBe(3);
        expect((page.expansion as Json).offset).toBe(offset);
        pages.push(...codes(page));
      }
      expect(pages.sort()).toEqual(['cat', 'dog', 'mammal']);
      const posted = await ok(
        'POST',
        'ValueSet/$expand',
        pbody(
          { name: 'url', valueUri: VS },
          { name: 'count', valueInteger: 1 },
          { name: 'offset', valueInteger: 1 },
        ),
      );
      expect(((posted.expansion as Json).contains as Json[]).length).toBe(1);
      expect(await fails(400, 'GET', `${url}&activeOnly=maybe`)).toBe('invalid');
      expect(codes(await ok('GET', `${url}&activeOnly=true`))).toEqual(['cat', 'dog', 'mammal']);
      const none = await ok('GET', `${url}&count=0`);
      expect(none.expansion).toMatchObject({ total: 3 });
      expect((none.expansion as Json).contains).toBeUndefined();
    });

    it('sees a change to the code system or the value set at once, and a deletion', async () => {
      const cs = {
        resourceType: 'CodeSystem',
        url: 'http://example.org/cs/changing',
        status: 'active',
        content: 'complete',
      };
      const stored = await created(t, admin, { ...cs, concept: [{ code: 'one' }] });
      const vs = await created(t, admin, {
        resourceType: 'ValueSet',
        url: 'http://example.org/vs/changing',
        status: 'active',
        compose: { include: [{ system: cs.url }] },
      });
      const expand = 'ValueSet/$expand?url=http://example.org/vs/changing';
      expect(codes(await ok('GET', expand))).toEqual(['one']);
      expect(codes(await ok('GET', expand))).toEqual(['one']);
      const put = await call('PUT', `CodeSystem/${stored.id as string}`, {
        ...cs,
        id: stored.id,
        concept: [{ code: 'one' }, { code: 'two' }],
      });
      expect(put.statusCode, put.body).toBe(200);
      expect(codes(await ok('GET', expand))).toEqual(['one', 'two']);
      const vsPut = await call('PUT', `ValueSet/${vs.id as string}`, {
        ...vs,
        compose: { include: [{ system: cs.url, concept: [{ code: 'two' }] }] },
      });
      expect(vsPut.statusCode, vsPut.body).toBe(200);
      expect(codes(await ok('GET', expand))).toEqual(['two']);
      expect((await call('DELETE', `ValueSet/${vs.id as string}`)).statusCode).toBeLessThan(300);
      expect(await fails(404, 'GET', expand)).toBe('not-found');
    });

    it('answers 400 for bad input and 404 for unknown value sets', async () => {
      expect(await fails(400, 'GET', 'ValueSet/$expand')).toBe('invalid');
      for (const c of ['-1', 'abc', '1.5'])
        expect(await fails(400, 'GET', `ValueSet/$expand?url=${encodeURIComponent(VS)}&count=${c}`)).toBe(
          'invalid',
        );
      expect(
        await fails(
          400,
          'POST',
          'ValueSet/$expand',
          pbody({ name: 'url', valueUri: VS }, { name: 'valueSet', resource: mammals }),
        ),
      ).toBe('invalid');
      expect(
        await fails(400, 'POST', 'ValueSet/$expand', { resourceType: 'Parameters', parameter: {} }),
      ).toBe('invalid');
      expect(await fails(400, 'POST', 'ValueSet/$expand', { resourceType: 'Patient' })).toBe('invalid');
      expect(
        await fails(400, 'POST', 'ValueSet/$expand', pbody({ name: 'valueSet', valueString: 'x' })),
      ).toBe('invalid');
      expect(await fails(404, 'GET', 'ValueSet/$expand?url=http://example.org/nope')).toBe('not-found');
      expect(await fails(404, 'GET', 'ValueSet/nope/$expand')).toBe('not-found');
    });

    it('answers 422 beyond the code limit, and for code systems it does not hold', async () => {
      const concept = Array.from({ length: 100_001 }, (_, i) => ({ code: `c${i}` }));
      const big = {
        resourceType: 'ValueSet',
        compose: { include: [{ system: 'http://example.org/big', concept }] },
      };
      const res = await call('POST', 'ValueSet/$expand', pbody({ name: 'valueSet', resource: big }));
      expect(res.statusCode).toBe(422);
      expect(res.json().issue[0].code).toBe('too-costly');
      const loinc = { resourceType: 'ValueSet', compose: { include: [{ system: 'http://loinc.org' }] } };
      expect(await fails(422, 'POST', 'ValueSet/$expand', pbody({ name: 'valueSet', resource: loinc }))).toBe(
        'not-supported',
      );
    });
  });

  describe('$validate-code', () => {
    it('checks a code in a value set: GET, POST coding and codeableConcept, instance level, display', async () => {
      const base = `ValueSet/$validate-code?url=${encodeURIComponent(VS)}&system=${encodeURIComponent(CS)}`;
      const yes = await ok('GET', `${base}&code=dog`);
      expect(param(yes, 'result')?.valueBoolean).toBe(true);
      expect(param(yes, 'display')?.valueString).toBe('Dog');
      const no = await ok('GET', `${base}&code=fish`);
      expect(param(no, 'result')?.valueBoolean).toBe(false);
      expect(param(no, 'message')?.valueString).toContain('fish');
      expect(param(await ok('GET', `${base}&code=dog&display=Wolf`), 'result')?.valueBoolean).toBe(false);
      const coding = await ok(
        'POST',
        'ValueSet/$validate-code',
        pbody({ name: 'url', valueUri: VS }, { name: 'coding', valueCoding: { system: CS, code: 'cat' } }),
      );
      expect(param(coding, 'result')?.valueBoolean).toBe(true);
      const cc = await ok(
        'POST',
        `ValueSet/${ids.mammals}/$validate-code`,
        pbody({
          name: 'codeableConcept',
          valueCodeableConcept: {
            coding: [
              { system: CS, code: 'fish' },
              { system: CS, code: 'mammal' },
            ],
          },
        }),
      );
      expect(param(cc, 'result')?.valueBoolean).toBe(true);
      expect(await fails(400, 'GET', `ValueSet/$validate-code?url=${encodeURIComponent(VS)}`)).toBe(
        'invalid',
      );
      expect(await fails(404, 'GET', `ValueSet/$validate-code?url=http://example.org/nope&code=x`)).toBe(
        'not-found',
      );
    });

    it('checks a code in a code system, by url and on the instance', async () => {
      const yes = await ok(
        'GET',
        `CodeSystem/$validate-code?url=${encodeURIComponent(CS)}&code=fish&display=Fish`,
      );
      expect(param(yes, 'result')?.valueBoolean).toBe(true);
      const no = await ok('GET', `CodeSystem/${ids.codeSystem}/$validate-code?code=whale`);
      expect(param(no, 'result')?.valueBoolean).toBe(false);
      const fr = await ok(
        'POST',
        `CodeSystem/${ids.codeSystem}/$validate-code`,
        pbody({ name: 'coding', valueCoding: { system: CS, code: 'mammal', display: 'Mammifère' } }),
      );
      expect(param(fr, 'result')?.valueBoolean).toBe(true);
      expect(await fails(404, 'GET', 'CodeSystem/$validate-code?url=http://example.org/nope&code=x')).toBe(
        'not-found',
      );
    });
  });

  describe('CodeSystem/$lookup and $subsumes', () => {
    it('looks a code up with its designations, properties, parent and children', async () => {
      const r = await ok('GET', `CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=mammal`);
      expect(param(r, 'name')?.valueString).toBe('Animals');
      expect(param(r, 'version')?.valueString).toBe('1.0');
      expect(param(r, 'display')?.valueString).toBe('Mammal');
      expect(param(r, 'designation')?.part).toContainEqual({ name: 'value', valueString: 'Mammifère' });
      const props = (r.parameter as Param[])
        .filter((p) => p.name === 'property')
        .map((p) => `${String(p.part?.[0]?.valueCode)}=${String(p.part?.[1]?.valueCode)}`);
      expect(props.sort()).toEqual(['child=cat', 'child=dog', 'parent=animal']);
      const post = await ok(
        'POST',
        'CodeSystem/$lookup',
        pbody({ name: 'coding', valueCoding: { system: CS, code: 'dog' } }),
      );
      expect(
        (post.parameter as Param[]).find((p) => p.name === 'property' && p.part?.[0]?.valueCode === 'legs')
          ?.part?.[1],
      ).toEqual({
        name: 'value',
        valueInteger: 4,
      });
      expect(
        param(await ok('GET', `CodeSystem/${ids.codeSystem}/$lookup?code=fish`), 'display')?.valueString,
      ).toBe('Fish');
      expect(await fails(404, 'GET', `CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=whale`)).toBe(
        'not-found',
      );
      expect(await fails(404, 'GET', 'CodeSystem/$lookup?system=http://example.org/nope&code=x')).toBe(
        'not-found',
      );
      expect(await fails(400, 'GET', `CodeSystem/$lookup?system=${encodeURIComponent(CS)}`)).toBe('invalid');
      expect(await fails(400, 'GET', 'CodeSystem/$lookup?coding=x')).toBe('invalid');
    });

    it('tells how two codes relate', async () => {
      const outcome = async (a: string, b: string): Promise<unknown> =>
        param(
          await ok('GET', `CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=${a}&codeB=${b}`),
          'outcome',
        )?.valueCode;
      expect(await outcome('dog', 'dog')).toBe('equivalent');
      expect(await outcome('animal', 'dog')).toBe('subsumes');
      expect(await outcome('cat', 'mammal')).toBe('subsumed-by');
      expect(await outcome('fish', 'dog')).toBe('not-subsumed');
      const post = await ok(
        'POST',
        `CodeSystem/${ids.codeSystem}/$subsumes`,
        pbody(
          { name: 'codingA', valueCoding: { system: CS, code: 'mammal' } },
          { name: 'codingB', valueCoding: { system: CS, code: 'cat' } },
        ),
      );
      expect(param(post, 'outcome')?.valueCode).toBe('subsumes');
      expect(await fails(400, 'GET', `CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=dog`)).toBe(
        'invalid',
      );
      expect(
        await fails(400, 'GET', `CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=dog&codeB=x`),
      ).toBe('invalid');
    });
  });

  describe('ConceptMap/$translate', () => {
    it('translates by url, inline, by id, by source and target, and in reverse', async () => {
      const r = await ok(
        'GET',
        `ConceptMap/$translate?url=${encodeURIComponent(CM)}&system=${encodeURIComponent(CS)}&code=dog`,
      );
      expect(param(r, 'result')?.valueBoolean).toBe(true);
      expect(param(r, 'match')?.part).toEqual([
        { name: 'equivalence', valueCode: 'wider' },
        {
          name: 'concept',
          valueCoding: { system: 'http://example.org/cs/kinds', code: 'pet', display: 'Pet' },
        },
        { name: 'source', valueUri: CM },
      ]);
      const disjoint = await ok(
        'GET',
        `ConceptMap/${ids.conceptMap}/$translate?system=${encodeURIComponent(CS)}&code=fish`,
      );
      expect(param(disjoint, 'result')?.valueBoolean).toBe(false);
      const none = await ok(
        'POST',
        'ConceptMap/$translate',
        pbody(
          { name: 'conceptMap', resource: conceptMap },
          { name: 'coding', valueCoding: { system: CS, code: 'cat' } },
        ),
      );
      expect(param(none, 'result')?.valueBoolean).toBe(false);
      expect(param(none, 'message')?.valueString).toContain('cat');
      const bySource = await ok(
        'GET',
        `ConceptMap/$translate?source=${encodeURIComponent(VS)}&system=${encodeURIComponent(CS)}&code=dog`,
      );
      expect(param(bySource, 'result')?.valueBoolean).toBe(true);
      const back = await ok(
        'GET',
        `ConceptMap/$translate?url=${encodeURIComponent(CM)}&system=http://example.org/cs/kinds&code=pet&reverse=true`,
      );
      expect((param(back, 'match')?.part?.[1] as Json).valueCoding).toEqual({ system: CS, code: 'dog' });
      expect(await fails(400, 'GET', `ConceptMap/$translate?url=${encodeURIComponent(CM)}`)).toBe('invalid');
      expect(
        await fails(400, 'GET', `ConceptMap/$translate?url=${encodeURIComponent(CM)}&code=dog&reverse=maybe`),
      ).toBe('invalid');
      expect(await fails(404, 'GET', 'ConceptMap/$translate?url=http://example.org/nope&code=dog')).toBe(
        'not-found',
      );
    });
  });

  describe('isolation and access', () => {
    it("another project's admin and member get 404 for this project's resources, by url and by id", async () => {
      for (const token of [other.adminToken, other.memberToken]) {
        expect(
          await fails(404, 'GET', `ValueSet/$expand?url=${encodeURIComponent(VS)}`, undefined, token),
        ).toBe('not-found');
        expect(await fails(404, 'GET', `ValueSet/${ids.mammals}/$expand`, undefined, token)).toBe(
          'not-found',
        );
        expect(
          await fails(404, 'GET', `ValueSet/${ids.mammals}/$validate-code?code=dog`, undefined, token),
        ).toBe('not-found');
        expect(
          await fails(
            404,
            'GET',
            `CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=dog`,
            undefined,
            token,
          ),
        ).toBe('not-found');
        expect(
          await fails(
            404,
            'GET',
            `CodeSystem/${ids.codeSystem}/$subsumes?codeA=dog&codeB=cat`,
            undefined,
            token,
          ),
        ).toBe('not-found');
        expect(
          await fails(
            404,
            'GET',
            `ConceptMap/$translate?url=${encodeURIComponent(CM)}&code=dog`,
            undefined,
            token,
          ),
        ).toBe('not-found');
        // An inline value set naming this project's code system does not reach it either.
        const inline = { resourceType: 'ValueSet', compose: { include: [{ system: CS }] } };
        expect(
          await fails(422, 'POST', 'ValueSet/$expand', pbody({ name: 'valueSet', resource: inline }), token),
        ).toBe('not-supported');
      }
    });

    it('a token whose scopes do not reach these types is refused (403)', async () => {
      for (const path of [
        `ValueSet/$expand?url=${encodeURIComponent(VS)}`,
        `ValueSet/${ids.mammals}/$validate-code?code=dog`,
        `CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=dog`,
        `CodeSystem/$subsumes?system=${encodeURIComponent(CS)}&codeA=dog&codeB=cat`,
        `CodeSystem/$validate-code?url=${encodeURIComponent(CS)}&code=dog`,
        `ConceptMap/$translate?url=${encodeURIComponent(CM)}&code=dog`,
      ])
        expect(await fails(403, 'GET', path, undefined, narrow)).toBe('forbidden');
    });
  });

  describe('hostile input', () => {
    it('answers 4xx (or a correct 200) and never 5xx, and the server still reads afterwards', async () => {
      // Built as text: the test client's JSON.stringify would overflow on 5,000 levels too.
      const levels = 5000;
      const deep = `${'{"code":"c","concept":['.repeat(levels)}{"code":"leaf"}${']}'.repeat(levels)}`;
      const text = `{"resourceType":"CodeSystem","url":"http://example.org/cs/deep","status":"active","content":"complete","concept":[${deep}]}`;
      const raw = (path: string, payload: string) =>
        t.request({
          method: 'POST',
          url: `${t.fhir}/${path}`,
          token: admin,
          headers: { 'content-type': 'application/fhir+json' },
          payload,
        });
      const deepCs = await raw('CodeSystem', text);
      const deepInline = await raw(
        'ValueSet/$expand',
        `{"resourceType":"Parameters","parameter":[{"name":"valueSet","resource":{"resourceType":"ValueSet","expansion":{"contains":[${'{"system":"s","code":"c","contains":['.repeat(levels)}{"system":"s","code":"x"}${']}'.repeat(levels)}]}}}]}`,
      );
      for (const res of [deepCs, deepInline]) {
        expect(res.statusCode, res.body).toBeGreaterThanOrEqual(400);
        expect(res.statusCode, res.body).toBeLessThan(500);
      }
      await created(t, admin, {
        resourceType: 'ValueSet',
        url: 'http://example.org/vs/redos',
        status: 'active',
        compose: { include: [{ system: CS, filter: [{ property: 'code', op: 'regex', value: '(a+)+$' }] }] },
      });
      expect(await fails(422, 'GET', 'ValueSet/$expand?url=http://example.org/vs/redos')).toBe(
        'not-supported',
      );
      await created(t, admin, {
        resourceType: 'ValueSet',
        url: 'http://example.org/vs/ping',
        status: 'active',
        compose: { include: [{ valueSet: ['http://example.org/vs/pong'] }] },
      });
      await created(t, admin, {
        resourceType: 'ValueSet',
        url: 'http://example.org/vs/pong',
        status: 'active',
        compose: { include: [{ valueSet: ['http://example.org/vs/ping'] }] },
      });
      const cyclic = await call('GET', 'ValueSet/$expand?url=http://example.org/vs/ping');
      expect(cyclic.statusCode, cyclic.body).toBe(422);
      const v = await call(
        'GET',
        `ValueSet/$validate-code?url=http://example.org/vs/ping&code=dog&system=${encodeURIComponent(CS)}`,
      );
      expect(v.statusCode).toBe(422);
      const huge = await ok(
        'POST',
        'ValueSet/$expand',
        pbody({ name: 'url', valueUri: VS }, { name: 'filter', valueString: 'x'.repeat(1_000_000) }),
      );
      expect((huge.expansion as Json).total).toBe(0);
      const hugeUrl = await call(
        'POST',
        'CodeSystem/$lookup',
        pbody({ name: 'system', valueUri: 'u'.repeat(1_000_000) }, { name: 'code', valueCode: 'x' }),
      );
      expect(hugeUrl.statusCode).toBe(404);
      const patient = await created(t, admin, { resourceType: 'Patient', name: [{ family: 'After' }] });
      expect((await ok('GET', `Patient/${patient.id as string}`)).id).toBe(patient.id);
    });

    it("a heavy expansion in one project does not stop another project's read", async () => {
      const concept = Array.from({ length: 100 }, (_, i) => ({
        code: `g${i}`,
        concept: Array.from({ length: 99 }, (_, j) => ({ code: `g${i}-${j}`, display: `Leaf ${i} ${j}` })),
      }));
      await created(t, admin, {
        resourceType: 'CodeSystem',
        url: 'http://example.org/cs/big',
        status: 'active',
        content: 'complete',
        concept,
      });
      await created(t, admin, {
        resourceType: 'ValueSet',
        url: 'http://example.org/vs/big',
        status: 'active',
        compose: { include: [{ system: 'http://example.org/cs/big' }] },
      });
      const theirs = await created(t, other.adminToken, {
        resourceType: 'Patient',
        name: [{ family: 'Other' }],
      });
      const [heavy, read] = await Promise.all([
        call('GET', 'ValueSet/$expand?url=http://example.org/vs/big'),
        call('GET', `Patient/${theirs.id as string}`, undefined, other.adminToken),
      ]);
      expect(heavy.statusCode).toBe(200);
      expect((heavy.json().expansion as Json).total).toBe(10_000);
      expect(read.statusCode).toBe(200);
      expect(read.json().id).toBe(theirs.id);
    });
  });
});
