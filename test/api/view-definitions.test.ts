// ViewDefinition as a resource type (issue 15 point 1, API.md §7): validated against the specification's structure
// with errors naming the element, project-scoped, searchable by name, url, status and resource.
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, postResource, useProjectApp } from '../support/app.js';

const view = (name: string) => ({
  resourceType: 'ViewDefinition',
  url: `https://example.org/views/${name}`,
  name,
  status: 'active',
  resource: 'Patient',
  constant: [{ name: 'sys', valueString: 'http://example.org/mrn' }],
  select: [
    { column: [{ name: 'id', path: 'getResourceKey()', type: 'id' }] },
    { forEach: 'name', column: [{ name: 'family', path: 'family', type: 'string' }] },
    { repeat: ['link'], column: [{ name: 'other', path: 'other.getReferenceKey(Patient)' }] },
  ],
  where: [{ path: 'active = true' }],
});

describe.each(testDatabases())('ViewDefinition resources on $name', (database) => {
  const ctx = useProjectApp(database);

  it('stores, reads and searches views within the project', async () => {
    const name = `patients_${Date.now()}`;
    const v = await created(ctx.t, ctx.token, view(name));
    const read = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/ViewDefinition/${v.id}`,
      token: ctx.token,
    });
    expect(read.statusCode).toBe(200);
    expect(read.json().select[2].repeat).toEqual(['link']);
    for (const q of [
      `name=${name}`,
      `url=https://example.org/views/${name}`,
      `status=active&name=${name}`,
      `resource=Patient&name=${name}`,
    ]) {
      const s = await ctx.t.request({
        method: 'GET',
        url: `${ctx.t.fhir}/ViewDefinition?${q}`,
        token: ctx.token,
      });
      expect(s.statusCode, q).toBe(200);
      expect(
        s.json().entry.map((e: { resource: { id: string } }) => e.resource.id),
        q,
      ).toEqual([v.id]);
    }
    const other = (await ctx.t.newProject()).adminToken;
    const hidden = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/ViewDefinition/${v.id}`,
      token: other,
    });
    expect(hidden.statusCode).toBe(404);
    const none = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/ViewDefinition?name=${name}`,
      token: other,
    });
    expect(none.json().entry ?? []).toEqual([]);
  });

  it('refuses a view that does not follow the structure, naming the element', async () => {
    const bad = {
      ...view('bad'),
      status: undefined,
      select: [{ column: [{ name: 1, path: 'id' }], foo: true }],
    };
    const res = await postResource(ctx.t, ctx.token, bad);
    expect(res.statusCode).toBe(400);
    const expressions = (res.json().issue as { expression: string[] }[]).flatMap((i) => i.expression);
    expect(expressions).toEqual(
      expect.arrayContaining([
        'ViewDefinition.select[0].column[0].name',
        'ViewDefinition.select[0].foo',
        'ViewDefinition.status',
      ]),
    );
  });
});
