// FHIR REST interactions through HTTP: create, read, vread, update, conditional create, patch, delete, history,
// and the error statuses of issue 2 (each an OperationOutcome).
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { startTestApp, useProjectApp } from '../support/app.js';

const patient = (family: string, extra: Record<string, unknown> = {}) => ({
  resourceType: 'Patient',
  name: [{ family, given: ['Ada'] }],
  gender: 'female',
  birthDate: '1990-04-01',
  ...extra,
});

function issue(body: string): {
  severity: string;
  code: string;
  details?: { text: string };
  expression?: string[];
} {
  const oo = JSON.parse(body) as { resourceType: string; issue: { severity: string; code: string }[] };
  expect(oo.resourceType).toBe('OperationOutcome');
  expect(oo.issue[0]?.severity).toBe('error');
  return oo.issue[0] as never;
}

describe.each(testDatabases())('FHIR REST on $name', (database) => {
  const ctx = useProjectApp(database);

  it('creates with 201, Location, ETag and server-set meta', async () => {
    const res = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      payload: patient('Lovelace', { id: 'client-chosen', meta: { versionId: '99' } }),
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.id).not.toBe('client-chosen');
    expect(body.meta.versionId).toBe('1');
    expect(typeof body.meta.lastUpdated).toBe('string');
    expect(typeof body.meta.project).toBe('string');
    expect(res.headers.location).toBe(`http://cinder.test/fhir/R4/Patient/${body.id}/_history/1`);
    expect(res.headers.etag).toBe('W/"1"');
    expect(res.headers['content-type']).toMatch(/^application\/fhir\+json/);
  });

  it('reads, updates with If-Match, rejects a stale If-Match with 412, and vreads old versions', async () => {
    const created = (
      await ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/Patient`,
        token: ctx.token,
        payload: patient('Hopper'),
      })
    ).json();
    const url = `${ctx.t.fhir}/Patient/${created.id}`;
    const read = await ctx.t.request({ method: 'GET', url, token: ctx.token });
    expect(read.statusCode).toBe(200);
    expect(read.json().name[0].family).toBe('Hopper');
    const upd = await ctx.t.request({
      method: 'PUT',
      url,
      token: ctx.token,
      headers: { 'if-match': 'W/"1"' },
      payload: { ...created, gender: 'other' },
    });
    expect(upd.statusCode).toBe(200);
    expect(upd.json().meta.versionId).toBe('2');
    const stale = await ctx.t.request({
      method: 'PUT',
      url,
      token: ctx.token,
      headers: { 'if-match': 'W/"1"' },
      payload: { ...created, gender: 'male' },
    });
    expect(stale.statusCode).toBe(412);
    issue(stale.body);
    const v1 = await ctx.t.request({ method: 'GET', url: `${url}/_history/1`, token: ctx.token });
    expect(v1.json().gender).toBe('female');
    expect((await ctx.t.request({ method: 'GET', url, token: ctx.token })).json().gender).toBe('other');
    const missingVersion = await ctx.t.request({ method: 'GET', url: `${url}/_history/9`, token: ctx.token });
    expect(missingVersion.statusCode).toBe(404);
  });

  it('update-as-create with a client id answers 201; an id mismatch is 400', async () => {
    const res = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/Patient/chosen-id-1`,
      token: ctx.token,
      payload: patient('Chosen', { id: 'chosen-id-1' }),
    });
    expect(res.statusCode).toBe(201);
    const mismatch = await ctx.t.request({
      method: 'PUT',
      url: `${ctx.t.fhir}/Patient/chosen-id-2`,
      token: ctx.token,
      payload: patient('Chosen', { id: 'other' }),
    });
    expect(mismatch.statusCode).toBe(400);
  });

  it('conditional create returns the existing resource instead of a second one', async () => {
    const p = patient('Conditional', { identifier: [{ system: 'urn:test:mrn', value: 'cc-1' }] });
    const headers = { 'if-none-exist': 'identifier=urn:test:mrn|cc-1' };
    const first = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      headers,
      payload: p,
    });
    expect(first.statusCode).toBe(201);
    const second = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      headers,
      payload: p,
    });
    expect(second.statusCode).toBe(200);
    expect(second.json().id).toBe(first.json().id);
  });

  it('applies a JSON Patch; a failed test op is 412', async () => {
    const created = (
      await ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/Patient`,
        token: ctx.token,
        payload: patient('Patchy'),
      })
    ).json();
    const url = `${ctx.t.fhir}/Patient/${created.id}`;
    const ok = await ctx.t.request({
      method: 'PATCH',
      url,
      token: ctx.token,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'replace', path: '/gender', value: 'male' }]),
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().gender).toBe('male');
    const failed = await ctx.t.request({
      method: 'PATCH',
      url,
      token: ctx.token,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'test', path: '/gender', value: 'female' }]),
    });
    expect(failed.statusCode).toBe(412);
  });

  it('deletes (then 410 on read), and keeps instance and type history', async () => {
    const created = (
      await ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/Patient`,
        token: ctx.token,
        payload: patient('Gone'),
      })
    ).json();
    const url = `${ctx.t.fhir}/Patient/${created.id}`;
    await ctx.t.request({ method: 'PUT', url, token: ctx.token, payload: { ...created, active: true } });
    const del = await ctx.t.request({ method: 'DELETE', url, token: ctx.token });
    expect(del.statusCode).toBe(200);
    const gone = await ctx.t.request({ method: 'GET', url, token: ctx.token });
    expect(gone.statusCode).toBe(410);
    expect(issue(gone.body).code).toBe('deleted');
    const hist = (await ctx.t.request({ method: 'GET', url: `${url}/_history`, token: ctx.token })).json();
    expect(hist.type).toBe('history');
    expect(hist.total).toBe(3);
    expect(hist.entry.map((e: { response: { status: string } }) => e.response.status)).toEqual([
      '204',
      '200',
      '201',
    ]);
    const typeHist = (
      await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/Patient/_history?_count=2`, token: ctx.token })
    ).json();
    expect(typeHist.entry.length).toBe(2);
    expect(typeHist.link.some((l: { relation: string }) => l.relation === 'next')).toBe(true);
    // A type's history with more pages is not counted unless asked: counting grows with the table.
    expect(typeHist.total).toBeUndefined();
    const typeHistory = async (query: string): Promise<{ total?: number; entry?: unknown[] }> =>
      (
        await ctx.t.request({
          method: 'GET',
          url: `${ctx.t.fhir}/Patient/_history${query}`,
          token: ctx.token,
        })
      ).json();
    const all = await typeHistory('?_count=1000');
    expect(all.total).toBe(all.entry?.length); // the first page holds every entry: its length is the total
    expect(all.total).toBeGreaterThanOrEqual(3);
    expect((await typeHistory('?_count=2&_total=accurate')).total).toBe(all.total);
    expect((await typeHistory('?_count=0')).total).toBe(all.total);
    expect((await typeHistory('?_count=1000&_total=none')).total).toBeUndefined();
    const instanceUncounted = (
      await ctx.t.request({ method: 'GET', url: `${url}/_history?_total=none`, token: ctx.token })
    ).json();
    expect(instanceUncounted.total).toBeUndefined();
    expect(instanceUncounted.entry).toHaveLength(3);
    const bad = await ctx.t.request({ method: 'GET', url: `${url}/_history?_total=maybe`, token: ctx.token });
    expect(bad.statusCode).toBe(400);
    expect(issue(bad.body).code).toBe('invalid');
  });

  it('rejects invalid resources with issues that carry expressions', async () => {
    const res = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      payload: patient('Bad', { birthDate: '1990-02-30', foo: 1 }),
    });
    expect(res.statusCode).toBe(400);
    const oo = res.json();
    const expressions = oo.issue.flatMap((i: { expression?: string[] }) => i.expression ?? []);
    expect(expressions.join(' ')).toMatch(/birthDate/);
    expect(expressions.join(' ')).toMatch(/foo/);
  });

  it('answers every error with an OperationOutcome and the right status', async () => {
    const malformed = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      headers: { 'content-type': 'application/fhir+json' },
      payload: '{"resourceType":',
    });
    expect(malformed.statusCode).toBe(400);
    issue(malformed.body);
    const media = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      headers: { 'content-type': 'text/plain' },
      payload: 'hello',
    });
    expect(media.statusCode).toBe(415);
    issue(media.body);
    const unknownType = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patientx/1`,
      token: ctx.token,
    });
    expect(unknownType.statusCode).toBe(404);
    issue(unknownType.body);
    const unknownId = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient/does-not-exist`,
      token: ctx.token,
    });
    expect(unknownId.statusCode).toBe(404);
    expect(issue(unknownId.body).code).toBe('not-found');
    const method = await ctx.t.request({ method: 'DELETE', url: `${ctx.t.fhir}/Patient`, token: ctx.token });
    expect(method.statusCode).toBe(405);
    issue(method.body);
    const wrongType = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      payload: { resourceType: 'Observation' },
    });
    expect(wrongType.statusCode).toBe(400);
    const notObject = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/Patient`,
      token: ctx.token,
      headers: { 'content-type': 'application/fhir+json' },
      payload: '[1,2]',
    });
    expect(notObject.statusCode).toBe(400);
    const noRoute = await ctx.t.request({ method: 'GET', url: '/nowhere', token: ctx.token });
    expect(noRoute.statusCode).toBe(404);
    issue(noRoute.body);
  });

  it('refuses an oversized body with 413', async () => {
    const small = await startTestApp(database, { maxBodySize: 2048 });
    try {
      const tok = small.adminToken;
      const res = await small.request({
        method: 'POST',
        url: `${small.fhir}/Patient`,
        token: tok,
        payload: patient('Big', {
          text: {
            status: 'generated',
            div: `<div xmlns="http://www.w3.org/1999/xhtml">${'x'.repeat(5000)}</div>`,
          },
        }),
      });
      expect(res.statusCode).toBe(413);
      expect(issue(res.body).code).toBe('too-long');
    } finally {
      await small.close();
    }
  });

  it('caps _count at 1000, and the self link says so', async () => {
    const res = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Patient?_count=5000&name:contains=a`,
      token: ctx.token,
    });
    expect(res.statusCode).toBe(200);
    const self = new URL(
      (res.json() as { link: { relation: string; url: string }[] }).link[0]?.url as string,
    );
    expect(self.searchParams.get('_count')).toBe('1000');
    expect(self.searchParams.get('name:contains')).toBe('a');
  });

  it('serves a CapabilityStatement without a token', async () => {
    const res = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/metadata` });
    expect(res.statusCode).toBe(200);
    const cs = res.json();
    expect(cs.resourceType).toBe('CapabilityStatement');
    expect(cs.fhirVersion).toBe('4.0.1');
    const patientRes = cs.rest[0].resource.find((r: { type: string }) => r.type === 'Patient');
    expect(patientRes.searchParam.map((p: { name: string }) => p.name)).toContain('family');
    expect(cs.rest[0].resource.map((r: { type: string }) => r.type)).toEqual(
      expect.arrayContaining(['Project', 'AsyncJob', 'Observation']),
    );
  });

  it('lists the operations it routes, where they apply', async () => {
    const cs = (await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/metadata` })).json() as {
      rest: {
        operation: { name: string; definition: string }[];
        resource: { type: string; operation: { name: string }[] }[];
      }[];
    };
    const rest = cs.rest[0] as (typeof cs.rest)[0];
    const names = (type: string): string[] =>
      (rest.resource.find((r) => r.type === type)?.operation ?? []).map((o) => o.name).sort();
    expect(rest.operation).toEqual([
      { name: 'export', definition: 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition/export' },
      { name: 'reindex', definition: 'http://cinder.test/fhir/R4/OperationDefinition/reindex' },
      {
        name: 'viewdefinition-run',
        definition: 'http://sql-on-fhir.org/OperationDefinition/$viewdefinition-run',
      },
      {
        name: 'viewdefinition-export',
        definition: 'http://sql-on-fhir.org/OperationDefinition/$viewdefinition-export',
      },
    ]);
    expect(names('ViewDefinition')).toEqual(['csv', 'validate', 'viewdefinition-run']);
    expect(names('Patient')).toEqual(['csv', 'everything', 'patient-export', 'summary', 'validate']);
    expect(names('Group')).toEqual(['csv', 'group-export', 'validate']);
    expect(names('AsyncJob')).toEqual(['cancel', 'csv', 'validate']);
    expect(names('Project')).toEqual(['csv', 'expunge', 'validate']);
    expect(names('User')).toEqual(['validate']);
    expect(names('Observation')).toEqual(['csv', 'lastn', 'validate']);
    expect(names('Composition')).toEqual(['csv', 'document', 'validate']);
    expect(names('ClientApplication')).toEqual(['launch', 'validate']);
    // Each listed operation is routed: an unauthenticated call is refused by authentication, never 404.
    const anon = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Observation/$csv?_fields=id`,
      token: null,
    });
    expect(anon.statusCode).toBe(401);
  });
});
