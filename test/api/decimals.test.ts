// Decimals keep the text they were sent with (https://hl7.org/fhir/R4/datatypes.html#decimal) through every way a
// resource comes back: create/update/patch answers, read, vread, history, search (matches and _revinclude),
// transaction answers, bulk export NDJSON and $csv cells. Bodies are checked as text, never parsed. Then number and
// quantity search with the implicit precision of the search value (https://hl7.org/fhir/R4/search.html#number).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { jobIdOf, kickOff, waitForJob } from '../support/jobs.js';

const LITERALS = ['1.50', '0.010', '1.0e2', '3.0', '12345678901234567890.12', '1E-7', '-0.0'];

/** An Observation whose decimals are all written in forms JSON.parse would not give back. */
const observationText = (subject: string, code = 'dec'): string =>
  `{"resourceType":"Observation","status":"final","code":{"text":"${code}"},"subject":{"reference":"${subject}"},` +
  `"valueQuantity":{"value":1.50,"unit":"mg","system":"http://unitsofmeasure.org","code":"mg"},` +
  `"component":[{"code":{"text":"c1"},"valueQuantity":{"value":0.010}},{"code":{"text":"c2"},"valueQuantity":{"value":1.0e2}}],` +
  `"referenceRange":[{"low":{"value":3.0},"high":{"value":12345678901234567890.12}}],` +
  `"extension":[{"url":"http://example.org/x","extension":[{"url":"y","valueDecimal":1E-7}]},{"url":"http://example.org/z","valueDecimal":-0.0}]}`;

const expectLiterals = (body: string, literals = LITERALS): void => {
  for (const l of literals)
    expect(body, `${l} in ${body}`).toMatch(new RegExp(`[:\\[,]\\s*${l.replace('.', '\\.')}[,}\\]]`));
};

