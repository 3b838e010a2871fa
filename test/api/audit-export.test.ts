// AuditEvents in bulk export (API.md §10 "AuditEvents export with $export", issue 28): a project admin's system
// export holds its project's AuditEvents exactly as served, a Patient export only those about its patients, another
// project's never; members do not export them; the CapabilityStatement says what AuditEvent supports.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditEvents, created, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { downloadOutput, jobIdOf, kickOff, startExport, waitForJob } from '../support/jobs.js';

type Json = Record<string, unknown>;

describe.each(testDatabases())('AuditEvents in bulk export on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  let patient: string;
  let other: string;

  beforeAll(async () => {
    t = await startTestApp(database, {}, { jobs: {} });
    a = await t.newProject('Export audit A');
    b = await t.newProject('Export audit B');
    patient = (await created(t, a.adminToken, { resourceType: 'Patient' })).id as string;
    other = (await created(t, a.adminToken, { resourceType: 'Patient' })).id as string;
    await created(t, b.adminToken, { resourceType: 'Patient' });
    await t.request({ method: 'GET', url: `${t.fhir}/Patient/${patient}`, token: a.adminToken });
    await auditEvents(t, a.adminToken, `patient=${patient}&subtype=read`);
  });
  afterAll(async () => t?.close());

  it("a project admin's system export holds the project's AuditEvents as served, and no other project's", async () => {
    const served = await auditEvents(t, a.adminToken, '_count=1000');
    const job = await waitForJob(t, await startExport(t, a.adminToken, '_type=AuditEvent'), a.adminToken);
    expect(job.status).toBe('completed');
    const out = await downloadOutput(t, job, a.adminToken);
    const exported = out.AuditEvent ?? [];
    const byId = new Map(exported.map((e) => [e.id as string, e]));
    for (const e of served) expect(byId.get(e.id as string)).toEqual(e);
    const bEvents = await auditEvents(t, b.adminToken, '_count=1000');
    expect(bEvents.length).toBeGreaterThan(0);
    for (const e of bEvents) expect(byId.has(e.id as string)).toBe(false);
  });

  it('a Patient export holds only the AuditEvents about that patient', async () => {
    const kicked = await kickOff(t, a.adminToken, 'Patient/$export', {
      parameter: [
        { name: '_type', valueString: 'Patient,AuditEvent' },
        { name: 'patient', valueReference: { reference: `Patient/${patient}` } },
      ],
    });
    const job = await waitForJob(t, jobIdOf(kicked), a.adminToken);
    const out = await downloadOutput(t, job, a.adminToken);
    const events = out.AuditEvent ?? [];
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) expect(JSON.stringify(e.entity)).toContain(`Patient/${patient}`);
    // The other patient's create is about that patient only: not exported.
    const [otherCreate] = await auditEvents(t, a.adminToken, `entity=Patient/${other}&subtype=create`);
    expect(events.map((e) => e.id)).not.toContain((otherCreate as Json).id);
  });

  it('a member exports no AuditEvents; AuditEvent has no conditional writes', async () => {
    const job = await waitForJob(t, await startExport(t, a.memberToken, ''), a.memberToken);
    const out = await downloadOutput(t, job, a.memberToken);
    expect(out.AuditEvent).toBeUndefined();
    const cond = await t.request({
      method: 'POST',
      url: `${t.fhir}/AuditEvent`,
      token: a.adminToken,
      headers: { 'if-none-exist': 'outcome=0' },
      payload: { resourceType: 'AuditEvent' },
    });
    expect(cond.statusCode).toBe(400);
  });

  it('the CapabilityStatement lists what AuditEvent supports', async () => {
    const cs = (await t.request({ method: 'GET', url: `${t.fhir}/metadata`, token: null })).json() as {
      rest: { resource: Json[] }[];
    };
    const entry = cs.rest[0]?.resource.find((r) => r.type === 'AuditEvent') as Json;
    expect((entry.interaction as { code: string }[]).map((i) => i.code).sort()).toEqual(
      ['create', 'read', 'search-type', 'vread'].sort(),
    );
    expect((entry.searchParam as { name: string }[]).map((p) => p.name)).toEqual(
      expect.arrayContaining(['date', 'agent', 'entity', 'patient', 'type', 'subtype', 'action', 'outcome']),
    );
  });
});
