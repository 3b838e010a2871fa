// Hostile project SearchParameters (API.md §9 "Search"): their expressions run inside every write of their project,
// so the costly ones are refused at save; a project's parameters never run on another project's writes; and a
// project holding 200 SearchParameters still writes and searches correctly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, postResource, startTestApp, type TestApp } from '../support/app.js';

const param = (code: string, expression: string, type = 'string'): Record<string, unknown> => ({
  resourceType: 'SearchParameter',
  url: `http://example.org/fhir/SearchParameter/${code}`,
  name: code,
  status: 'active',
  description: code,
  code,
  base: ['Patient'],
  type,
  expression,
});

describe.each(testDatabases())('hostile SearchParameters on $name', (database) => {
  let t: TestApp;
  let p: { projectId: string; adminToken: string; memberToken: string };
  let q: { projectId: string; adminToken: string; memberToken: string };

  beforeAll(async () => {
    t = await startTestApp(database, {}, { jobs: { pollMs: 50 } });
    p = await t.newProject();
    q = await t.newProject();
  });
  afterAll(async () => t?.close());

  const ids = async (token: string, query: string): Promise<string[]> => {
    const res = await t.request({ method: 'GET', url: `${t.fhir}/Patient?${query}`, token });
    expect(res.statusCode, res.body).toBe(200);
    return ((res.json().entry ?? []) as { resource: { id: string } }[]).map((e) => e.resource.id).sort();
  };

  it.each([
    ['descendants()', 'Patient.descendants()'],
    ['descendants() nested in where', 'Patient.name.where(descendants().exists()).given'],
    ['repeat()', 'Patient.repeat(contained).id'],
    ['aggregate()', 'Patient.name.aggregate($total + $this.given.count(), 0)'],
    ['%resource in select', 'Patient.name.select(%resource.name.select(%resource.name.given))'],
    ['%context', 'Patient.name.select(%context.name.given)'],
    ['a regular expression', "Patient.name.given.replaceMatches('(a|aa)+$', 'x')"],
    ['trace()', "Patient.name.given.trace('x')"],
  ])(
    'refuses an expression with %s at save (400), as write-time FHIRPath elsewhere',
    async (_what, expression) => {
      const res = await postResource(t, p.adminToken, param('costly', expression));
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().issue[0].expression).toEqual(['SearchParameter.expression']);
    },
  );

  it('a function name inside a string literal is text, not a call', async () => {
    const res = await postResource(
      t,
      p.adminToken,
      param('literal', "Patient.name.where(text = 'descendants()').given"),
    );
    expect(res.statusCode, res.body).toBe(201);
  });

  it('two concurrent writes of the same code: one is stored, the other refused', async () => {
    const results = await Promise.all(
      [0, 1, 2].map(() => postResource(t, p.adminToken, param('racer', 'Patient.name.family'))),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 400, 400]);
  });

  it('a project with 200 SearchParameters writes and searches; another project pays nothing for them', async () => {
    const entries = Array.from({ length: 200 }, (_, i) =>
      createEntry(param(`p${i}`, `Patient.name.given | Patient.name.where(family = 'F${i}').family`)),
    );
    const stored = await postBundle(t, p.adminToken, 'transaction', entries);
    expect(stored.statusCode, stored.body).toBe(200);
    // One reindex job for the 200 stored together.
    const jobs = await t.request({
      method: 'GET',
      url: `${t.fhir}/AsyncJob?_count=1000`,
      token: p.adminToken,
    });
    const requests = ((jobs.json().entry ?? []) as { resource: { request: string } }[]).map(
      (e) => e.resource.request,
    );
    expect(requests.filter((r) => r.includes('SearchParameter?_id='))).toHaveLength(1);
    // A big Patient in the project (200 parameters over 300 names), while the other project writes beside it.
    const names = Array.from({ length: 300 }, (_, i) => ({ family: `F${i}`, given: [`G${i}`, 'Common'] }));
    const started = Date.now();
    const [big, ...others] = await Promise.all([
      postResource(t, p.adminToken, { resourceType: 'Patient', name: names }),
      ...Array.from({ length: 5 }, (_, i) =>
        postResource(t, q.adminToken, { resourceType: 'Patient', name: [{ family: `Q${i}` }] }),
      ),
    ]);
    expect(big?.statusCode, big?.body).toBe(201);
    for (const o of others) expect(o.statusCode, o.body).toBe(201);
    expect(Date.now() - started).toBeLessThan(30_000);
    const bigId = big?.json().id as string;
    expect(await ids(p.adminToken, 'p7=F7')).toEqual([bigId]);
    expect(await ids(p.adminToken, 'p199=G199')).toEqual([bigId]);
    expect(await ids(p.adminToken, 'p0=Common&p150=F150&p42:exact=G42')).toEqual([bigId]);
    // The other project neither knows them nor is matched by them.
    const unknown = await t.request({ method: 'GET', url: `${t.fhir}/Patient?p7=Q1`, token: q.adminToken });
    expect(unknown.statusCode).toBe(400);
    expect(await ids(q.adminToken, 'family=Q1')).toHaveLength(1);
  });
});
