// Binary over REST (https://hl7.org/fhir/R4/binary.html#rest): raw uploads of any Content-Type stored in the file
// store (not the row), reads answering raw bytes or FHIR JSON by Accept/_format, versions, size limit, 415 elsewhere.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binaryKey } from '../../src/fhir/repository/binary-content.js';
import { testDatabases } from '../support/db.js';
import type { TestApp } from '../support/app.js';
import { issueOf, MAX, PNG, startBinaryApp, type BinaryApp, binaryRequests } from '../support/binary.js';

describe.each(testDatabases())('Binary on $name', (database) => {
  let s: BinaryApp;
  let t: TestApp;
  let token: string;
  const { upload, get } = binaryRequests(
    () => t,
    () => token,
  );

  beforeAll(async () => {
    s = await startBinaryApp(database);
    t = s.t;
    token = (await t.newProject()).adminToken;
  });
  afterAll(async () => s?.close());

  it('stores raw bytes in the file store and answers them raw, or as FHIR JSON when asked', async () => {
    const created = await upload(PNG, { 'content-type': 'image/png' });
    expect(created.statusCode, created.body).toBe(201);
    const binary = created.json() as Record<string, unknown> & { id: string; meta: { versionId: string } };
    expect(binary).toMatchObject({
      resourceType: 'Binary',
      contentType: 'image/png',
      url: `Binary/${binary.id}`,
    });
    expect(binary.data).toBeUndefined();
    expect(created.headers.location).toBe(`http://cinder.test/fhir/R4/Binary/${binary.id}/_history/1`);
    // The row holds no data; the bytes are in the file store under the id and version.
    const row = await s.db.query<{ content: Record<string, unknown> }>(
      `SELECT content FROM resources WHERE resource_type = 'Binary' AND id = $1`,
      [binary.id],
    );
    expect(row.rows[0]?.content.data).toBeUndefined();
    const stream = await s.files.read(binaryKey(binary.id, 1));
    const stored: Buffer[] = [];
    for await (const chunk of stream ?? []) stored.push(Buffer.from(chunk as Uint8Array));
    expect(Buffer.concat(stored).equals(PNG)).toBe(true);

    for (const accept of [undefined, '*/*', 'image/png', 'application/xml']) {
      const raw = await get(`Binary/${binary.id}`, accept ? { accept } : {});
      expect(raw.statusCode).toBe(200);
      expect(raw.headers['content-type']).toBe('image/png');
      expect(raw.rawPayload.equals(PNG)).toBe(true);
      expect(raw.headers.etag).toBe('W/"1"');
      expect(raw.headers['last-modified']).toBeTruthy();
      expect(raw.headers['x-content-type-options']).toBe('nosniff');
    }
    for (const [headers, query] of [
      [{ accept: 'application/fhir+json' }, ''],
      [{ accept: 'application/json;q=0.9, */*;q=0.1' }, ''],
      [{}, '?_format=json'],
      [{ accept: '*/*' }, '?_format=application/fhir+json'],
    ] as const) {
      const json = await get(`Binary/${binary.id}${query}`, headers);
      expect(json.statusCode).toBe(200);
      expect(json.headers['content-type']).toMatch(/^application\/fhir\+json/);
      expect(json.headers.etag).toBe('W/"1"');
      const body = json.json() as { data: string; contentType: string };
      expect(body.contentType).toBe('image/png');
      expect(Buffer.from(body.data, 'base64').equals(PNG)).toBe(true);
    }
    const notModified = await get(`Binary/${binary.id}`, { 'if-none-match': 'W/"1"' });
    expect(notModified.statusCode).toBe(304);
    const head = await t.request({ method: 'HEAD', url: `${t.fhir}/Binary/${binary.id}`, token });
    expect([head.statusCode, head.headers['content-type'], head.body]).toEqual([200, 'image/png', '']);
    // Search entries carry the metadata, not the content.
    const search = await get(`Binary?_id=${binary.id}`, { accept: 'application/fhir+json' });
    const entry = (search.json() as { entry: { resource: Record<string, unknown> }[] }).entry;
    expect(entry.map((e) => [e.resource.contentType, e.resource.data])).toEqual([['image/png', undefined]]);
  });

  it('PUT writes a new version (raw or JSON); vread and history serve each version', async () => {
    const id = (await upload(PNG, { 'content-type': 'image/png' })).json().id as string;
    const v2 = await upload(
      'hello, wörld',
      { 'content-type': 'text/plain;  charset=utf-8', 'if-match': 'W/"1"' },
      `Binary/${id}`,
      'PUT',
    );
    expect(v2.statusCode, v2.body).toBe(200);
    expect(v2.json()).toMatchObject({
      id,
      contentType: 'text/plain; charset=utf-8',
      meta: { versionId: '2' },
    });
    const stale = await upload(
      'x',
      { 'content-type': 'text/plain', 'if-match': 'W/"1"' },
      `Binary/${id}`,
      'PUT',
    );
    expect(stale.statusCode).toBe(412);
    expect(issueOf(stale.body).code).toBe('conflict');
    const now = await get(`Binary/${id}`);
    expect(now.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(now.body).toBe('hello, wörld');
    const v1 = await get(`Binary/${id}/_history/1`);
    expect(v1.headers['content-type']).toBe('image/png');
    expect(v1.headers.etag).toBe('W/"1"');
    expect(v1.rawPayload.equals(PNG)).toBe(true);
    const v1json = await get(`Binary/${id}/_history/1`, { accept: 'application/fhir+json' });
    expect(Buffer.from((v1json.json() as { data: string }).data, 'base64').equals(PNG)).toBe(true);
    const json = {
      resourceType: 'Binary',
      id,
      contentType: 'application/pdf',
      data: Buffer.from('%PDF-1.4').toString('base64'),
    };
    const v3 = await t.request({ method: 'PUT', url: `${t.fhir}/Binary/${id}`, token, payload: json });
    expect(v3.statusCode, v3.body).toBe(200);
    expect((await get(`Binary/${id}`)).body).toBe('%PDF-1.4');
    const history = await get(`Binary/${id}/_history`, { accept: 'application/fhir+json' });
    const entries = (
      history.json() as { entry: { resource: { meta: { versionId: string }; data?: string } }[] }
    ).entry;
    expect(entries.map((e) => e.resource.meta.versionId)).toEqual(['3', '2', '1']);
    expect(entries.every((e) => e.resource.data === undefined)).toBe(true);
    // Update as create with the client's id, and PUT on _history is no update.
    const made = await upload(PNG, { 'content-type': 'image/png' }, 'Binary/client-chosen-1', 'PUT');
    expect(made.statusCode).toBe(201);
    expect((await get('Binary/client-chosen-1')).rawPayload.equals(PNG)).toBe(true);
    const history405 = await upload(PNG, { 'content-type': 'image/png' }, 'Binary/_history', 'PUT');
    expect(history405.statusCode).toBe(405);
    expect(issueOf(history405.body).code).toBe('not-supported');
  });

  it('keeps a FHIR JSON Binary working: its base64 data moves to the file store as well', async () => {
    const data = PNG.toString('base64');
    const created = await t.request({
      method: 'POST',
      url: `${t.fhir}/Binary`,
      token,
      payload: { resourceType: 'Binary', contentType: 'image/png', data },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as string;
    expect(created.json().data).toBeUndefined();
    const row = await s.db.query<{ content: Record<string, unknown> }>(
      `SELECT content FROM resources WHERE resource_type = 'Binary' AND id = $1`,
      [id],
    );
    expect(row.rows[0]?.content.data).toBeUndefined();
    expect((await get(`Binary/${id}`)).rawPayload.equals(PNG)).toBe(true);
    expect((await get(`Binary/${id}`, { accept: 'application/fhir+json' })).json().data).toBe(data);
    const bad = await t.request({
      method: 'POST',
      url: `${t.fhir}/Binary`,
      token,
      payload: { resourceType: 'Binary', contentType: 'image/png', data: 'not base64!' },
    });
    expect(bad.statusCode).toBe(400);
    expect(issueOf(bad.body)).toMatchObject({
      severity: 'error',
      code: 'value',
      expression: ['Binary.data'],
    });
    // A batch creates and reads the same way; JSON Patch sees and keeps the content.
    const batch = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            resource: { resourceType: 'Binary', contentType: 'text/plain', data: 'YmF0Y2g=' },
            request: { method: 'POST', url: 'Binary' },
          },
          { request: { method: 'GET', url: `Binary/${id}` } },
        ],
      },
    });
    const [post, read] = (
      batch.json() as { entry: { response: { location?: string }; resource?: { data?: string } }[] }
    ).entry;
    expect(read?.resource?.data).toBe(data);
    const batchId = /Binary\/([^/]+)/.exec(post?.response.location ?? '')?.[1] as string;
    expect((await get(`Binary/${batchId}`)).body).toBe('batch');
    const patched = await t.request({
      method: 'PATCH',
      url: `${t.fhir}/Binary/${batchId}`,
      token,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'replace', path: '/contentType', value: 'text/markdown' }]),
    });
    expect(patched.statusCode, patched.body).toBe(200);
    const after = await get(`Binary/${batchId}`);
    expect([after.headers['content-type'], after.body]).toEqual(['text/markdown', 'batch']);
  });

  it('takes any Content-Type on Binary only, a missing one as octet-stream; elsewhere 415', async () => {
    const form = await upload('a=1&b=2', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.statusCode).toBe(201);
    const formRead = await get(`Binary/${form.json().id as string}`);
    expect([formRead.headers['content-type'], formRead.body]).toEqual([
      'application/x-www-form-urlencoded',
      'a=1&b=2',
    ]);
    const bare = await t.app.inject({
      method: 'POST',
      url: `${t.fhir}/Binary`,
      headers: { authorization: `Bearer ${token}` },
      payload: PNG,
    });
    expect(bare.statusCode, bare.body).toBe(201);
    expect((await get(`Binary/${bare.json().id as string}`)).headers['content-type']).toBe(
      'application/octet-stream',
    );
    // A form is still a search where one is taken.
    const search = await upload(
      `_id=${form.json().id as string}`,
      {
        'content-type': 'application/x-www-form-urlencoded',
      },
      'Binary/_search',
    );
    expect(search.statusCode, search.body).toBe(200);
    expect((search.json() as { total: number }).total).toBe(1);
    const empty = await upload('', { 'content-type': 'text/plain' });
    expect(empty.statusCode).toBe(201);
    const emptyRead = await get(`Binary/${empty.json().id as string}`);
    expect([emptyRead.statusCode, emptyRead.body]).toEqual([200, '']);
    for (const [method, url] of [
      ['POST', 'Patient'],
      ['PUT', 'Patient/p1'],
      ['POST', 'Patient/_search'],
      ['POST', ''],
      ['PUT', 'Binary?identifier=x'],
      ['POST', 'Binary/$validate'],
    ] as const) {
      const res = await upload(PNG, { 'content-type': 'image/png' }, url, method);
      expect(res.statusCode, `${method} ${url}`).toBe(415);
      expect(issueOf(res.body)).toMatchObject({ severity: 'error', code: 'not-supported' });
    }
  });

  it('answers 413 with an OperationOutcome beyond binaryMaxBytes', async () => {
    const atLimit = await upload(Buffer.alloc(MAX, 1), { 'content-type': 'application/octet-stream' });
    expect(atLimit.statusCode).toBe(201);
    const over = await upload(Buffer.alloc(MAX + 1, 1), { 'content-type': 'application/octet-stream' });
    expect(over.statusCode).toBe(413);
    expect(issueOf(over.body)).toMatchObject({ severity: 'error', code: 'too-long' });
  });
});
