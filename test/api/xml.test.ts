// FHIR XML over HTTP (API.md §11 "XML", https://hl7.org/fhir/R4/xml.html): XML bodies accepted wherever JSON is, XML
// answers for Accept/_format (resources, Bundles, OperationOutcomes, the CapabilityStatement), the same content as
// JSON (decimals exact), and hostile XML refused with an OperationOutcome.
import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { fromXml, toXml } from '../../src/fhir/xml/index.js';
import { stringifyJson } from '../../src/fhir/json/stringify.js';
import { XML_INLINE_CHARS } from '../../src/http/plugins/content-types.js';
import { testDatabases } from '../support/db.js';
import { auditEvents, created, scopedClientToken, useProjectApp, type TestApp } from '../support/app.js';

const XML = 'application/fhir+xml';
const F = 'xmlns="http://hl7.org/fhir"';

const OBSERVATION_XML = `<?xml version="1.0" encoding="UTF-8"?>
<Observation ${F}>
  <text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml"><p>Weight 70.50 kg</p></div></text>
  <status value="final"/>
  <code><coding><system value="http://loinc.org"/><code value="29463-7"/></coding><text value="Weight"/></code>
  <valueQuantity><value value="70.50"/><unit value="kg"/></valueQuantity>
  <note><text value="first line&#10;second line"/></note>
</Observation>`;

const OBSERVATION_JSON =
  '{"resourceType":"Observation","text":{"status":"generated","div":"<div xmlns=\\"http://www.w3.org/1999/xhtml\\"><p>Weight 70.50 kg</p></div>"},' +
  '"status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}],"text":"Weight"},' +
  '"valueQuantity":{"value":70.50,"unit":"kg"},"note":[{"text":"first line\\nsecond line"}]}';

/** The body of an XML answer as JSON (through fromXml), after checking its Content-Type. */
function xmlBody(res: LightMyRequestResponse): Record<string, unknown> {
  expect(res.headers['content-type'], res.body).toMatch(/^application\/fhir\+xml/);
  expect(res.body.startsWith('<?xml')).toBe(true);
  return fromXml(res.body);
}

/** An XML OperationOutcome's status, first issue code and text. */
function xmlOutcome(res: LightMyRequestResponse): [number, string, string] {
  const oo = xmlBody(res) as { resourceType: string; issue: { code: string; details?: { text?: string } }[] };
  expect(oo.resourceType).toBe('OperationOutcome');
  return [res.statusCode, oo.issue[0]?.code ?? '', oo.issue[0]?.details?.text ?? ''];
}

const withoutMeta = (r: Record<string, unknown>): Record<string, unknown> => {
  const { id: _id, meta: _meta, ...rest } = r;
  return rest;
};

