// Hostile input, property-based (fast-check): arbitrary resource bodies, search parameters full of SQL
// metacharacters in every parameter type and modifier, JWT-looking bearer tokens and invite bodies. Whatever comes
// in, the server never answers 5xx, keeps answering, and the data stored before is unchanged. Plus the explicit size
// limits (maxBodySize → 413, maxBundleEntries → 4xx). Runs are bounded (and seeded: FUZZ_SEED picks another seed).
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { SignJWT, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeCursor } from '../../src/fhir/search/cursor.js';
import { searchParamsOf } from '../../src/fhir/search/registry.js';
import { testDatabases } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { startTestApp, type TestApp } from '../support/app.js';

const SEED = Number(process.env.FUZZ_SEED ?? 20_240_601);
const runs = (numRuns: number) => ({ numRuns, seed: SEED, endOnFailure: true });
const MAX_BODY = 64 * 1024;
const MAX_ENTRIES = 25;

/** Pieces that break naive SQL, LIKE patterns, JSON paths, casts, URL and FHIR search syntax. */
const META = [
  "'",
  "''",
  '"',
  ';',
  '--',
  '/*',
  '*/',
  '\\',
  '%',
  '_',
  '$1',
  '$$',
  '::text',
  '(',
  ')',
  ',',
  '|',
  '$',
  '\u0000',
  '\n',
  '\t',
  "' OR '1'='1",
  '" OR ""="',
  "'; DROP TABLE resources; --",
  '1); DELETE FROM resources; --',
  "' UNION SELECT content::text FROM resources --",
  'pg_sleep(5)',
  "'||pg_sleep(5)||'",
  '\u202e',
  '😀',
  '\ud800',
  '..',
  '*',
  ':',
  '.',
  '=',
  '#',
  '+',
  '-',
  'e',
  'Infinity',
  'NaN',
  '-0',
  '1e999',
  '99999999999999999999999999999999999999',
  'ge',
  'sa',
  'ap',
  'ne',
  'T',
  'Z',
  '2020-13-45',
  '0000-00-00',
  '99999-01-01',
  '2020-01-01T25:61:61+99:99',
  'http://',
  'urn:uuid:',
  'Patient/',
  '{"a":1}',
  '[]',
  'null',
];
const metaString = fc.array(fc.constantFrom(...META), { minLength: 1, maxLength: 5 }).map((a) => a.join(''));
const hostile = fc.oneof(
  { weight: 3, arbitrary: metaString },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom('', 'ge', 'lt', 'ap', 'sa', 'eb', 'ne', 'xx'), metaString, fc.integer())
      .map(([p, m, n]) => `${p}${n}${m}`),
  },
);

/** Search parameters of these types cover string, token, reference, date, number, quantity, uri and composite. */
const TYPES = ['Patient', 'Observation', 'RiskAssessment', 'ValueSet', 'Encounter'] as const;
const MODIFIERS = [
  '',
  ':exact',
  ':contains',
  ':missing',
  ':not',
  ':text',
  ':above',
  ':below',
  ':in',
  ':bogus',
  ':',
];
const SPECIAL = [
  '_sort',
  '_count',
  '_total',
  '_summary',
  '_elements',
  '_include',
  '_revinclude',
  '_cursor',
  '_id',
];

