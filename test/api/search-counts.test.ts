// Totals that never read every match (issue 30): a search counts at most `searchCountLimit` matches. Beyond it
// `_total=accurate`, `_summary=count` and `_count=0` answer 400 too-costly naming the limit, `_total=estimate` the
// planner's estimate (counted exactly up to the limit), `$csv`'s X-Total-Count is counted whatever the number.
// Another project's rows never count; a narrowly scoped token counts only what it may read.
import { beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { afterAll } from 'vitest';

const LIMIT = 6;
type Bundle = { total?: number; entry?: unknown[] };
type Outcome = { resourceType: string; issue: { code: string; details?: { text?: string } }[] };

describe.each(testDatabases())('search count limit on $name', (database) => {
  let t: TestApp;
  let token: string;
  let projectId: string;
  beforeAll(async () => {
    t = await startTestApp(database, { searchCountLimit: LIMIT });
    const ours = await t.newProject();
    token = ours.adminToken;
    projectId = ours.projectId;
    const theirs = await t.newProject();
    const obs = (code: string) =>
      createEntry({ resourceType: 'Observation', status: 'final', code: { text: code } });
    // Ours: 10 Observations (4 of code 'few'); theirs: 30 of code 'few'.
    let res = await postBundle(t, token, 'transaction', [
      ...Array.from({ length: 4 }, () => obs('few')),
      ...Array.from({ length: 6 }, () => obs('many')),
    ]);
    expect(res.statusCode, res.body).toBe(200);
    res = await postBundle(
      t,
      theirs.adminToken,
      'transaction',
      Array.from({ length: 30 }, () => obs('few')),
    );
    expect(res.statusCode, res.body).toBe(200);
    await t.db.query('ANALYZE');
  });
  afterAll(async () => t?.close());

  const get = (url: string, tok = token) => t.request({ method: 'GET', url: `${t.fhir}/${url}`, token: tok });

  it('counts up to the limit exactly, in the caller’s project only', async () => {
    for (const q of ['_summary=count', '_total=accurate', '_count=0', '_total=estimate']) {
      const res = await get(`Observation?code:text=few&${q}`);
      expect(res.statusCode, res.body).toBe(200);
      expect((res.json() as Bundle).total, q).toBe(4);
    }
  });

  it('answers 400 too-costly naming the limit beyond it, and the planner’s estimate for _total=estimate', async () => {
    for (const q of ['_summary=count', '_total=accurate', '_count=0', '_total=accurate&_count=3']) {
      const res = await get(`Observation?${q}`);
      expect(res.statusCode, q).toBe(400);
      const outcome = res.json() as Outcome;
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0]?.code).toBe('too-costly');
      expect(outcome.issue[0]?.details?.text).toContain(`searchCountLimit is ${LIMIT}`);
    }
    const res = await get('Observation?_total=estimate&_count=3');
    expect(res.statusCode, res.body).toBe(200);
    const b = res.json() as Bundle;
    expect(b.entry).toHaveLength(3);
    expect(b.total).toBeGreaterThan(LIMIT);
  });

  it('pages without a total as before: a last page tells its own', async () => {
    const res = await get('Observation?_count=20');
    expect(res.statusCode, res.body).toBe(200);
    expect((res.json() as Bundle).total).toBe(10);
    const past = await get('Observation?_count=5&_offset=50');
    expect(past.statusCode, past.body).toBe(200);
    expect((past.json() as Bundle).total).toBeUndefined();
  });

  it('counts only what a narrowly scoped token may read, and $csv counts whatever the number', async () => {
    const patientsOnly = await scopedClientToken(t, token, projectId, 'system/Patient.rs');
    expect((await get('Observation?_summary=count', patientsOnly)).statusCode).toBe(403);
    const csv = await get('Observation/$csv?_fields=id');
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.headers['x-total-count']).toBe('10');
  });

  it('refuses a malformed _total with an OperationOutcome', async () => {
    const res = await get('Observation?_total=lots');
    expect(res.statusCode).toBe(400);
    expect((res.json() as Outcome).resourceType).toBe('OperationOutcome');
  });

  it('answers a forged _cursor of a one-key _sort with 400, and pages a sort by cursor in the project only', async () => {
    const cursor = (body: unknown[]): string => Buffer.from(JSON.stringify(body)).toString('base64url');
    for (const c of [cursor([1, 'not a date']), cursor([1]), 'x']) {
      const res = await get(`Observation?_sort=-date&_cursor=${c}`);
      expect(res.statusCode, c).toBe(400);
      expect((res.json() as Outcome).resourceType).toBe('OperationOutcome');
    }
    // Missing-value segment (null key), any rid: an empty or partial page, never another project's rows.
    const res = await get(`Observation?_sort=-date&_count=3&_cursor=${cursor([-5, null])}`);
    expect(res.statusCode, res.body).toBe(200);
    const seen: string[] = [];
    let url: string | undefined = 'Observation?_sort=-date&_count=3';
    while (url) {
      const page = await get(url);
      expect(page.statusCode, page.body).toBe(200);
      const b = page.json() as {
        link: { relation: string; url: string }[];
        entry?: { resource: { id: string } }[];
      };
      seen.push(...(b.entry ?? []).map((e) => e.resource.id));
      const next = b.link.find((l) => l.relation === 'next')?.url;
      url = next ? next.slice(next.indexOf('Observation?')) : undefined;
    }
    expect(seen).toHaveLength(10);
    expect(new Set(seen).size).toBe(10);
  });
});
