// $viewdefinition-run through HTTP (issue 15 point 3, API.md §7): inline and stored views, inline resources and stored
// data with the caller's access, patient/group/_since filters, _limit with X-Truncated, the three formats, and the
// status codes (422 for a view that cannot be processed, 400 for malformed parameters, 404 for an unseen view).
import { beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, createEntry, postBundle, useProjectApp } from '../support/app.js';

const patientView = (extra: Record<string, unknown> = {}) => ({
  resourceType: 'ViewDefinition',
  resource: 'Patient',
  select: [
    {
      column: [
        { name: 'id', path: 'getResourceKey()', type: 'id' },
        { name: 'family', path: 'name.first().family', type: 'string' },
        { name: 'birth', path: 'birthDate', type: 'date' },
      ],
    },
  ],
  ...extra,
});
const obsView = {
  resourceType: 'ViewDefinition',
  resource: 'Observation',
  select: [
    {
      column: [
        { name: 'id', path: 'getResourceKey()' },
        { name: 'patient', path: 'subject.getReferenceKey(Patient)' },
        { name: 'value', path: 'value.ofType(Quantity).value', type: 'decimal' },
      ],
    },
  ],
};

describe.each(testDatabases())('viewdefinition-run on $name', (database) => {
  const ctx = useProjectApp(database);
  const family = `View${Date.now()}`;
  const ids: string[] = [];
  let afterWrites = '';

  const run = (body: Record<string, unknown>, opts: { token?: string; accept?: string; url?: string } = {}) =>
    ctx.t.request({
      method: 'POST',
      url: opts.url ?? `${ctx.t.fhir}/$viewdefinition-run`,
      token: opts.token ?? ctx.token,
      payload: body,
      headers: opts.accept ? { accept: opts.accept } : {},
    });
  const params = (...parameter: Record<string, unknown>[]) => ({ resourceType: 'Parameters', parameter });

  beforeAll(async () => {
    const entries = ['Ann', 'Bob', 'Cy'].map((given, i) =>
      createEntry(
        { resourceType: 'Patient', name: [{ family, given: [given] }], birthDate: `199${i}-01-0${i + 1}` },
        `urn:uuid:p${i}`,
      ),
    );
    entries.push(
      createEntry({
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'x' },
        subject: { reference: 'urn:uuid:p0' },
        valueQuantity: { value: 1.5 },
      }),
    );
    const res = await postBundle(ctx.t, ctx.token, 'transaction', entries);
    expect(res.statusCode).toBe(200);
    for (const e of (res.json() as { entry: { response: { location: string } }[] }).entry.slice(0, 3))
      ids.push(e.response.location.split('/')[1] as string);
    await new Promise((r) => setTimeout(r, 20));
    afterWrites = new Date().toISOString();
  });

  it('runs an inline view over inline resources, in every format', async () => {
    const body = params(
      { name: 'viewResource', resource: patientView() },
      { name: 'resource', resource: { resourceType: 'Patient', id: 'x1', name: [{ family: 'A,"B"' }] } },
      { name: 'resource', resource: { resourceType: 'Patient', id: 'x2', birthDate: '2000-02-02' } },
      { name: 'resource', resource: { resourceType: 'Observation', id: 'o', status: 'final', code: {} } },
    );
    const ndjson = await run(body);
    expect(ndjson.statusCode, ndjson.body).toBe(200);
    expect(ndjson.headers['content-type']).toContain('application/x-ndjson');
    expect(
      ndjson.body
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual([
      { id: 'x1', family: 'A,"B"', birth: null },
      { id: 'x2', family: null, birth: '2000-02-02' },
    ]);
    const json = await run({
      ...body,
      parameter: [...body.parameter, { name: '_format', valueCode: 'json' }],
    });
    expect(json.json()).toHaveLength(2);
    const csv = await run(body, { accept: 'text/csv' });
    expect(csv.headers['content-type']).toContain('text/csv');
    expect(csv.body).toBe('id,family,birth\r\nx1,"A,""B""",\r\nx2,,2000-02-02\r\n');
    const noHeader = await run({
      ...body,
      parameter: [
        ...body.parameter,
        { name: '_format', valueCode: 'text/csv' },
        { name: 'header', valueBoolean: false },
      ],
    });
    expect(noHeader.body).toBe('x1,"A,""B""",\r\nx2,,2000-02-02\r\n');
  });

  it('keeps decimals as written (1.50 stays 1.50) in every format', async () => {
    const body = JSON.stringify(
      params(
        { name: 'viewResource', resource: obsView },
        {
          name: 'resource',
          resource: {
            resourceType: 'Observation',
            id: 'd',
            status: 'final',
            code: {},
            valueQuantity: { value: 987654321 },
          },
        },
      ),
    ).replace('987654321', '1.50');
    const send = (format: string) =>
      ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/$viewdefinition-run?_format=${format}`,
        token: ctx.token,
        payload: body,
        headers: { 'content-type': 'application/fhir+json' },
      });
    expect((await send('ndjson')).body).toBe('{"id":"d","patient":null,"value":1.50}\n');
    expect((await send('json')).body).toBe('[{"id":"d","patient":null,"value":1.50}]');
    expect((await send('csv')).body).toBe('id,patient,value\r\nd,,1.50\r\n');
  });

  it("runs over the caller's stored data, with patient, _since and _limit", async () => {
    const rows = async (...extra: Record<string, unknown>[]) => {
      const res = await run(
        params(
          { name: 'viewResource', resource: patientView({ where: [{ path: `name.family = '${family}'` }] }) },
          { name: '_format', valueCode: 'json' },
          ...extra,
        ),
      );
      expect(res.statusCode, res.body).toBe(200);
      return { rows: res.json() as { id: string }[], truncated: res.headers['x-truncated'] };
    };
    expect((await rows()).rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    const limited = await rows({ name: '_limit', valueInteger: 2 });
    expect(limited.rows).toHaveLength(2);
    expect(limited.truncated).toBe('true');
    expect((await rows()).truncated).toBeUndefined();
    const one = await rows({ name: 'patient', valueReference: { reference: `Patient/${ids[1]}` } });
    expect(one.rows.map((r) => r.id)).toEqual([ids[1]]);
    const future = await rows({ name: '_since', valueInstant: afterWrites });
    expect(future.rows).toEqual([]);
    // Observations in the first patient's compartment.
    const obs = await run(
      params(
        { name: 'viewResource', resource: obsView },
        { name: 'patient', valueReference: { reference: `Patient/${ids[0]}` } },
      ),
    );
    expect(JSON.parse(obs.body.trim())).toEqual(expect.objectContaining({ patient: ids[0], value: 1.5 }));
    // Another project sees none of these rows.
    const other = (await ctx.t.newProject()).adminToken;
    const theirs = await run(
      params({
        name: 'viewResource',
        resource: patientView({ where: [{ path: `name.family = '${family}'` }] }),
      }),
      { token: other },
    );
    expect(theirs.statusCode).toBe(200);
    expect(theirs.body).toBe('');
  });

  it('runs a stored view by reference, by canonical url, and at instance level', async () => {
    const url = `https://example.org/views/${family}`;
    const stored = await created(ctx.t, ctx.token, {
      ...patientView({ where: [{ path: `name.family = '${family}'` }] }),
      status: 'active',
      name: 'patients',
      url,
    });
    for (const ref of [
      { valueReference: { reference: `ViewDefinition/${stored.id}` } },
      { valueCanonical: url },
    ]) {
      const res = await run(params({ name: 'viewReference', ...ref }));
      expect(res.statusCode, res.body).toBe(200);
      expect(res.body.trim().split('\n')).toHaveLength(3);
    }
    const get = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/ViewDefinition/${stored.id}/$viewdefinition-run?_format=csv`,
      token: ctx.token,
    });
    expect(get.statusCode, get.body).toBe(200);
    expect(get.body.split('\r\n')[0]).toBe('id,family,birth');
    const byQuery = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/$viewdefinition-run?viewReference=${encodeURIComponent(url)}&_limit=1`,
      token: ctx.token,
    });
    expect(byQuery.statusCode).toBe(200);
    expect(byQuery.headers['x-truncated']).toBe('true');
    // Another project cannot use it: 404.
    const other = (await ctx.t.newProject()).adminToken;
    const hidden = await run(
      params({ name: 'viewReference', valueReference: { reference: `ViewDefinition/${stored.id}` } }),
      { token: other },
    );
    expect(hidden.statusCode).toBe(404);
    expect(hidden.json().resourceType).toBe('OperationOutcome');
  });

  it('answers 422 for a view that cannot be processed and 400 for malformed parameters', async () => {
    const unprocessable = [
      patientView({ select: [{ column: [{ name: 'x', path: 'name.nope(' }] }] }),
      patientView({ select: [{ column: [{ name: 'x', path: 'name.unknownFn()' }] }] }),
      patientView({ select: [{ column: [{ name: 'x' }] }] }),
    ];
    for (const view of unprocessable) {
      const res = await run(params({ name: 'viewResource', resource: view }));
      expect(res.statusCode, JSON.stringify(view)).toBe(422);
      expect(res.json().issue[0].code).toBe('processing');
    }
    // A column with several values and no `collection`: 422 naming the column, found while running.
    const multi = await run(
      params(
        {
          name: 'viewResource',
          resource: patientView({ select: [{ column: [{ name: 'given', path: 'name.given' }] }] }),
        },
        { name: 'resource', resource: { resourceType: 'Patient', name: [{ given: ['a', 'b'] }] } },
      ),
    );
    expect(multi.statusCode).toBe(422);
    expect(JSON.stringify(multi.json())).toContain('given');
    const malformed = [
      params(),
      params(
        { name: 'viewResource', resource: patientView() },
        { name: 'viewReference', valueReference: { reference: 'ViewDefinition/x' } },
      ),
      params({ name: 'viewResource', resource: patientView() }, { name: '_format', valueCode: 'xml' }),
      params({ name: 'viewResource', resource: { resourceType: 'Patient' } }),
      params(
        { name: 'viewResource', resource: patientView() },
        ...Array.from({ length: 1001 }, (_, n) => ({
          name: 'patient',
          valueReference: { reference: `Patient/p${n}` },
        })),
      ),
      params({ name: 'viewResource', resource: patientView() }, { name: '_limit', valueInteger: 0 }),
      params(
        { name: 'viewResource', resource: patientView() },
        { name: 'patient', valueReference: { reference: 'Group/1' } },
      ),
    ];
    for (const body of malformed) {
      const res = await run(body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().issue[0].code).toBe('invalid');
    }
  });
});