describe.each(testDatabases())('hostile input on $name', (database) => {
  let t: TestApp;
  let idp: MockIdp;
  let token: string;
  let projectId: string;
  let kid: string;
  const snapshots = new Map<string, string>();
  const paramsOf = (type: string) => searchParamsOf(type).filter((p) => p.type !== 'special');

  const get = (url: string, tok = token) => t.request({ method: 'GET', url, token: tok });
  /** The answer is a FHIR answer: a 4xx is an OperationOutcome, never a 5xx. */
  const sane = (res: LightMyRequestResponse, what: string): void => {
    if (res.statusCode >= 500) throw new Error(`${res.statusCode} for ${what}: ${res.body.slice(0, 500)}`);
    if (res.statusCode >= 400) {
      const body = res.json() as { resourceType?: string };
      if (body.resourceType !== 'OperationOutcome')
        throw new Error(`${res.statusCode} without OperationOutcome for ${what}: ${res.body.slice(0, 300)}`);
    }
  };
  /** Resources and tables as they were before the fuzzing; and the server still answers. */
  const unchanged = async (): Promise<void> => {
    expect((await t.request({ method: 'GET', url: '/healthcheck' })).statusCode).toBe(200);
    for (const [url, body] of snapshots) expect((await get(url, t.adminToken)).body, url).toBe(body);
    expect(({} as Record<string, unknown>).admin, 'Object.prototype polluted').toBeUndefined();
    expect(({} as Record<string, unknown>).polluted, 'Object.prototype polluted').toBeUndefined();
  };

  beforeAll(async () => {
    idp = await startMockIdp();
    t = await startTestApp(database, {
      maxBodySize: MAX_BODY,
      maxBundleEntries: MAX_ENTRIES,
      externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }],
    });
    const p = await t.newProject('Hostile');
    token = p.adminToken;
    projectId = p.projectId;
    kid = decodeProtectedHeader(token).kid as string;
    const create = async (resource: Record<string, unknown>): Promise<string> => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/${resource.resourceType as string}`,
        token,
        payload: resource,
      });
      expect(res.statusCode, res.body).toBe(201);
      return `${t.fhir}/${resource.resourceType as string}/${res.json().id as string}`;
    };
    const patient = await create({
      resourceType: 'Patient',
      name: [{ family: "O'Brien", given: ['Robert"); DROP TABLE resources;--'] }],
      gender: 'male',
      birthDate: '1970-01-01',
      identifier: [{ system: 'urn:sys', value: "1' OR '1'='1" }],
    });
    const patientId = patient.split('/').pop() as string;
    const urls = [
      patient,
      await create({
        resourceType: 'Observation',
        status: 'final',
        code: { coding: [{ system: 'http://loinc.org', code: '8867-4' }] },
        subject: { reference: `Patient/${patientId}` },
        effectiveDateTime: '2020-01-01T00:00:00Z',
        valueQuantity: { value: 72, unit: 'beats/min', system: 'http://unitsofmeasure.org', code: '/min' },
      }),
      await create({
        resourceType: 'RiskAssessment',
        status: 'final',
        subject: { reference: `Patient/${patientId}` },
        prediction: [{ probabilityDecimal: 0.5 }],
      }),
      await create({
        resourceType: 'ValueSet',
        status: 'active',
        url: 'http://example.org/vs',
        name: 'Hostile',
      }),
      `${t.fhir}/Project/${projectId}`,
    ];
    for (const type of ['ProjectMembership', 'ClientApplication']) {
      const list = (await get(`${t.fhir}/${type}?_count=1000`, t.adminToken)).json() as {
        entry: { resource: { id: string } }[];
      };
      for (const e of list.entry) urls.push(`${t.fhir}/${type}/${e.resource.id}`);
    }
    for (const url of urls) snapshots.set(url, (await get(url, t.adminToken)).body);
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  it('search: SQL metacharacters in every parameter type, modifier, chain and result parameter', async () => {
    const param = fc.constantFrom(...TYPES).chain((type) =>
      fc.tuple(
        fc.constant(type),
        fc.array(
          fc.oneof(
            {
              weight: 6,
              arbitrary: fc
                .tuple(
                  fc.constantFrom(...paramsOf(type)),
                  fc.oneof({ weight: 4, arbitrary: fc.constant('') }, fc.constantFrom(...MODIFIERS)),
                  hostile,
                )
                .map(([p, m, v]) => {
                  // Chains on reference parameters: `subject:Patient.name=`, `subject.name=`.
                  if (p.type === 'reference' && m === ':bogus') return [`${p.code}:Patient.name`, v] as const;
                  if (p.type === 'reference' && m === ':in') return [`${p.code}.${v}`, 'x'] as const;
                  return [`${p.code}${m}`, v] as const;
                }),
            },
            {
              weight: 2,
              arbitrary: fc.tuple(
                fc.constantFrom(...SPECIAL),
                fc.oneof(
                  hostile,
                  fc.constantFrom('-birthdate', 'date,-_id', '*', 'Patient:*', '0', '-1', '1001'),
                ),
              ),
            },
            { weight: 1, arbitrary: fc.tuple(hostile, hostile) },
          ),
          { minLength: 1, maxLength: 3 },
        ),
        fc.constantFrom(
          '',
          '',
          '',
          '',
          '&%FF',
          '&a=%C0%AF',
          '&%',
          '&family=%2',
          '&x=%E2%82',
          '&&&=',
          '&_count=9999999999999999999',
        ),
      ),
    );
    const answers: Record<number, number> = {};
    await fc.assert(
      fc.asyncProperty(param, fc.boolean(), async ([type, pairs, raw], viaPost) => {
        const query = new URLSearchParams(pairs.map(([k, v]) => [k, v])).toString() + raw;
        const res = viaPost
          ? await t.request({
              method: 'POST',
              url: `${t.fhir}/${type}/_search`,
              token,
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              payload: query,
            })
          : await get(`${t.fhir}/${type}?${query}`);
        sane(res, `${type}?${query}`);
        answers[res.statusCode] = (answers[res.statusCode] ?? 0) + 1;
      }),
      runs(300),
    );
    // Enough of them got past parsing to reach the SQL.
    expect(answers[200] ?? 0, JSON.stringify(answers)).toBeGreaterThan(20);
    await unchanged();
  });

  it('$csv: hostile and random _fields (search parameters, FHIRPath fragments, quotes) → 200 or 400', async () => {
    const fragment = fc.constantFrom(
      'name.given.substring(0, 3)',
      "'=1+1'",
      ' -1 ',
      "name.where(use = 'official').family",
      '(name | address).first()',
      "iif(gender = 'male', 1, 2)",
      '%resource.id',
      '%nope',
      '$this',
      'descendants().count()',
      "trace('x')",
      'repeat(name)',
      'nosuchfunction()',
      'name.given[0',
      'name)',
      '"quoted, comma"',
      "extension('http://x').value",
      'birthDate + 1 year',
      "telecom.value.matches('(a+)+$')",
      'ofType(HumanName)',
    );
    const entry = fc.oneof(
      {
        weight: 3,
        arbitrary: fc
          .constantFrom(...TYPES)
          .chain((ty) => fc.constantFrom(...paramsOf(ty).map((p) => p.code))),
      },
      { weight: 3, arbitrary: fragment },
      { weight: 2, arbitrary: hostile },
    );
    const answers: Record<number, number> = {};
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...TYPES),
        fc.array(entry, { minLength: 1, maxLength: 4 }),
        async (type, entries) => {
          const fields = entries.join(',');
          // URLSearchParams (unlike encodeURIComponent) accepts lone surrogates: it sends U+FFFD.
          const res = await get(
            `${t.fhir}/${type}/$csv?${new URLSearchParams({ _fields: fields }).toString()}`,
          );
          sane(res, `${type}/$csv?_fields=${fields}`);
          expect([200, 400], `${type} ${fields}: ${res.body.slice(0, 300)}`).toContain(res.statusCode);
          if (res.statusCode === 200) expect(res.body.startsWith('\uFEFF')).toBe(true);
          else expect(res.json().issue[0].code).toBe('invalid');
          answers[res.statusCode] = (answers[res.statusCode] ?? 0) + 1;
        },
      ),
      runs(150),
    );
    expect(answers[200] ?? 0, JSON.stringify(answers)).toBeGreaterThan(10);
    await unchanged();
  });

  it('search: forged paging cursors for every sort type', async () => {
    const sorts = [
      'birthdate',
      '-birthdate',
      'family',
      '_id',
      '-_lastUpdated',
      'gender,birthdate',
      'identifier',
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...sorts),
        fc.oneof(fc.integer(), fc.double(), fc.constant(Number.MAX_SAFE_INTEGER)),
        fc.array(fc.oneof(hostile, fc.constant(null), fc.jsonValue()), { maxLength: 3 }),
        fc.boolean(),
        async (sort, rid, keys, raw) => {
          const cursor = raw
            ? Buffer.from(JSON.stringify([rid, ...keys])).toString('base64url')
            : encodeCursor({
                rid: Math.trunc(Number.isFinite(rid) ? rid : 0),
                keys: keys.map((k) => (k === null ? null : String(k))),
              });
          const res = await get(`${t.fhir}/Patient?_sort=${sort}&_count=1&_cursor=${cursor}`);
          sane(res, `cursor ${cursor} sort ${sort}`);
        },
      ),
      runs(120),
    );
    await unchanged();
  });

  it('resource bodies: arbitrary JSON, hostile values in known elements, hostile ids (POST and PUT)', async () => {
    const element = fc.oneof(hostile, fc.jsonValue({ maxDepth: 3 }));
    const patientish = fc
      .record(
        {
          id: hostile,
          meta: fc.record(
            {
              project: fc.oneof(hostile, fc.constant(projectId)),
              versionId: element,
              lastUpdated: element,
              author: element,
              security: element,
            },
            { requiredKeys: [] },
          ),
          name: fc.array(
            fc.record(
              { family: element, given: fc.oneof(fc.array(hostile), element), text: element },
              { requiredKeys: [] },
            ),
          ),
          gender: element,
          birthDate: element,
          identifier: fc.oneof(fc.array(fc.record({ system: hostile, value: hostile })), element),
          managingOrganization: fc.record({ reference: hostile }),
          extension: fc.array(fc.record({ url: hostile, valueString: element })),
          contained: element,
          active: element,
          __proto__: fc.constant({ polluted: true }),
          constructor: element,
        },
        { requiredKeys: [] },
      )
      .map((r) => ({ resourceType: 'Patient', ...r }));
    const body = fc.oneof(
      { weight: 4, arbitrary: patientish },
      { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
      {
        weight: 1,
        arbitrary: fc.dictionary(hostile, element).map((o) => ({ ...o, resourceType: 'Patient' })),
      },
    );
    const rawText = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.constantFrom(
        '{"resourceType":"Patient","__proto__":{"admin":true}}',
        '{"resourceType":"Patient","constructor":{"prototype":{"admin":true}}}',
        '{',
        '{"resourceType":"Patient"}garbage',
        '\u0000',
        '[1,2',
        '{"resourceType":"Patient","name":[{"family":"\\ud800"}]}',
      ),
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          body.map((b) => JSON.stringify(b)),
          rawText,
        ),
        fc.constantFrom('POST', 'PUT'),
        fc.oneof(fc.uuid(), hostile),
        fc.constantFrom(
          'application/fhir+json',
          'application/json',
          'application/json-patch+json',
          'text/plain',
        ),
        async (payload, method, id, contentType) => {
          const url =
            method === 'POST'
              ? `${t.fhir}/Patient`
              : `${t.fhir}/Patient/${encodeURIComponent(id.replace(/[\ud800-\udfff]/g, ''))}`;
          const res = await t.request({
            method,
            url,
            token,
            headers: { 'content-type': contentType },
            payload,
          });
          sane(res, `${method} ${url} ${payload.slice(0, 200)}`);
        },
      ),
      runs(200),
    );
    // A deeply nested value (stack depth) and a wide one, as text (the test client would not serialise them).
    const deep = `${'['.repeat(20_000)}"x"${']'.repeat(20_000)}`;
    const wide = Array.from({ length: 3000 }, (_, i) => `"k${i}":${i}`).join(',');
    for (const extra of [
      `"extension":[{"url":"http://x","valueString":${deep}}]`,
      `"contained":[${deep}]`,
      `"name":[{"given":${deep}}]`,
      wide,
    ]) {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/Patient`,
        token,
        headers: { 'content-type': 'application/fhir+json' },
        payload: `{"resourceType":"Patient",${extra}}`,
      });
      sane(res, 'deep or wide body');
      expect(res.statusCode).toBeLessThan(500);
    }
    await unchanged();
  });

  it('bearer tokens: JWT-looking strings, forged headers and claims, alg none and HS256 confusion → 401', async () => {
    const b64 = (o: unknown) =>
      Buffer.from(typeof o === 'string' ? o : JSON.stringify(o)).toString('base64url');
    const claims = fc.record(
      {
        iss: fc.oneof(fc.constantFrom('http://cinder.test/', idp.issuer), hostile),
        sub: hostile,
        login_id: hostile,
        profile: hostile,
        scope: hostile,
        exp: fc.oneof(fc.integer(), fc.constant(4_102_444_800), hostile, fc.double()),
        fhirUser: hostile,
      },
      { requiredKeys: [] },
    );
    const header = fc.record(
      {
        alg: fc.oneof(fc.constantFrom('none', 'None', 'HS256', 'RS256', 'ES256', 'PS256'), hostile),
        kid: fc.oneof(fc.constantFrom(kid, 'idp-key', '../../etc/passwd'), hostile),
        typ: fc.constantFrom('JWT', 'at+jwt'),
        jku: fc.constantFrom('http://127.0.0.1:1/jwks', 'file:///etc/passwd'),
        jwk: fc.constant({ kty: 'oct', k: 'AAAA' }),
      },
      { requiredKeys: ['alg'] },
    );
    const printable = fc.string({
      unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
      minLength: 1,
      maxLength: 300,
    });
    const tokenArb = fc.oneof(
      fc
        .tuple(header, claims, fc.oneof(fc.constant(''), fc.base64String(), printable))
        .map(([h, c, s]) => `${b64(h)}.${b64(c)}.${s.replace(/=/g, '')}`),
      fc.tuple(printable, printable).map(([a, b]) => `${a}.${b}.`),
      printable,
    );
    const urls = [
      `${t.fhir}/Patient?_count=1`,
      '/oauth2/userinfo',
      '/auth/me',
      `/admin/projects/${projectId}/invite`,
    ];
    await fc.assert(
      fc.asyncProperty(tokenArb, fc.constantFrom(...urls), async (bearer, url) => {
        const res = await t.request({
          method: url.includes('invite') ? 'POST' : 'GET',
          url,
          headers: {
            authorization: `Bearer ${bearer}`,
            ...(url.includes('invite') ? { 'content-type': 'application/json' } : {}),
          },
          ...(url.includes('invite') ? { payload: '{}' } : {}),
        });
        sane(res, `token ${bearer.slice(0, 200)} on ${url}`);
        if (res.statusCode !== 401)
          throw new Error(`${res.statusCode} for token ${bearer.slice(0, 200)} on ${url}`);
        expect(String(res.headers['www-authenticate'])).toMatch(/^Bearer/);
      }),
      runs(150),
    );
    // alg confusion: HS256 keyed with the server's public key; alg none with our kid and real claims.
    const jwk = (await get('/.well-known/jwks.json', null as unknown as string)).json().keys[0] as Record<
      string,
      string
    >;
    const real = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString()) as Record<
      string,
      unknown
    >;
    const hs = await new SignJWT(real)
      .setProtectedHeader({ alg: 'HS256', kid })
      .sign(new TextEncoder().encode(JSON.stringify(jwk)));
    const hsN = await new SignJWT(real)
      .setProtectedHeader({ alg: 'HS256', kid })
      .sign(Buffer.from(jwk.n as string, 'base64url'));
    const none = `${b64({ alg: 'none', kid })}.${b64(real)}.`;
    for (const forged of [hs, hsN, none]) {
      const res = await get(`${t.fhir}/Patient?_count=1`, forged);
      expect(res.statusCode, forged).toBe(401);
    }
    await unchanged();
  });

  it('invite bodies: arbitrary fields and hostile values → 200, 400 or 409, never 5xx', async () => {
    const value = fc.oneof(hostile, fc.jsonValue({ maxDepth: 2 }));
    const invite = fc.record(
      {
        resourceType: fc.oneof(
          fc.constantFrom('Practitioner', 'Patient', 'User', 'ClientApplication'),
          value,
        ),
        firstName: fc.oneof(hostile, value),
        lastName: fc.oneof(hostile, value),
        email: fc.oneof(
          hostile.map((h) => `${h}@example.org`),
          value,
          fc.emailAddress(),
        ),
        externalId: fc.oneof(hostile, value, fc.constant('shared|external-id')),
        admin: fc.oneof(fc.boolean(), value),
        project: value,
        __proto__: fc.constant({ admin: true }),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 5, arbitrary: invite.map((b) => JSON.stringify(b)) },
          { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
        ),
        fc.oneof({ weight: 5, arbitrary: fc.constant(projectId) }, { weight: 1, arbitrary: hostile }),
        async (payload, project) => {
          const url = `/admin/projects/${encodeURIComponent(project.replace(/[\ud800-\udfff]/g, ''))}/invite`;
          const res = await t.request({
            method: 'POST',
            url,
            token,
            headers: { 'content-type': 'application/json' },
            payload,
          });
          sane(res, `invite ${url} ${payload.slice(0, 200)}`);
          if (project === projectId && ![200, 400, 409].includes(res.statusCode))
            throw new Error(
              `${res.statusCode} for invite ${payload.slice(0, 200)}: ${res.body.slice(0, 300)}`,
            );
          if (res.statusCode === 200 && (res.json() as { admin?: unknown }).admin !== undefined)
            expect(typeof res.json().admin).toBe('boolean');
        },
      ),
      runs(100),
    );
    await unchanged();
  });

  it('values the database cannot hold or compare are 400, not 500 (found by the properties above)', async () => {
    const cursor = (keys: unknown[]) => Buffer.from(JSON.stringify([1, ...keys])).toString('base64url');
    const cases: [string, string, string?][] = [
      ['POST', `${t.fhir}/Patient`, '{"resourceType":"Patient","name":[{"family":"\\ud800"}]}'],
      ['POST', `${t.fhir}/Patient`, '{"resourceType":"Patient","name":[{"family":"a\\u0000b"}]}'],
      [
        'POST',
        `${t.fhir}/Patient`,
        '{"resourceType":"Patient","extension":[{"url":"x\\u0000","valueString":"v"}]}',
      ],
      ['GET', `${t.fhir}/Patient?family=a%00b`],
      ['GET', `${t.fhir}/Patient?identifier=a%00|b`],
      ['GET', `${t.fhir}/Patient/a%00b`],
      ['GET', `${t.fhir}/Patient?_sort=birthdate&_cursor=${cursor(['not a date'])}`],
      ['GET', `${t.fhir}/Patient?_sort=birthdate&_cursor=${cursor(['2020-02-31 00:00:00+00'])}`],
      ['GET', `${t.fhir}/RiskAssessment?_sort=probability&_cursor=${cursor(['1e999999'])}`],
      ['GET', `${t.fhir}/RiskAssessment?_sort=probability&_cursor=${cursor(['NaNx'])}`],
      ['GET', `${t.fhir}/Patient?_cursor=${cursor(['not a date'])}`],
    ];
    for (const [method, url, payload] of cases) {
      const res = await t.request({
        method: method as 'GET',
        url,
        token,
        ...(payload ? { payload, headers: { 'content-type': 'application/fhir+json' } } : {}),
      });
      expect(`${res.statusCode} ${res.json().issue?.[0]?.code}`, `${method} ${url} ${payload ?? ''}`).toBe(
        '400 invalid',
      );
    }
    // In a batch, such an entry fails on its own and the others are written.
    const batch = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      headers: { 'content-type': 'application/fhir+json' },
      payload: `{"resourceType":"Bundle","type":"batch","entry":[
        {"resource":{"resourceType":"Patient","name":[{"family":"a\\u0000"}]},"request":{"method":"POST","url":"Patient"}},
        {"resource":{"resourceType":"Patient"},"request":{"method":"POST","url":"Patient"}}]}`,
    });
    expect(batch.statusCode).toBe(200);
    expect(
      batch.json().entry.map((e: { response: { status: string } }) => e.response.status.slice(0, 3)),
    ).toEqual(['400', '201']);
    await unchanged();
  });

  it('identity provider tokens with hostile claims (validly signed): userinfo and FHIR answer 200 or 401', async () => {
    const claims = fc.record(
      {
        sub: hostile,
        fhirUser: fc.oneof(
          hostile,
          hostile.map((h) => `Practitioner/${h}`),
          hostile.map((h) => `Practitioner?identifier=${h}`),
          hostile.map((h) => `https://idp.example/fhir/${h}`),
        ),
        ext: fc.record({ fhirUser: hostile }, { requiredKeys: [] }),
        email: hostile,
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(
        claims,
        fc.constantFrom('/oauth2/userinfo', `${t.fhir}/Patient?_count=1`),
        async (c, url) => {
          const res = await get(url, await idp.token(c));
          sane(res, `${url} with claims ${JSON.stringify(c)}`);
          if (res.statusCode !== 401 && res.statusCode !== 200)
            throw new Error(`${res.statusCode} for claims ${JSON.stringify(c)}: ${res.body.slice(0, 300)}`);
        },
      ),
      runs(100),
    );
    await unchanged();
  });

  it('size limits: a body over maxBodySize is 413, a Bundle over maxBundleEntries is refused whole', async () => {
    const big = {
      resourceType: 'Patient',
      text: { status: 'generated', div: `<div>${'x'.repeat(MAX_BODY)}</div>` },
    };
    const res = await t.request({ method: 'POST', url: `${t.fhir}/Patient`, token, payload: big });
    expect(res.statusCode).toBe(413);
    expect(res.json().resourceType).toBe('OperationOutcome');
    for (const type of ['batch', 'transaction']) {
      const family = `Overflow${randomUUID().slice(0, 8)}`;
      const entry = Array.from({ length: MAX_ENTRIES + 1 }, () => ({
        resource: { resourceType: 'Patient', name: [{ family }] },
        request: { method: 'POST', url: 'Patient' },
      }));
      const over = await t.request({
        method: 'POST',
        url: t.fhir,
        token,
        payload: { resourceType: 'Bundle', type, entry },
      });
      expect(over.statusCode, over.body).toBeGreaterThanOrEqual(400);
      expect(over.statusCode).toBeLessThan(500);
      expect(over.json().resourceType).toBe('OperationOutcome');
      const found = await get(`${t.fhir}/Patient?family=${family}&_summary=count`);
      expect(found.json().total).toBe(0);
      const ok = await t.request({
        method: 'POST',
        url: t.fhir,
        token,
        payload: { resourceType: 'Bundle', type, entry: entry.slice(1) },
      });
      expect(ok.statusCode).toBe(200);
    }
    await unchanged();
  });
});
