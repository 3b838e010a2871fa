// Conditional reads (If-None-Match, If-Modified-Since → 304) and Prefer: return on create, update and patch
// (https://hl7.org/fhir/R4/http.html), issue 14 point 1, through HTTP on every test database.
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { postResource, useProjectApp } from '../support/app.js';

describe.each(testDatabases())('read and write headers on $name', (database) => {
  const ctx = useProjectApp(database);

  const create = async (): Promise<{ id: string; lastModified: string }> => {
    const res = await postResource(ctx.t, ctx.token, { resourceType: 'Patient', name: [{ family: 'Etag' }] });
    expect(res.statusCode).toBe(201);
    return { id: res.json().id as string, lastModified: String(res.headers['last-modified']) };
  };
  const read = (url: string, headers: Record<string, string>) =>
    ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/${url}`, token: ctx.token, headers });

  it('answers 304 to If-None-Match naming the current version (weak or strong, or *), 200 otherwise', async () => {
    const { id } = await create();
    for (const url of [`Patient/${id}`, `Patient/${id}/_history/1`]) {
      for (const tag of ['W/"1"', '"1"', '*', 'W/"7", W/"1"']) {
        const res = await read(url, { 'if-none-match': tag });
        expect(res.statusCode, `${url} ${tag}`).toBe(304);
        expect(res.body).toBe('');
        expect(res.headers.etag).toBe('W/"1"');
      }
      expect((await read(url, { 'if-none-match': 'W/"2"' })).statusCode).toBe(200);
    }
    const cs = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/metadata`, token: null });
    const patient = (cs.json().rest[0].resource as { type: string; conditionalRead?: string }[]).find(
      (r) => r.type === 'Patient',
    );
    expect(patient?.conditionalRead).toBe('full-support');
  });

  it('answers 304 to If-Modified-Since at or after the last change, unless If-None-Match differs', async () => {
    const { id, lastModified } = await create();
    expect((await read(`Patient/${id}`, { 'if-modified-since': lastModified })).statusCode).toBe(304);
    const later = new Date(Date.parse(lastModified) + 60_000).toUTCString();
    expect((await read(`Patient/${id}`, { 'if-modified-since': later })).statusCode).toBe(304);
    const earlier = new Date(Date.parse(lastModified) - 60_000).toUTCString();
    expect((await read(`Patient/${id}`, { 'if-modified-since': earlier })).statusCode).toBe(200);
    const both = await read(`Patient/${id}`, { 'if-modified-since': later, 'if-none-match': 'W/"9"' });
    expect(both.statusCode).toBe(200);
    expect((await read(`Patient/${id}`, { 'if-modified-since': 'not a date' })).statusCode).toBe(200);
  });

  it('honours Prefer: return=minimal, representation and OperationOutcome on create, update and patch', async () => {
    const post = (prefer: string) =>
      ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/Patient`,
        token: ctx.token,
        headers: { prefer },
        payload: { resourceType: 'Patient', name: [{ family: 'Prefer' }] },
      });
    const minimal = await post('return=minimal');
    expect(minimal.statusCode).toBe(201);
    expect(minimal.body).toBe('');
    expect(minimal.headers.location).toMatch(/\/Patient\/[^/]+\/_history\/1$/);
    expect(minimal.headers.etag).toBe('W/"1"');
    const oo = await post('return=OperationOutcome');
    expect(oo.json()).toMatchObject({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'information' }],
    });
    const full = await post('return=representation');
    expect(full.json()).toMatchObject({ resourceType: 'Patient', name: [{ family: 'Prefer' }] });
    const id = full.json().id as string;
    const put = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/Patient/${id}`,
      token: ctx.token,
      headers: { prefer: 'return=minimal' },
      payload: { resourceType: 'Patient', id, name: [{ family: 'Put' }] },
    });
    expect(put.statusCode).toBe(200);
    expect(put.body).toBe('');
    expect(put.headers.etag).toBe('W/"2"');
    const patch = await ctx.t.request({
      method: 'PATCH',
      url: `${ctx.t.fhir}/Patient/${id}`,
      token: ctx.token,
      headers: { prefer: 'return=OperationOutcome', 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'replace', path: '/name/0/family', value: 'Patched' }]),
    });
    expect(patch.statusCode, patch.body).toBe(200);
    expect(patch.json().resourceType).toBe('OperationOutcome');
    // Errors are not affected.
    const bad = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      headers: { prefer: 'return=minimal' },
      payload: { resourceType: 'Patient', gender: 42 },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().resourceType).toBe('OperationOutcome');
  });
});