describe.each(testDatabases())('exact decimals on $name', (database) => {
  let t: TestApp;
  let dir: string;
  let token: string;
  let patientId: string;
  let obsId: string;

  const send = (
    method: 'POST' | 'PUT' | 'PATCH',
    url: string,
    text: string,
    contentType = 'application/fhir+json',
  ) =>
    t.request({
      method,
      url: url ? `${t.fhir}/${url}` : t.fhir,
      token,
      headers: { 'content-type': contentType, prefer: 'return=representation' },
      payload: text,
    });
  const get = (url: string) => t.request({ method: 'GET', url: `${t.fhir}/${url}`, token });

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-decimals-'));
    t = await startTestApp(database, { dataDir: dir }, { jobs: {} });
    token = (await t.newProject()).adminToken;
    const pt = await send('POST', 'Patient', '{"resourceType":"Patient","name":[{"family":"Dec"}]}');
    patientId = pt.json().id as string;
  });
  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers a create, read, vread and history with every decimal as sent', async () => {
    const res = await send('POST', 'Observation', observationText(`Patient/${patientId}`));
    expect(res.statusCode, res.body).toBe(201);
    expectLiterals(res.body);
    obsId = res.json().id as string;
    expectLiterals((await get(`Observation/${obsId}`)).body);
    expectLiterals((await get(`Observation/${obsId}/_history/1`)).body);
    expectLiterals((await get(`Observation/${obsId}/_history`)).body);
    // The numbers themselves are those values (validation and indexing saw JS numbers).
    const parsed = (await get(`Observation/${obsId}`)).json() as { valueQuantity: { value: number } };
    expect(parsed.valueQuantity.value).toBe(1.5);
  });

  it('answers searches (matches and _revinclude) with the stored text', async () => {
    const byCode = await get(`Observation?code:text=dec&subject=Patient/${patientId}`);
    expect(byCode.statusCode).toBe(200);
    expectLiterals(byCode.body);
    const rev = await get(`Patient?_id=${patientId}&_revinclude=Observation:subject`);
    expect(rev.json().entry).toHaveLength(2);
    expectLiterals(rev.body);
    // _elements cuts the resource down and keeps the text of what is left.
    const el = await get(`Observation?_id=${obsId}&_elements=valueQuantity`);
    expect(el.body).toContain('"value":1.50');
    expect(el.body).not.toContain('referenceRange');
  });

  it('keeps texts through PATCH: a patched number as written in the patch, the others unchanged', async () => {
    const patch = (ops: string) => send('PATCH', `Observation/${obsId}`, ops, 'application/json-patch+json');
    const res = await patch('[{"op":"replace","path":"/valueQuantity/value","value":2.50}]');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body).toContain('"value":2.50');
    expectLiterals(res.body, LITERALS.slice(1));
    const added = await patch(
      '[{"op":"add","path":"/component/-","value":{"code":{"text":"c3"},"valueQuantity":{"value":4.20}}}]',
    );
    expect(added.body).toContain('"value":4.20');
    const plain = await patch('[{"op":"replace","path":"/valueQuantity/value","value":7}]');
    expect(plain.body).toContain('"valueQuantity":{"value":7,');
    const read = (await get(`Observation/${obsId}`)).body;
    expect(read).toContain('"valueQuantity":{"value":7,');
    expect(read).toContain('"value":4.20');
    expectLiterals(read, LITERALS.slice(1));
    // Each version keeps its own text.
    expect((await get(`Observation/${obsId}/_history/2`)).body).toContain('"value":2.50');
  });

  it('keeps texts through update and a transaction, and in the transaction answer', async () => {
    const put = await send(
      'PUT',
      `Observation/${obsId}`,
      observationText(`Patient/${patientId}`).replace('{', `{"id":"${obsId}",`),
    );
    expect(put.statusCode, put.body).toBe(200);
    expectLiterals(put.body);
    const bundle =
      `{"resourceType":"Bundle","type":"transaction","entry":[{"fullUrl":"urn:uuid:1",` +
      `"resource":${observationText(`Patient/${patientId}`, 'tx')},"request":{"method":"POST","url":"Observation"}}]}`;
    const res = await send('POST', '', bundle);
    expect(res.statusCode, res.body).toBe(200);
    expectLiterals(res.body);
    const id = (res.json().entry[0].response.location as string).split('/')[1] as string;
    expectLiterals((await get(`Observation/${id}`)).body);
  });

  it('refuses a number too large for a decimal or an integer saying it is out of range, and a fraction as an integer', async () => {
    for (const [element, literal, message] of [
      [
        'valueQuantity',
        '{"value":1e309}',
        'Decimal value out of range: its magnitude exceeds 1.7976931348623157e+308, the largest this server accepts',
      ],
      [
        'valueQuantity',
        '{"value":-2.5E+400}',
        'Decimal value out of range: its magnitude exceeds 1.7976931348623157e+308, the largest this server accepts',
      ],
      ['valueInteger', '1e309', 'Value is out of range for integer (-2147483648 to 2147483647)'],
      ['valueInteger', '2.5', 'Expected integer (a JSON integer), got a number with a fractional part: 2.5'],
    ] as const) {
      const res = await send(
        'POST',
        'Observation',
        `{"resourceType":"Observation","status":"final","code":{"text":"big"},"${element}":${literal}}`,
      );
      expect(res.statusCode, res.body).toBe(400);
      const issue = res.json().issue[0] as { expression?: string[] };
      expect(issue).toMatchObject({ code: 'value', details: { text: message } });
      expect(issue.expression?.[0]).toMatch(new RegExp(`^Observation\\.${element}`));
    }
  });

  it('exports NDJSON lines with the stored text', async () => {
    const job = await waitForJob(t, jobIdOf(await kickOff(t, token, '$export?_type=Observation')), token);
    const url = job.output?.parameter[0]?.part.find((x) => x.name === 'url')?.valueUri as string;
    const res = await t.request({ method: 'GET', url: url.replace('http://cinder.test', ''), token });
    expect(res.statusCode).toBe(200);
    const lines = res.body.trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const line of lines) expectLiterals(line, LITERALS.slice(1));
  });

  it('writes decimal cells of $csv as sent (fast path and FHIRPath engine columns)', async () => {
    const fields =
      'id,value-quantity,valueQuantity.value,component.valueQuantity.value.first(),referenceRange.high';
    const res = await get(`Observation/$csv?_id=${obsId}&_fields=${encodeURIComponent(fields)}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body.split('\r\n')[1]).toBe(`${obsId},1.50 mg,1.50,0.010,12345678901234567890.12`);
  });
});

describe.each(testDatabases())('number and quantity search with implicit precision on $name', (database) => {
  let t: TestApp;
  let token: string;
  const obs = new Map<string, string>(); // id -> value text
  const risk = new Map<string, string>();
  let subject: string;

  const post = async (text: string): Promise<string> => {
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/${JSON.parse(text).resourceType as string}`,
      token,
      headers: { 'content-type': 'application/fhir+json' },
      payload: text,
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  /** The value texts of the matches of `query` (restricted to this suite's resources). */
  const found = async (type: 'Observation' | 'RiskAssessment', query: string): Promise<string[]> => {
    const res = await t.request({
      method: 'GET',
      url: `${t.fhir}/${type}?subject=${subject}&_count=100&${query}`,
      token,
    });
    expect(res.statusCode, res.body).toBe(200);
    const ids = ((res.json().entry ?? []) as { resource: { id: string } }[]).map((e) => e.resource.id);
    const names = type === 'Observation' ? obs : risk;
    return ids.map((id) => names.get(id) as string).sort((a, b) => Number(a) - Number(b));
  };

  beforeAll(async () => {
    t = await startTestApp(database);
    token = (await t.newProject()).adminToken;
    subject = `Patient/${await post('{"resourceType":"Patient"}')}`;
    const values = [
      '1.4499',
      '1.45',
      '1.5',
      '1.50',
      '1.549',
      '1.55',
      '60',
      '100',
      '150',
      '12345678901234567890.12',
      '12345678901234567890.13',
    ];
    for (const v of values)
      obs.set(
        await post(
          `{"resourceType":"Observation","status":"final","code":{"text":"n"},"subject":{"reference":"${subject}"},` +
            `"valueQuantity":{"value":${v},"system":"http://unitsofmeasure.org","code":"mg","unit":"mg"}}`,
        ),
        v,
      );
    for (const v of ['0.25', '0.30', '0.349', '0.35'])
      risk.set(
        await post(
          `{"resourceType":"RiskAssessment","status":"final","subject":{"reference":"${subject}"},"prediction":[{"probabilityDecimal":${v}}]}`,
        ),
        v,
      );
  });
  afterAll(async () => t?.close());

  it('eq: the range of the search value ([1.45, 1.55) for 1.5) contains the stored value', async () => {
    expect(await found('Observation', 'value-quantity=1.5')).toEqual(['1.45', '1.5', '1.50', '1.549']);
    expect(await found('Observation', 'value-quantity=eq1.5|http://unitsofmeasure.org|mg')).toEqual([
      '1.45',
      '1.5',
      '1.50',
      '1.549',
    ]);
    expect(await found('Observation', 'value-quantity=5.4|http://unitsofmeasure.org|mg')).toEqual([]);
    expect(await found('Observation', 'value-quantity=1.50')).toEqual(['1.5', '1.50']);
    expect(await found('Observation', 'value-quantity=1.5|http://unitsofmeasure.org|g')).toEqual([]);
  });

  it('counts significant digits of exponents: 1e2 is [50, 150), 1.00e2 is [99.5, 100.5)', async () => {
    expect(await found('Observation', 'value-quantity=1e2')).toEqual(['60', '100']);
    expect(await found('Observation', 'value-quantity=1.00e2')).toEqual(['100']);
    expect(await found('Observation', 'value-quantity=100')).toEqual(['100']);
  });

  it('stores values exactly: a 22-digit value is told from its neighbour', async () => {
    expect(await found('Observation', 'value-quantity=12345678901234567890.12')).toEqual([
      '12345678901234567890.12',
    ]);
    expect(await found('Observation', 'value-quantity=gt12345678901234567890.12')).toEqual([
      '12345678901234567890.13',
    ]);
    const r = await t.db.query<{ value: string }>(
      `SELECT value::text AS value FROM sp_quantity WHERE resource_type = 'Observation' AND code = 'value-quantity' AND value > 1e19 ORDER BY value`,
    );
    expect(r.rows.map((x) => String(x.value))).toEqual([
      '12345678901234567890.12',
      '12345678901234567890.13',
    ]);
  });

  it('ne is the complement of eq; lt, gt, le, ge compare with the value itself; ap is ±10%', async () => {
    const all = [...obs.values()].sort((a, b) => Number(a) - Number(b));
    const eq = ['1.45', '1.5', '1.50', '1.549'];
    expect(await found('Observation', 'value-quantity=ne1.5')).toEqual(all.filter((v) => !eq.includes(v)));
    expect(await found('Observation', 'value-quantity=lt1.5')).toEqual(['1.4499', '1.45']);
    expect(await found('Observation', 'value-quantity=le1.5')).toEqual(['1.4499', '1.45', '1.5', '1.50']);
    expect(await found('Observation', 'value-quantity=gt1.549')).toEqual(all.slice(all.indexOf('1.55')));
    expect(await found('Observation', 'value-quantity=ge1.549')).toEqual(all.slice(all.indexOf('1.549')));
    expect(await found('Observation', 'value-quantity=ap1.5')).toEqual([
      '1.4499',
      '1.45',
      '1.5',
      '1.50',
      '1.549',
      '1.55',
    ]);
    expect(await found('Observation', 'value-quantity=ap100')).toEqual(['100']);
  });

  it('applies the same rules to a number parameter (RiskAssessment probability)', async () => {
    expect(await found('RiskAssessment', 'probability=0.3')).toEqual(['0.25', '0.30', '0.349']);
    expect(await found('RiskAssessment', 'probability=0.30')).toEqual(['0.30']);
    expect(await found('RiskAssessment', 'probability=ne0.3')).toEqual(['0.35']);
    expect(await found('RiskAssessment', 'probability=gt0.3')).toEqual(['0.349', '0.35']);
    expect(await found('RiskAssessment', 'probability=ap0.3')).toEqual(['0.30']);
    expect(await found('RiskAssessment', 'probability=3.0e-1')).toEqual(['0.30']);
  });
});
