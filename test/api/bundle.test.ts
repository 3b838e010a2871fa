// batch and transaction Bundles: all-or-nothing transactions, urn:uuid rewriting, per-entry batch outcomes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp } from '../support/app.js';

describe.each(testDatabases())('Bundles on $name', (database) => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await startTestApp(database);
    token = (await t.newProject()).adminToken;
  });
  afterAll(async () => t?.close());

  it('commits a transaction and rewrites urn:uuid references', async () => {
    const res = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            fullUrl: 'urn:uuid:6f1c7d1e-0000-4000-8000-000000000002',
            resource: {
              resourceType: 'Observation',
              status: 'final',
              code: { text: 'weight' },
              subject: { reference: 'urn:uuid:6f1c7d1e-0000-4000-8000-000000000001' },
            },
            request: { method: 'POST', url: 'Observation' },
          },
          {
            fullUrl: 'urn:uuid:6f1c7d1e-0000-4000-8000-000000000001',
            resource: { resourceType: 'Patient', name: [{ family: 'Transact' }] },
            request: { method: 'POST', url: 'Patient' },
          },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.type).toBe('transaction-response');
    expect(body.entry.map((e: { response: { status: string } }) => e.response.status)).toEqual([
      '201 Created',
      '201 Created',
    ]);
    const patientId = body.entry[1].resource.id;
    expect(body.entry[0].resource.subject.reference).toBe(`Patient/${patientId}`);
    const obs = await t.request({
      method: 'GET',
      url: `${t.fhir}/Observation?subject=Patient/${patientId}`,
      token,
    });
    expect(obs.json().entry).toHaveLength(1);
  });

  it('rolls back a transaction when any entry fails', async () => {
    const res = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            resource: { resourceType: 'Patient', name: [{ family: 'Rollback' }] },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            resource: { resourceType: 'Patient', birthDate: 'not-a-date' },
            request: { method: 'POST', url: 'Patient' },
          },
        ],
      },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().resourceType).toBe('OperationOutcome');
    expect(res.json().issue[0].details.text).toMatch(/entry\[1\]/);
    const search = await t.request({ method: 'GET', url: `${t.fhir}/Patient?family=Rollback`, token });
    expect(search.json().entry ?? []).toHaveLength(0);
  });

  it('rolls back when a later PUT fails its If-Match', async () => {
    const created = (
      await t.request({
        method: 'POST',
        url: `${t.fhir}/Patient`,
        token,
        payload: { resourceType: 'Patient', name: [{ family: 'Versioned' }] },
      })
    ).json();
    const res = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            resource: { resourceType: 'Patient', name: [{ family: 'RollbackTwo' }] },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            resource: { ...created, gender: 'male' },
            request: { method: 'PUT', url: `Patient/${created.id}`, ifMatch: 'W/"7"' },
          },
        ],
      },
    });
    expect(res.statusCode).toBe(412);
    expect(
      (await t.request({ method: 'GET', url: `${t.fhir}/Patient?family=RollbackTwo`, token })).json().entry ??
        [],
    ).toHaveLength(0);
  });

  it('processes batch entries independently', async () => {
    const res = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: {
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            resource: { resourceType: 'Patient', name: [{ family: 'BatchOk' }] },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            resource: { resourceType: 'Patient', birthDate: 'nope' },
            request: { method: 'POST', url: 'Patient' },
          },
          { request: { method: 'GET', url: 'Patient/does-not-exist' } },
          { request: { method: 'GET', url: 'Patient?family=BatchOk' } },
        ],
      },
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.type).toBe('batch-response');
    expect(body.entry.map((e: { response: { status: string } }) => e.response.status.slice(0, 3))).toEqual([
      '201',
      '400',
      '404',
      '200',
    ]);
    expect(body.entry[1].response.outcome.resourceType).toBe('OperationOutcome');
  });

  it('rejects Bundles that are not batch or transaction', async () => {
    const res = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: { resourceType: 'Bundle', type: 'collection' },
    });
    expect(res.statusCode).toBe(400);
    const notBundle = await t.request({
      method: 'POST',
      url: t.fhir,
      token,
      payload: { resourceType: 'Patient' },
    });
    expect(notBundle.statusCode).toBe(400);
  });
});
