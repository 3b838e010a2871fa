// batch and transaction Bundles: all-or-nothing transactions, urn:uuid rewriting, per-entry batch outcomes.
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, useProjectApp, postResource } from '../support/app.js';

const PATIENT_URN = 'urn:uuid:6f1c7d1e-0000-4000-8000-000000000001';
const OBSERVATION_URN = 'urn:uuid:6f1c7d1e-0000-4000-8000-000000000002';

const statuses = (body: { entry: { response: { status: string } }[] }): string[] =>
  body.entry.map((e) => e.response.status);

describe.each(testDatabases())('Bundles on $name', (database) => {
  const ctx = useProjectApp(database);
  const findFamily = async (family: string): Promise<unknown[]> =>
    (
      await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/Patient?family=${family}`, token: ctx.token })
    ).json().entry ?? [];

  it('commits a transaction and rewrites urn:uuid references', async () => {
    const observation = {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'weight' },
      subject: { reference: PATIENT_URN },
    };
    const res = await postBundle(ctx.t, ctx.token, 'transaction', [
      createEntry(observation, OBSERVATION_URN),
      createEntry({ resourceType: 'Patient', name: [{ family: 'Transact' }] }, PATIENT_URN),
    ]);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.type).toBe('transaction-response');
    expect(statuses(body)).toEqual(['201 Created', '201 Created']);
    const patientId = body.entry[1].resource.id;
    expect(body.entry[0].resource.subject.reference).toBe(`Patient/${patientId}`);
    const obs = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Observation?subject=Patient/${patientId}`,
      token: ctx.token,
    });
    expect(obs.json().entry).toHaveLength(1);
  });

  it('rolls back a transaction when any entry fails', async () => {
    const res = await postBundle(ctx.t, ctx.token, 'transaction', [
      createEntry({ resourceType: 'Patient', name: [{ family: 'Rollback' }] }),
      createEntry({ resourceType: 'Patient', birthDate: 'not-a-date' }),
    ]);
    expect(res.statusCode).toBe(400);
    expect(res.json().resourceType).toBe('OperationOutcome');
    expect(res.json().issue[0].details.text).toMatch(/entry\[1\]/);
    expect(await findFamily('Rollback')).toHaveLength(0);
  });

  it('rolls back when a later PUT fails its If-Match', async () => {
    const created = (
      await postResource(ctx.t, ctx.token, { resourceType: 'Patient', name: [{ family: 'Versioned' }] })
    ).json();
    const res = await postBundle(ctx.t, ctx.token, 'transaction', [
      createEntry({ resourceType: 'Patient', name: [{ family: 'RollbackTwo' }] }),
      {
        resource: { ...created, gender: 'male' },
        request: { method: 'PUT', url: `Patient/${created.id}`, ifMatch: 'W/"7"' },
      },
    ]);
    expect(res.statusCode).toBe(412);
    expect(await findFamily('RollbackTwo')).toHaveLength(0);
  });

  it('processes batch entries independently', async () => {
    const res = await postBundle(ctx.t, ctx.token, 'batch', [
      createEntry({ resourceType: 'Patient', name: [{ family: 'BatchOk' }] }),
      createEntry({ resourceType: 'Patient', birthDate: 'nope' }),
      { request: { method: 'GET', url: 'Patient/does-not-exist' } },
      { request: { method: 'GET', url: 'Patient?family=BatchOk' } },
    ]);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.type).toBe('batch-response');
    expect(statuses(body).map((s) => s.slice(0, 3))).toEqual(['201', '400', '404', '200']);
    expect(body.entry[1].response.outcome.resourceType).toBe('OperationOutcome');
  });

  it('rejects Bundles that are not batch or transaction', async () => {
    const res = await postBundle(ctx.t, ctx.token, 'collection' as 'batch', []);
    expect(res.statusCode).toBe(400);
    const notBundle = await ctx.t.request({
      method: 'POST',
      url: ctx.t.fhir,
      token: ctx.token,
      payload: { resourceType: 'Patient' },
    });
    expect(notBundle.statusCode).toBe(400);
  });
});
