// Conditional update, patch and delete through HTTP (issue 14 point 1): PUT|PATCH|DELETE {fhir}/<Type>?<search>,
// with the R4 rules for no, one and several matches, the caller's access, and the CapabilityStatement flags.
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, useProjectApp } from '../support/app.js';

describe.each(testDatabases())('conditional writes on $name', (database) => {
  const ctx = useProjectApp(database);
  const sys = 'https://example.org/mrn';
  const q = (value: string): string => `identifier=${encodeURIComponent(`${sys}|${value}`)}`;
  const put = (query: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/Patient?${query}`,
      token: ctx.token,
      payload: body,
      headers,
    });
  const patient = (value: string, family: string, extra: Record<string, unknown> = {}) => ({
    resourceType: 'Patient',
    identifier: [{ system: sys, value }],
    name: [{ family }],
    ...extra,
  });
  const search = async (query: string): Promise<{ id: string; name: { family: string }[] }[]> =>
    (
      (await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/Patient?${query}`, token: ctx.token })).json()
        .entry ?? []
    ).map((e: { resource: unknown }) => e.resource);

  it('update: no match creates, one match updates it, a different id is 400, several are 412', async () => {
    const made = await put(q('c-1'), patient('c-1', 'First'));
    expect(made.statusCode, made.body).toBe(201);
    const id = made.json().id as string;
    const updated = await put(q('c-1'), patient('c-1', 'Second'));
    expect(updated.statusCode, updated.body).toBe(200);
    expect(updated.json()).toMatchObject({ id, meta: { versionId: '2' }, name: [{ family: 'Second' }] });
    expect((await put(q('c-1'), patient('c-1', 'Same id', { id }))).statusCode).toBe(200);
    const otherId = await put(q('c-1'), patient('c-1', 'Other', { id: 'not-this-one' }));
    expect(otherId.statusCode).toBe(400);
    expect(await search(q('c-1'))).toHaveLength(1);
    // With no match and an id in the body: update as create under that id.
    const asCreate = await put(q('c-2'), patient('c-2', 'Named', { id: 'cond-named-1' }));
    expect(asCreate.statusCode).toBe(201);
    expect(asCreate.json().id).toBe('cond-named-1');
    await created(ctx.t, ctx.token, patient('dup', 'A'));
    await created(ctx.t, ctx.token, patient('dup', 'B'));
    const several = await put(q('dup'), patient('dup', 'C'));
    expect(several.statusCode).toBe(412);
    expect(several.json().issue[0].code).toBe('multiple-matches');
    // Without criteria PUT on a type is still not allowed.
    const none = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      payload: patient('x', 'X'),
    });
    expect(none.statusCode).toBe(405);
  });

  it('patch: one match is patched, none is 404, several are 412', async () => {
    const p = await created(ctx.t, ctx.token, patient('p-1', 'Before'));
    const patch = (query: string) =>
      ctx.t.request({
        method: 'PATCH',
        url: `${ctx.t.fhir}/Patient?${query}`,
        token: ctx.token,
        headers: { 'content-type': 'application/json-patch+json' },
        payload: JSON.stringify([{ op: 'replace', path: '/name/0/family', value: 'After' }]),
      });
    const ok = await patch(q('p-1'));
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ id: p.id, name: [{ family: 'After' }] });
    expect((await patch(q('nobody'))).statusCode).toBe(404);
    expect((await patch(q('dup'))).statusCode).toBe(412);
  });

  it('delete: one match is deleted, none deletes nothing, several are 412', async () => {
    const p = await created(ctx.t, ctx.token, patient('d-1', 'Gone'));
    const del = (query: string) =>
      ctx.t.request({ method: 'DELETE', url: `${ctx.t.fhir}/Patient?${query}`, token: ctx.token });
    expect((await del(q('d-1'))).statusCode).toBe(200);
    const read = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient/${p.id as string}`,
      token: ctx.token,
    });
    expect(read.statusCode).toBe(410);
    const nothing = await del(q('d-1'));
    expect(nothing.statusCode).toBe(200);
    expect(nothing.json().issue[0].severity).toBe('information');
    expect((await del(q('dup'))).statusCode).toBe(412);
    expect(await search(q('dup'))).toHaveLength(2);
  });

  it('matches only what the caller may see and refuses what it may not write', async () => {
    const other = await ctx.t.newProject();
    // Another project's Patient with the same identifier is neither matched nor changed.
    await created(ctx.t, other.adminToken, patient('shared', 'Theirs'));
    const mine = await put(q('shared'), patient('shared', 'Mine'));
    expect(mine.statusCode).toBe(201);
    const theirs = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient?${q('shared')}`,
      token: other.adminToken,
    });
    expect(
      theirs
        .json()
        .entry.map((e: { resource: { name: { family: string }[] } }) => e.resource.name[0]?.family),
    ).toEqual(['Theirs']);
    const member = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/ClientApplication?name=x`,
      token: other.memberToken,
      payload: { resourceType: 'ClientApplication', name: 'x' },
    });
    expect(member.statusCode).toBe(403);
  });

  it('batch and transaction entries take conditional URLs and read preconditions', async () => {
    const bundle = (type: 'batch' | 'transaction', entry: unknown[]) =>
      ctx.t.request({
        method: 'POST',
        url: ctx.t.fhir,
        token: ctx.token,
        payload: { resourceType: 'Bundle', type, entry },
      });
    const b = await bundle('batch', [
      { resource: patient('b-1', 'Batch'), request: { method: 'PUT', url: `Patient?${q('b-1')}` } },
      { request: { method: 'DELETE', url: `Patient?${q('dup')}` } },
      { request: { method: 'DELETE', url: 'Patient' } },
    ]);
    expect(b.statusCode, b.body).toBe(200);
    const statuses = (b.json().entry as { response: { status: string } }[]).map((e) => e.response.status);
    expect(statuses[0]).toMatch(/^201/);
    expect(statuses[1]).toMatch(/^412/);
    expect(statuses[2]).toMatch(/^400/);
    const id = (await search(q('b-1')))[0]?.id as string;
    // The transaction's conditional PUT names the existing Patient, and a reference to its fullUrl follows.
    const tx = await bundle('transaction', [
      {
        fullUrl: 'urn:uuid:3c4a9d1e-0000-4000-8000-000000000001',
        resource: patient('b-1', 'Again'),
        request: { method: 'PUT', url: `Patient?${q('b-1')}` },
      },
      {
        resource: {
          resourceType: 'Observation',
          status: 'final',
          code: { text: 'x' },
          subject: { reference: 'urn:uuid:3c4a9d1e-0000-4000-8000-000000000001' },
        },
        request: { method: 'POST', url: 'Observation' },
      },
      { request: { method: 'DELETE', url: `Patient?${q('nobody-here')}` } },
    ]);
    expect(tx.statusCode, tx.body).toBe(200);
    const entries = tx.json().entry as { response: { status: string; location?: string } }[];
    expect(entries[0]?.response.status).toMatch(/^200/);
    const obsId = /^Observation\/([^/]+)/.exec(entries[1]?.response.location ?? '')?.[1] as string;
    const obs = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Observation/${obsId}`,
      token: ctx.token,
    });
    expect(obs.json().subject.reference).toBe(`Patient/${id}`);
    expect((await search(q('b-1')))[0]?.name[0]?.family).toBe('Again');
    // GET entries answer 304 when the client's version is current.
    const reads = await bundle('batch', [
      { request: { method: 'GET', url: `Patient/${id}`, ifNoneMatch: 'W/"2"' } },
      { request: { method: 'GET', url: `Patient/${id}`, ifNoneMatch: 'W/"1"' } },
      {
        request: {
          method: 'GET',
          url: `Patient/${id}`,
          ifModifiedSince: new Date(Date.now() + 60_000).toUTCString(),
        },
      },
    ]);
    const r = reads.json().entry as { response: { status: string }; resource?: unknown }[];
    expect(r.map((e) => e.response.status.slice(0, 3))).toEqual(['304', '200', '304']);
    expect(r[0]?.resource).toBeUndefined();
  });

  it('says so in the CapabilityStatement', async () => {
    const cs = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/metadata`, token: null });
    const p = (cs.json().rest[0].resource as Record<string, unknown>[]).find((r) => r.type === 'Patient');
    expect(p).toMatchObject({
      conditionalUpdate: true,
      conditionalDelete: 'single',
      conditionalCreate: true,
    });
  });
});