describe.each(testDatabases())('FHIR XML on $name', (database) => {
  const ctx = useProjectApp(database);
  let t: TestApp;
  let token: string;
  const req = (
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    path: string,
    opts: {
      body?: string;
      type?: string;
      accept?: string;
      tok?: string | null;
      headers?: Record<string, string>;
    } = {},
  ): Promise<LightMyRequestResponse> =>
    t.request({
      method,
      url: `${t.fhir}/${path}`,
      token: opts.tok === undefined ? token : opts.tok,
      headers: {
        ...(opts.body !== undefined ? { 'content-type': opts.type ?? XML } : {}),
        ...(opts.accept ? { accept: opts.accept } : {}),
        ...opts.headers,
      },
      ...(opts.body !== undefined ? { payload: opts.body } : {}),
    });

  beforeAll(() => {
    t = ctx.t;
    token = ctx.token;
  });

  it('stores a resource written as XML exactly as the same resource written as JSON (decimals exact)', async () => {
    const fromXmlBody = await req('POST', 'Observation', { body: OBSERVATION_XML });
    expect(fromXmlBody.statusCode, fromXmlBody.body).toBe(201);
    // JSON stays the default answer.
    expect(fromXmlBody.headers['content-type']).toMatch(/^application\/fhir\+json/);
    const fromJsonBody = await req('POST', 'Observation', {
      body: OBSERVATION_JSON,
      type: 'application/fhir+json',
    });
    expect(fromJsonBody.statusCode).toBe(201);
    const a = await req('GET', `Observation/${fromXmlBody.json().id as string}`);
    const b = await req('GET', `Observation/${fromJsonBody.json().id as string}`);
    expect(a.body).toContain('"value":70.50');
    expect(withoutMeta(a.json())).toEqual(withoutMeta(b.json()));
    expect(a.body.replace(/"id":"[^"]+"|"meta":\{[^}]+\}/g, '')).toBe(
      b.body.replace(/"id":"[^"]+"|"meta":\{[^}]+\}/g, ''),
    );

    // Read back as XML: the decimal as written, the narrative as XHTML, the same content as the JSON.
    const asXml = await req('GET', `Observation/${fromXmlBody.json().id as string}`, { accept: XML });
    expect(asXml.statusCode).toBe(200);
    expect(asXml.body).toContain('<value value="70.50"/>');
    expect(asXml.body).toContain('<div xmlns="http://www.w3.org/1999/xhtml"><p>Weight 70.50 kg</p></div>');
    expect(asXml.headers.etag).toBe(a.headers.etag);
    expect(String(asXml.headers.vary)).toMatch(/Accept/);
    const back = xmlBody(asXml);
    expect(back).toEqual(a.json());
    expect(stringifyJson(back)).toContain('"value":70.50');
  });

  it('answers XML for Accept and _format, JSON by default and when _format=json', async () => {
    const p = await created(t, token, {
      resourceType: 'Patient',
      name: [{ family: 'Format', given: ['A', 'B'] }],
    });
    const path = `Patient/${p.id as string}`;
    for (const [query, accept] of [
      ['', XML],
      ['', 'application/xml'],
      ['', 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'],
      ['?_format=xml', undefined],
      ['?_format=application/fhir%2Bxml', undefined],
      ['?_format=application/fhir+xml', undefined],
      ['?_format=text/xml', 'application/fhir+json'],
    ] as const) {
      const res = await req('GET', `${path}${query}`, accept ? { accept } : {});
      expect(res.statusCode).toBe(200);
      expect(xmlBody(res)).toMatchObject({
        resourceType: 'Patient',
        name: [{ family: 'Format', given: ['A', 'B'] }],
      });
    }
    for (const [query, accept] of [
      ['', undefined],
      ['', '*/*'],
      ['', 'application/fhir+json, application/fhir+xml;q=0.5'],
      ['?_format=json', XML],
      ['?_format=application/fhir%2Bjson', XML],
    ] as const) {
      const res = await req('GET', `${path}${query}`, accept ? { accept } : {});
      expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
      expect(res.json().name[0].family).toBe('Format');
    }
  });

  it('answers searches, history and the CapabilityStatement in XML', async () => {
    const p = await created(t, token, { resourceType: 'Patient', name: [{ family: 'Searchable' }] });
    const search = xmlBody(await req('GET', 'Patient?family=Searchable', { accept: XML })) as {
      type: string;
      total: number;
      entry: { resource: { id: string } }[];
    };
    expect(search).toMatchObject({ resourceType: 'Bundle', type: 'searchset', total: 1 });
    expect(search.entry[0]?.resource.id).toBe(p.id);
    const hist = xmlBody(await req('GET', `Patient/${p.id as string}/_history?_format=xml`)) as {
      type: string;
      entry: unknown[];
    };
    expect([hist.type, hist.entry.length]).toEqual(['history', 1]);
    // Cinder's own resource types (Medplum's definitions) carry every element through XML too.
    for (const type of ['Project', 'ProjectMembership', 'ClientApplication']) {
      const json = await req('GET', type);
      const xml = await req('GET', type, { accept: XML });
      expect((json.json() as { total: number }).total).toBeGreaterThan(0);
      // Each search answer has its own Bundle id.
      expect({ ...xmlBody(xml), id: 'b' }).toEqual({ ...json.json(), id: 'b' });
    }
    const meta = await t.request({ method: 'GET', url: `${t.fhir}/metadata`, headers: { accept: XML } });
    const statement = xmlBody(meta) as { resourceType: string; format: string[]; fhirVersion: string };
    expect(statement.resourceType).toBe('CapabilityStatement');
    expect(statement.format).toEqual(expect.arrayContaining(['json', 'xml', XML]));
    expect(statement.fhirVersion).toBe('4.0.1');
  });

  it('takes XML for update, conditional create, transaction and batch, and answers them in XML', async () => {
    const p = await created(t, token, { resourceType: 'Patient', name: [{ family: 'Before' }] });
    const put = await req('PUT', `Patient/${p.id as string}`, {
      body: `<Patient ${F}><id value="${p.id as string}"/><name><family value="After"/></name><birthDate value="1970-01-01"/></Patient>`,
      accept: XML,
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(xmlBody(put)).toMatchObject({
      name: [{ family: 'After' }],
      birthDate: '1970-01-01',
      meta: { versionId: '2' },
    });

    const conditional = `<Patient ${F}><identifier><system value="http://x"/><value value="cond-1"/></identifier></Patient>`;
    const first = await req('POST', 'Patient', {
      body: conditional,
      headers: { 'if-none-exist': 'identifier=http://x|cond-1' },
    });
    const second = await req('POST', 'Patient', {
      body: conditional,
      headers: { 'if-none-exist': 'identifier=http://x|cond-1' },
    });
    expect([first.statusCode, second.statusCode]).toEqual([201, 200]);

    const transaction = `<Bundle ${F}><type value="transaction"/>
      <entry><fullUrl value="urn:uuid:6f1c7d1e-0000-4000-8000-0000000000a1"/>
        <resource><Patient><name><family value="InTransaction"/></name></Patient></resource>
        <request><method value="POST"/><url value="Patient"/></request></entry>
      <entry><resource><Observation><status value="final"/><code><text value="t"/></code>
        <subject><reference value="urn:uuid:6f1c7d1e-0000-4000-8000-0000000000a1"/></subject>
        <valueQuantity><value value="1.50"/></valueQuantity></Observation></resource>
        <request><method value="POST"/><url value="Observation"/></request></entry></Bundle>`;
    const tx = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      headers: { 'content-type': XML, accept: XML },
      payload: transaction,
    });
    expect(tx.statusCode, tx.body).toBe(200);
    const txBody = xmlBody(tx) as {
      type: string;
      entry: { response: { status: string; location: string } }[];
    };
    expect(txBody.type).toBe('transaction-response');
    expect(txBody.entry.map((e) => e.response.status)).toEqual(['201 Created', '201 Created']);
    const obs = await req('GET', txBody.entry[1]?.response.location as string);
    const patientId = (txBody.entry[0]?.response.location as string).split('/')[1];
    expect(obs.json().subject.reference).toBe(`Patient/${patientId}`);
    expect(obs.body).toContain('"value":1.50');

    const batch = `<Bundle ${F}><type value="batch"/>
      <entry><request><method value="GET"/><url value="Patient/${p.id as string}"/></request></entry>
      <entry><request><method value="GET"/><url value="Patient/does-not-exist"/></request></entry></Bundle>`;
    const b = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      headers: { 'content-type': 'text/xml', accept: XML },
      payload: batch,
    });
    const bBody = xmlBody(b) as { type: string; entry: { response: { status: string } }[] };
    expect(bBody.type).toBe('batch-response');
    expect(bBody.entry.map((e) => e.response.status.slice(0, 3))).toEqual(['200', '404']);

    // $validate of an XML resource and of XML Parameters holding it: the same issues as for JSON.
    const invalidPatient = `<Patient ${F}><gender value="x-unknown"/><birthDate value="not-a-date"/></Patient>`;
    for (const body of [
      invalidPatient,
      `<Parameters ${F}><parameter><name value="resource"/><resource>${invalidPatient.replace(` ${F}`, '')}</resource></parameter></Parameters>`,
    ]) {
      const validate = await req('POST', 'Patient/$validate', { body, accept: XML });
      expect(validate.statusCode, validate.body).toBe(200);
      const oo = xmlBody(validate) as { issue: { severity: string; expression?: string[] }[] };
      expect(oo.issue.every((i) => i.severity === 'error')).toBe(true);
      expect(oo.issue.flatMap((i) => i.expression ?? [])).toContain('Patient.birthDate');
    }
  });

  it('applies a FHIRPath Patch written as XML Parameters', async () => {
    const p = await created(t, token, {
      resourceType: 'Patient',
      name: [{ family: 'Unpatched' }],
      active: false,
    });
    const patch = `<Parameters ${F}><parameter><name value="operation"/>
      <part><name value="type"/><valueCode value="replace"/></part>
      <part><name value="path"/><valueString value="Patient.active"/></part>
      <part><name value="value"/><valueBoolean value="true"/></part></parameter></Parameters>`;
    const res = await t.request({
      method: 'PATCH',
      url: `${t.fhir}/Patient/${p.id as string}`,
      token,
      headers: { 'content-type': XML, accept: XML },
      payload: patch,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(xmlBody(res)).toMatchObject({
      active: true,
      name: [{ family: 'Unpatched' }],
      meta: { versionId: '2' },
    });
  });

  it('records in the audit trail the patients an XML answer held', async () => {
    const p = await created(t, token, { resourceType: 'Patient', name: [{ family: 'AuditedXml' }] });
    await created(t, token, {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'xml-audit' },
      subject: { reference: `Patient/${p.id as string}` },
    });
    const res = await req('GET', 'Observation?code:text=xml-audit', { accept: XML });
    expect(xmlBody(res)).toMatchObject({ total: 1 });
    const events = await auditEvents(t, token, `subtype=search&patient=Patient/${p.id as string}`);
    expect(events.length).toBeGreaterThan(0);
  });

  it('honours Prefer: return=OperationOutcome and answers errors (401, 403, 404, 415) in XML', async () => {
    const create = await req('POST', 'Patient', {
      body: `<Patient ${F}><active value="true"/></Patient>`,
      accept: XML,
      headers: { prefer: 'return=OperationOutcome' },
    });
    expect(create.statusCode).toBe(201);
    expect(xmlOutcome(create)).toEqual([201, 'informational', expect.stringMatching(/^Created Patient\//)]);
    expect(xmlOutcome(await req('GET', 'Patient/nope', { accept: XML }))[0]).toBe(404);
    expect(xmlOutcome(await req('GET', 'Patient', { accept: XML, tok: null }))[0]).toBe(401);
    // Outside the FHIR API (OAuth, admin), answers stay JSON.
    const admin = await t.request({ method: 'GET', url: '/admin/nothing-here', headers: { accept: XML } });
    expect([admin.statusCode, admin.headers['content-type']]).toEqual([404, expect.stringMatching(/json/)]);
    const [s415, c415] = xmlOutcome(
      await req('POST', 'Patient', { body: 'x', type: 'text/plain', accept: XML }),
    );
    expect([s415, c415]).toEqual([415, 'not-supported']);
    const project = await t.newProject();
    const scoped = await scopedClientToken(t, project.adminToken, project.projectId, 'system/Patient.rs');
    const write = await req('POST', 'Patient', {
      body: `<Patient ${F}><active value="true"/></Patient>`,
      accept: XML,
      tok: scoped,
    });
    expect(xmlOutcome(write)[0]).toBe(403);
    // Reading stays allowed to that token, in XML too.
    expect((await req('GET', 'Patient?_count=1', { accept: XML, tok: scoped })).statusCode).toBe(200);
  });

  it("keeps another project's resources invisible and untouched through XML", async () => {
    const other = await t.newProject();
    const theirs = await created(t, other.adminToken, {
      resourceType: 'Patient',
      name: [{ family: 'Theirs' }],
    });
    const path = `Patient/${theirs.id as string}`;
    expect(xmlOutcome(await req('GET', path, { accept: XML }))[0]).toBe(404);
    const put = await req('PUT', path, {
      body: `<Patient ${F}><id value="${theirs.id as string}"/><name><family value="Hijacked"/></name></Patient>`,
      accept: XML,
    });
    expect(xmlOutcome(put)[0]).toBe(404);
    const search = xmlBody(await req('GET', 'Patient?family=Theirs', { accept: XML })) as { total?: number };
    expect(search.total).toBe(0);
    const still = await req('GET', path, { tok: other.adminToken });
    expect(still.json().name[0].family).toBe('Theirs');
  });

  it('refuses hostile XML with a 400 OperationOutcome and stores nothing', async () => {
    const before = (await req('GET', 'Patient?_summary=count')).json().total as number;
    const xxe = await req('POST', 'Patient', {
      body: `<?xml version="1.0"?><!DOCTYPE p [<!ENTITY x SYSTEM "file:///etc/passwd">]><Patient ${F}><name><family value="&x;"/></name></Patient>`,
      accept: XML,
    });
    const [s1, , text1] = xmlOutcome(xxe);
    expect(s1).toBe(400);
    expect(text1).toMatch(/DOCTYPE/);
    expect(xxe.body).not.toMatch(/root:/);
    const laughs =
      '<!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>';
    expect(
      (
        await req('POST', 'Patient', {
          body: `${laughs}<Patient ${F}><name><family value="&c;"/></name></Patient>`,
        })
      ).statusCode,
    ).toBe(400);
    const deep = `<Patient ${F}>${'<extension url="http://x">'.repeat(5000)}${'</extension>'.repeat(5000)}</Patient>`;
    const [s3, , text3] = xmlOutcome(await req('POST', 'Patient', { body: deep, accept: XML }));
    expect([s3, text3]).toEqual([400, expect.stringMatching(/deeper/)]);
    const unknown = await req('POST', 'Patient', { body: `<Patient ${F}><nickname value="x"/></Patient>` });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().issue[0]).toMatchObject({ code: 'structure', expression: ['Patient.nickname'] });
    expect(unknown.json().issue[0].details.text).toMatch(/Unknown element 'nickname'/);
    for (const body of [
      '<Patient xmlns="http://example.org/not-fhir"><active value="true"/></Patient>',
      `<Patient ${F}><active value="true"></Patient>`,
      `<Patient ${F}><active value="yes"/></Patient>`,
      '<Patient><active value="true"/></Patient>',
      `<NotAType ${F}/>`,
    ]) {
      const res = await req('POST', 'Patient', { body });
      expect(res.statusCode, body).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const huge = `<Patient ${F}><name>${'<given value="xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"/>'.repeat(Math.ceil(t.config.maxBodySize / 30))}</name></Patient>`;
    const tooBig = await req('POST', 'Patient', { body: huge, accept: XML });
    expect(xmlOutcome(tooBig)[0]).toBe(413);
    expect((await req('GET', 'Patient?_summary=count')).json().total).toBe(before);
    // The server is still answering.
    expect((await req('GET', 'Patient?_count=1')).statusCode).toBe(200);
  });

  it('reads a large XML body off the event loop, with the same result and the same refusals', async () => {
    // Beyond XML_INLINE_CHARS the body is read by a worker thread: decimals still keep their text.
    const entries = Array.from(
      { length: 400 },
      (_, i) =>
        `<entry><resource>${OBSERVATION_XML.replace(/^<\?xml[^>]*>\s*/, '').replace('<value value="70.50"/>', `<value value="70.5${i}0"/>`)}</resource>` +
        '<request><method value="POST"/><url value="Observation"/></request></entry>',
    ).join('');
    const bundle = `<Bundle ${F}><type value="transaction"/>${entries}</Bundle>`;
    expect(bundle.length).toBeGreaterThan(XML_INLINE_CHARS);
    const tx = await req('POST', '', { body: bundle });
    expect(tx.statusCode, tx.body).toBe(200);
    const location = tx.json().entry[7].response.location as string;
    const stored = await req('GET', location.split('/_history')[0] as string);
    expect(stored.body).toContain('"value":70.570');
    // A large body with an unknown element at its very end answers as a small one does.
    const bad = `<Bundle ${F}><type value="transaction"/>${entries}<nickname value="x"/></Bundle>`;
    const res = await req('POST', '', { body: bad });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().issue[0].details.text).toMatch(/Unknown element 'nickname'/);
    const broken = await req('POST', '', { body: bundle.slice(0, -3) });
    expect(broken.statusCode, broken.body).toBe(400);
  });

  it('keeps non-FHIR answers as they are: raw Binary content for application/xml', async () => {
    const doc = '<note><to>x</to></note>';
    const bin = await req('POST', 'Binary', { body: doc, type: 'application/xml' });
    expect(bin.statusCode, bin.body).toBe(201);
    const id = bin.json().id as string;
    const raw = await req('GET', `Binary/${id}`, { accept: 'application/xml' });
    expect([raw.headers['content-type'], raw.body]).toEqual([
      expect.stringMatching(/^application\/xml/),
      doc,
    ]);
    // Streamed from the file store into the XML, with its length known beforehand.
    const streamed = await req('GET', `Binary/${id}`, { accept: XML });
    expect(Number(streamed.headers['content-length'])).toBe(Buffer.byteLength(streamed.body));
    const resource = xmlBody(streamed) as {
      contentType: string;
      data: string;
    };
    expect(resource.contentType).toBe('application/xml');
    expect(Buffer.from(resource.data, 'base64').toString()).toBe(doc);
    // A FHIR XML Binary is a resource.
    const fhirBin = await req('POST', 'Binary', {
      body: `<Binary ${F}><contentType value="text/plain"/><data value="${Buffer.from('hello').toString('base64')}"/></Binary>`,
    });
    expect(fhirBin.statusCode, fhirBin.body).toBe(201);
    const content = await req('GET', `Binary/${fhirBin.json().id as string}`);
    expect(content.body).toBe('hello');
  });

  it('writes a 1,000-entry searchset as XML quickly', () => {
    const entry = Array.from({ length: 1000 }, (_, i) => ({
      fullUrl: `http://x/Patient/${i}`,
      resource: {
        resourceType: 'Patient',
        id: `p${i}`,
        name: [{ family: 'F', given: ['G'] }],
        birthDate: '1970-01-01',
      },
      search: { mode: 'match' },
    }));
    const bundle = { resourceType: 'Bundle', type: 'searchset', total: 1000, entry };
    toXml(bundle);
    const start = performance.now();
    toXml(bundle);
    expect(performance.now() - start).toBeLessThan(500);
  });
});
