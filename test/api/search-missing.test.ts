// `:missing` and `:not` through the API (issue 30, migration 028): creates, updates and deletes keep sp_missing in
// step (the next search answers from it), another project's resources without the value are never found, a token
// scoped to another type is refused, and malformed or huge values answer 4xx, never 5xx.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { createNamed, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';

type Json = Record<string, unknown>;
const obs = (status: string, subject?: string): Json => ({
  resourceType: 'Observation',
  status,
  code: { text: 'weight' },
  ...(subject ? { subject: { reference: subject } } : {}),
});

describe.each(testDatabases())(':missing and :not through the API on $name', (database) => {
  let t: TestApp;
  let token: string;
  let projectId: string;
  const id: Record<string, string> = {};
  beforeAll(async () => {
    t = await startTestApp(database);
    const ours = await t.newProject();
    token = ours.adminToken;
    projectId = ours.projectId;
    const theirs = await t.newProject();
    Object.assign(id, await createNamed(t, token, { p: { resourceType: 'Patient' } }));
    Object.assign(
      id,
      await createNamed(t, token, {
        with: obs('final', `Patient/${id.p!}`),
        without: obs('final'),
        amended: obs('amended'),
      }),
    );
    // Theirs: without a subject and amended, all of them.
    await createNamed(t, theirs.adminToken, { a: obs('amended'), b: obs('amended'), c: obs('cancelled') });
  });
  afterAll(async () => t?.close());

  const get = (url: string, tok = token) => t.request({ method: 'GET', url: `${t.fhir}/${url}`, token: tok });
  const ids = async (url: string): Promise<string[]> => {
    const res = await get(url);
    expect(res.statusCode, res.body).toBe(200);
    const entry = (res.json() as { entry?: { resource: { id: string } }[] }).entry ?? [];
    return entry.map((e) => e.resource.id).sort();
  };

  it('answers from the caller’s project only, and follows updates and deletes', async () => {
    expect(await ids('Observation?subject:missing=true')).toEqual([id.amended!, id.without!].sort());
    expect(await ids('Observation?status:not=final')).toEqual([id.amended!]);
    expect(await ids('Observation?status:not=final,amended')).toEqual([]);
    const put = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Observation/${id.without!}`,
      token,
      payload: { ...obs('cancelled', `Patient/${id.p!}`), id: id.without! },
    });
    expect(put.statusCode, put.body).toBe(200);
    expect(await ids('Observation?subject:missing=true')).toEqual([id.amended!]);
    expect(await ids('Observation?status:not=final')).toEqual([id.amended!, id.without!].sort());
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/Observation/${id.amended!}`, token });
    expect(del.statusCode).toBeLessThan(300);
    expect(await ids('Observation?subject:missing=true')).toEqual([]);
    expect(await ids('Observation?status:not=final')).toEqual([id.without!]);
  });

  it('refuses a token scoped to another type', async () => {
    const patientsOnly = await scopedClientToken(t, token, projectId, 'system/Patient.rs');
    for (const q of ['subject:missing=true', 'status:not=final']) {
      const res = await get(`Observation?${q}`, patientsOnly);
      expect(res.statusCode, q).toBe(403);
    }
  });

  it('answers malformed and huge values with 4xx, never 5xx', async () => {
    const huge = Array.from({ length: 3000 }, (_, i) => `v${i}-${'x'.repeat(20)}`).join(',');
    for (const q of [
      'subject:missing=maybe',
      'subject:missing=',
      'status:not=',
      'status:missing=true,false',
      '_lastUpdated:missing=true',
      `status:not=${huge}`,
      `status:not=${'y'.repeat(100_000)}`,
      'status:not=a%00b',
    ]) {
      const res = await get(`Observation?${q}`);
      expect(res.statusCode, `${q.slice(0, 40)} ${res.body.slice(0, 200)}`).toBeLessThan(500);
    }
    const bad = await get('Observation?subject:missing=maybe');
    expect(bad.statusCode).toBe(400);
    expect((bad.json() as { resourceType: string }).resourceType).toBe('OperationOutcome');
  });
});
