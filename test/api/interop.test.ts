// Third-party clients from the npm registry drive Cinder over a real port: fhir-kit-client and MedplumClient.
import { MedplumClient } from '@medplum/core';
import { Client } from 'fhir-kit-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { freePort } from '../support/listen.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET, startTestApp, type TestApp } from '../support/app.js';

describe.each(testDatabases())('third-party clients on $name', (database) => {
  let t: TestApp;
  let base: string;
  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}/`;
    t = await startTestApp(database, { baseUrl: base });
    await t.app.listen({ port, host: '127.0.0.1' });
  });
  afterAll(async () => t?.close());

  it('fhir-kit-client creates, reads and searches', async () => {
    const client = new Client({ baseUrl: `${base}fhir/R4`, bearerToken: t.adminToken });
    const created = (await client.create({
      resourceType: 'Patient',
      body: { resourceType: 'Patient', name: [{ family: 'Kit', given: ['Fhir'] }] },
    })) as unknown as { id: string };
    expect(created.id).toBeTruthy();
    const read = (await client.read({ resourceType: 'Patient', id: created.id })) as unknown as {
      name: { family: string }[];
    };
    expect(read.name[0]?.family).toBe('Kit');
    const found = (await client.search({ resourceType: 'Patient', searchParams: { family: 'Kit' } })) as {
      entry?: { resource: { id: string } }[];
    };
    expect(found.entry?.map((e) => e.resource.id)).toContain(created.id);
    const meta = (await client.capabilityStatement()) as unknown as { fhirVersion: string };
    expect(meta.fhirVersion).toBe('4.0.1');
  });

  it('MedplumClient logs in with client credentials, then creates, reads and searches', async () => {
    const medplum = new MedplumClient({ baseUrl: base, fetch, clientId: ADMIN_CLIENT_ID });
    await medplum.startClientLogin(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
    expect(medplum.getProfile()?.id).toBe(ADMIN_CLIENT_ID);
    const created = await medplum.createResource({
      resourceType: 'Patient',
      name: [{ family: 'Medplum', given: ['Via'] }],
    });
    expect(created.id).toBeTruthy();
    const read = await medplum.readResource('Patient', created.id as string);
    expect(read.name?.[0]?.family).toBe('Medplum');
    const bundle = await medplum.search('Patient', { family: 'Medplum' });
    expect(bundle.entry?.map((e: { resource?: { id?: string } }) => e.resource?.id)).toContain(created.id);
  });

  it('MedplumClient upserts (conditional update), validates, and pages with _offset', async () => {
    const medplum = new MedplumClient({ baseUrl: base, fetch, clientId: ADMIN_CLIENT_ID });
    await medplum.startClientLogin(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
    const identifier = [{ system: 'https://example.org/interop', value: `up-${Date.now()}` }];
    const query = `identifier=${identifier[0]?.system}|${identifier[0]?.value}`;
    const first = await medplum.upsertResource(
      { resourceType: 'Patient', identifier, name: [{ family: 'Up' }] },
      query,
    );
    const second = await medplum.upsertResource(
      { resourceType: 'Patient', identifier, name: [{ family: 'Upserted' }] },
      query,
    );
    expect(second.id).toBe(first.id);
    expect((second as { meta?: { versionId?: string } }).meta?.versionId).toBe('2');
    const ok = await medplum.validateResource({ resourceType: 'Patient', name: [{ family: 'Valid' }] });
    expect(ok.issue?.[0]?.severity).toBe('information');
    const bad = await medplum.validateResource({ resourceType: 'Patient', gender: 42 } as never);
    expect(bad.issue?.[0]).toMatchObject({ severity: 'error', expression: ['Patient.gender'] });
    for (let i = 0; i < 3; i++)
      await medplum.createResource({ resourceType: 'Patient', name: [{ family: 'OffsetPage' }] });
    const page2 = await medplum.search('Patient', { family: 'OffsetPage', _count: '2', _offset: '2' });
    expect(page2.entry).toHaveLength(1);
    expect(page2.link?.find((l: { relation?: string }) => l.relation === 'previous')?.url).toContain(
      '_offset=0',
    );
  });
});
