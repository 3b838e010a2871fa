// FHIRPath Patch over HTTP (API.md §11, https://hl7.org/fhir/R4/fhirpatch.html): PATCH with a Parameters body at
// instance level, conditionally, in batch and transaction entries; its errors; access as for JSON Patch; and hostile
// input (deep, huge, invalid or costly FHIRPath) answered 4xx with an OperationOutcome by a server that stays up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, postBundle, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';

type Json = Record<string, unknown>;
const op = (type: string, path: string, more: Json[] = []): Json => ({
  name: 'operation',
  part: [{ name: 'type', valueCode: type }, { name: 'path', valueString: path }, ...more],
});
const params = (...ops: Json[]): Json => ({ resourceType: 'Parameters', parameter: ops });
const SYS = 'https://example.org/fp-mrn';

describe.each(testDatabases())('FHIRPath Patch on $name', (database) => {
  let t: TestApp;
  let token: string;
  let otherToken: string;
  let readOnly: string;
  let obsOnly: string;

  const patch = (url: string, body: unknown, tok = token, headers: Record<string, string> = {}) =>
    t.request({
      method: 'PATCH',
      url: `${t.fhir}/${url}`,
      token: tok,
      headers: { 'content-type': 'application/fhir+json', ...headers },
      payload: typeof body === 'string' ? body : JSON.stringify(body),
    });
  const read = async (url: string, tok = token): Promise<Json> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/${url}`, token: tok });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Json;
  };
  const outcome = (res: { statusCode: number; json(): Json }, status: number, code?: string): Json => {
    expect(res.statusCode).toBe(status);
    const body = res.json();
    expect(body.resourceType).toBe('OperationOutcome');
    const issue = (body.issue as Json[])[0] as Json;
    if (code) expect(issue.code).toBe(code);
    return issue;
  };
  const patient = (mrn: string, extra: Json = {}): Promise<Json> =>
    created(t, token, {
      resourceType: 'Patient',
      identifier: [{ system: SYS, value: mrn }],
      name: [{ family: 'Chalmers', given: ['Peter', 'James'] }],
      birthDate: '1974-12-25',
      ...extra,
    });

  beforeAll(async () => {
    // A short FHIRPath deadline keeps the costly-path case fast; the warm-up patch below loads the worker's model.
    t = await startTestApp(database, { fhirpathTimeout: 4000 });
    const p = await t.newProject('FHIRPath Patch');
    token = p.adminToken;
    otherToken = (await t.newProject('FHIRPath Patch other')).adminToken;
    readOnly = await scopedClientToken(t, token, p.projectId, 'system/Patient.rs');
    obsOnly = await scopedClientToken(t, token, p.projectId, 'system/Observation.cruds');
    const warm = await patient('warm-up');
    const res = await patch(`Patient/${String(warm.id)}`, params(op('delete', 'Patient.birthDate')));
    expect(res.statusCode, res.body).toBe(200);
  });
  afterAll(async () => t?.close());

  it('applies add, insert, delete, replace and move to an instance, in order, as a new version', async () => {
    const p = await patient('fp-1', {
      _birthDate: { extension: [{ url: 'http://example.org/x', valueString: 'y' }] },
    });
    const res = await patch(
      `Patient/${String(p.id)}`,
      params(
        op('replace', 'Patient.name[0].family', [{ name: 'value', valueString: 'Chalmers1' }]),
        op('add', 'Patient', [
          { name: 'name', valueString: 'gender' },
          { name: 'value', valueCode: 'male' },
        ]),
        op('insert', 'Patient.name[0].given', [
          { name: 'value', valueString: 'Jim' },
          { name: 'index', valueInteger: 0 },
        ]),
        op('move', 'Patient.name[0].given', [
          { name: 'source', valueInteger: 0 },
          { name: 'destination', valueInteger: 2 },
        ]),
        op('delete', 'Patient.birthDate.extension'),
        op('add', 'Patient', [
          { name: 'name', valueString: 'contact' },
          {
            name: 'value',
            part: [
              { name: 'name', valueHumanName: { text: 'Ann' } },
              { name: 'gender', valueCode: 'female' },
            ],
          },
        ]),
        op('add', 'Patient', [
          { name: 'name', valueString: 'multipleBirth' },
          { name: 'value', valueInteger: 2 },
        ]),
      ),
    );
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers.etag).toBe('W/"2"');
    const stored = await read(`Patient/${String(p.id)}`);
    expect(stored).toMatchObject({
      id: p.id,
      meta: { versionId: '2' },
      name: [{ family: 'Chalmers1', given: ['Peter', 'James', 'Jim'] }],
      gender: 'male',
      birthDate: '1974-12-25',
      contact: [{ name: { text: 'Ann' }, gender: 'female' }],
      multipleBirthInteger: 2,
    });
    expect(stored._birthDate).toBeUndefined();
    expect(res.json()).toEqual(stored);
    // JSON Patch is unchanged beside it.
    const json = await t.request({
      method: 'PATCH',
      url: `${t.fhir}/Patient/${String(p.id)}`,
      token,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: [{ op: 'replace', path: '/gender', value: 'female' }],
    });
    expect(json.statusCode, json.body).toBe(200);
    expect(json.json()).toMatchObject({ gender: 'female', meta: { versionId: '3' } });
    // The CapabilityStatement names both formats (FHIRPath Patch's Parameters also as XML, test/api/xml.test.ts).
    const meta = await read('metadata');
    expect((meta.patchFormat as string[]).sort()).toEqual([
      'application/fhir+json',
      'application/fhir+xml',
      'application/json-patch+json',
    ]);
  });

  it('keeps decimals as written, honours If-Match, and patches conditionally', async () => {
    const obs = await created(t, token, {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'weight' },
      valueString: 'heavy',
    });
    const body =
      '{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"replace"},' +
      '{"name":"path","valueString":"Observation.value"},{"name":"value","valueQuantity":{"value":70.50,"unit":"kg"}}]}]}';
    const stale = await patch(`Observation/${String(obs.id)}`, body, token, { 'if-match': 'W/"9"' });
    outcome(stale, 412, 'conflict');
    const res = await patch(`Observation/${String(obs.id)}`, body, token, { 'if-match': 'W/"1"' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toContain('"valueQuantity":{"value":70.50,"unit":"kg"}');
    expect(res.body).not.toContain('valueString');

    const p = await patient('fp-cond');
    const cond = await patch(
      `Patient?identifier=${encodeURIComponent(`${SYS}|fp-cond`)}`,
      params(op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '1980-01-01' }])),
    );
    expect(cond.statusCode, cond.body).toBe(200);
    expect((await read(`Patient/${String(p.id)}`)).birthDate).toBe('1980-01-01');
    const none = await patch(
      `Patient?identifier=${encodeURIComponent(`${SYS}|no-such`)}`,
      params(op('delete', 'Patient.birthDate')),
    );
    outcome(none, 404, 'not-found');
  });

  it('in batch and transaction entries, with the Parameters as the resource', async () => {
    const a = await patient('fp-batch-a');
    const b = await patient('fp-batch-b');
    const batch = await postBundle(t, token, 'batch', [
      {
        resource: params(op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '1990-01-01' }])),
        request: { method: 'PATCH', url: `Patient/${String(a.id)}` },
      },
      {
        resource: params(op('replace', 'Patient.deceased', [{ name: 'value', valueBoolean: true }])),
        request: { method: 'PATCH', url: `Patient/${String(b.id)}` },
      },
      {
        // JSON Patch as a Binary, as before.
        resource: {
          resourceType: 'Binary',
          contentType: 'application/json-patch+json',
          data: Buffer.from(JSON.stringify([{ op: 'add', path: '/gender', value: 'other' }])).toString(
            'base64',
          ),
        },
        request: { method: 'PATCH', url: `Patient/${String(b.id)}` },
      },
      {
        // Conditionally: the entry's url is a search.
        resource: params(
          op('add', 'Patient', [
            { name: 'name', valueString: 'active' },
            { name: 'value', valueBoolean: true },
          ]),
        ),
        request: { method: 'PATCH', url: `Patient?identifier=${encodeURIComponent(`${SYS}|fp-batch-a`)}` },
      },
    ]);
    expect(batch.statusCode, batch.body).toBe(200);
    const statuses = (batch.json().entry as { response: { status: string; outcome?: Json } }[]).map(
      (e) => e.response,
    );
    expect(statuses.map((s) => s.status)).toEqual(['200 OK', '422 Unprocessable Entity', '200 OK', '200 OK']);
    expect(JSON.stringify(statuses[1]?.outcome)).toContain('No content found at Patient.deceased');
    expect(await read(`Patient/${String(a.id)}`)).toMatchObject({ birthDate: '1990-01-01', active: true });
    expect((await read(`Patient/${String(b.id)}`)).gender).toBe('other');

    const obs = await created(t, token, {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'x' },
    });
    const tx = await postBundle(t, token, 'transaction', [
      {
        fullUrl: 'urn:uuid:0b6c3f0e-8f5a-4f43-9a57-1a7e6a3cf001',
        resource: { resourceType: 'Patient', name: [{ family: 'New' }] },
        request: { method: 'POST', url: 'Patient' },
      },
      {
        resource: params(
          op('add', 'Observation', [
            { name: 'name', valueString: 'subject' },
            { name: 'value', valueReference: { reference: 'urn:uuid:0b6c3f0e-8f5a-4f43-9a57-1a7e6a3cf001' } },
          ]),
        ),
        request: { method: 'PATCH', url: `Observation/${String(obs.id)}` },
      },
    ]);
    expect(tx.statusCode, tx.body).toBe(200);
    const newId = /^Patient\/([^/]+)/.exec(
      ((tx.json().entry as Json[])[0] as { response: { location: string } }).response.location,
    )?.[1];
    expect((await read(`Observation/${String(obs.id)}`)).subject).toEqual({ reference: `Patient/${newId}` });

    // A failing patch fails the whole transaction: nothing of it is stored.
    const failing = await postBundle(t, token, 'transaction', [
      {
        resource: params(op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '2000-01-01' }])),
        request: { method: 'PATCH', url: `Patient/${String(a.id)}` },
      },
      {
        resource: params(op('replace', 'Patient.name.given', [{ name: 'value', valueString: 'x' }])),
        request: { method: 'PATCH', url: `Patient/${String(b.id)}` },
      },
    ]);
    outcome(failing, 422, 'processing');
    expect((await read(`Patient/${String(a.id)}`)).birthDate).toBe('1990-01-01');
  });

  it('errors: 400 for malformed patches and paths, 422 for paths that do not apply, 400 for an invalid result', async () => {
    const p = await patient('fp-err');
    const url = `Patient/${String(p.id)}`;
    const replace = (path: string, value: Json) => params(op('replace', path, [{ name: 'value', ...value }]));
    outcome(await patch(url, params(op('frobnicate', 'Patient'))), 400, 'invalid');
    outcome(await patch(url, params({ name: 'not-an-operation' })), 400, 'invalid');
    outcome(await patch(url, replace('Patient.name[', { valueString: 'x' })), 400, 'invalid');
    outcome(await patch(url, replace('Patient.name.nosuch()', { valueString: 'x' })), 400, 'invalid');
    const several = outcome(
      await patch(url, replace('Patient.name.given', { valueString: 'x' })),
      422,
      'processing',
    );
    expect(JSON.stringify(several)).toContain('selects 2 elements');
    outcome(await patch(url, replace("'a literal'", { valueString: 'x' })), 422, 'processing');
    outcome(await patch(url, replace('Patient.gender', { valueCode: 'male' })), 422, 'processing');
    // The result is validated as an update is.
    outcome(await patch(url, replace('Patient.birthDate', { valueString: 'not a date' })), 400);
    const id = outcome(await patch(url, replace('Patient.id', { valueId: 'another-id' })), 400, 'invalid');
    expect(JSON.stringify(id)).toContain('must not change resourceType or id');
    outcome(await patch(url, { resourceType: 'Patient' }), 400, 'invalid');
    // Nothing changed.
    expect(await read(url)).toMatchObject({ meta: { versionId: '1' }, birthDate: '1974-12-25' });
  });

  it('access as for JSON Patch: another project sees 404, narrow scopes 403, nothing changes', async () => {
    const p = await patient('fp-access');
    const url = `Patient/${String(p.id)}`;
    const body = params(op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '2001-01-01' }]));
    outcome(await patch(url, body, otherToken), 404, 'not-found');
    const cross = await postBundle(t, otherToken, 'batch', [
      { resource: body, request: { method: 'PATCH', url } },
    ]);
    expect((cross.json().entry as { response: { status: string } }[])[0]?.response.status).toMatch(/^404/);
    const condOther = await patch(
      `Patient?identifier=${encodeURIComponent(`${SYS}|fp-access`)}`,
      body,
      otherToken,
    );
    outcome(condOther, 404, 'not-found');
    outcome(await patch(url, body, readOnly), 403, 'forbidden');
    outcome(await patch(url, body, obsOnly), 403, 'forbidden');
    expect(await read(url)).toMatchObject({ meta: { versionId: '1' }, birthDate: '1974-12-25' });
  });

  it('hostile input: deep, huge, and costly patches answer 4xx and the server goes on', async () => {
    const p = await patient('fp-hostile', {
      identifier: Array.from({ length: 300 }, (_, i) => ({ system: SYS, value: `fp-hostile-${i}` })),
    });
    const url = `Patient/${String(p.id)}`;
    // Parts nested deeper than a body may be (text: the client would not serialise it).
    const deep = `${'{"name":"x","part":['.repeat(400)}{}${']}'.repeat(400)}`;
    const deepBody = `{"resourceType":"Parameters","parameter":[{"name":"operation","part":[{"name":"type","valueCode":"add"},{"name":"path","valueString":"Patient"},{"name":"name","valueString":"contact"},{"name":"value","part":[${deep}]}]}]}`;
    outcome(await patch(url, deepBody), 400);
    // Deep but within the body's bound: Questionnaire items nested in parts, valid at each level, make a result
    // deeper than a resource may nest.
    const q = await created(t, token, { resourceType: 'Questionnaire', status: 'draft' });
    const item = (n: number): Json[] => [
      { name: 'linkId', valueString: `l${n}` },
      { name: 'type', valueCode: 'group' },
      ...(n > 0 ? [{ name: 'item', part: item(n - 1) }] : []),
    ];
    const addItems = (n: number) =>
      patch(
        `Questionnaire/${String(q.id)}`,
        params(
          op('add', 'Questionnaire', [
            { name: 'name', valueString: 'item' },
            { name: 'value', part: item(n) },
          ]),
        ),
      );
    const tooDeep = outcome(await addItems(70), 400, 'structure');
    expect(JSON.stringify(tooDeep)).toContain('nests deeper than');
    expect((await addItems(3)).statusCode).toBe(200);
    // Too many operations.
    const many = params(...Array.from({ length: 1001 }, () => op('delete', 'Patient.gender')));
    outcome(await patch(url, many), 413, 'too-long');
    // A path whose evaluation explodes (300³ nodes): stopped at the deadline or the worker's memory limit.
    const costly =
      "Patient.identifier.select(%resource.identifier.select(%resource.identifier)).where(value = 'none')";
    const slow = outcome(await patch(url, params(op('delete', costly))), 422, 'too-costly');
    expect(JSON.stringify(slow)).toContain('FHIRPath Patch is too costly');
    // The server (and a new worker) go on.
    const after = await patch(
      url,
      params(op('replace', 'Patient.birthDate', [{ name: 'value', valueDate: '1975-01-01' }])),
    );
    expect(after.statusCode, after.body).toBe(200);
    expect(after.json()).toMatchObject({ meta: { versionId: '2' }, birthDate: '1975-01-01' });
  });
});
