// What app developers reach for in their first week (issue 14), through client libraries nobody here wrote:
// fhir-kit-client and MedplumClient over a real port. Conditional update, $validate, _offset, compartment search,
// $everything, previous pages, reverse chains and composite search.
import { MedplumClient } from '@medplum/core';
import { Client } from 'fhir-kit-client';
import { beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET } from '../support/app.js';
import { useListeningApp } from '../support/listen.js';

type Bundle = {
  resourceType: 'Bundle';
  link?: { relation: string; url: string }[];
  entry?: { resource: { resourceType: string; id: string } }[];
};
const ids = (b: unknown): string[] => ((b as Bundle).entry ?? []).map((e) => e.resource.id);

describe.each(testDatabases())('client libraries on $name', (database) => {
  const ctx = useListeningApp(database);
  const family = `Lib${Date.now()}`;
  let kit: Client;
  let patientId = '';

  beforeAll(async () => {
    kit = new Client({ baseUrl: `${ctx.base}fhir/R4`, bearerToken: ctx.t.adminToken });
    const identifier = [{ system: 'https://example.org/kit', value: family }];
    // Conditional update as create, then as update of the one match.
    const created = (await kit.update({
      resourceType: 'Patient',
      searchParams: { identifier: `https://example.org/kit|${family}` },
      body: { resourceType: 'Patient', identifier, name: [{ family, given: ['Kit'] }] },
    })) as unknown as { id: string };
    patientId = created.id;
    const again = (await kit.update({
      resourceType: 'Patient',
      searchParams: { identifier: `https://example.org/kit|${family}` },
      body: { resourceType: 'Patient', identifier, name: [{ family, given: ['Kit', 'Again'] }] },
    })) as unknown as { id: string; meta: { versionId: string } };
    expect(again.id).toBe(patientId);
    expect(again.meta.versionId).toBe('2');
    for (const [code, value] of [
      ['8480-6', 120],
      ['8480-6', 135],
      ['8462-4', 80],
    ] as const) {
      await kit.create({
        resourceType: 'Observation',
        body: {
          resourceType: 'Observation',
          status: 'final',
          subject: { reference: `Patient/${patientId}` },
          code: { coding: [{ system: 'http://loinc.org', code }] },
          valueQuantity: { value, unit: 'mmHg' },
        },
      });
    }
  });

  it('fhir-kit-client: $validate, compartment search, $everything, _has and composite', async () => {
    const ok = (await kit.operation({
      name: '$validate',
      resourceType: 'Patient',
      input: { resourceType: 'Patient', name: [{ family: 'Valid' }] },
    })) as unknown as { resourceType: string; issue: { severity: string }[] };
    expect(ok.resourceType).toBe('OperationOutcome');
    expect(ok.issue.every((i) => i.severity !== 'error')).toBe(true);
    const bad = (await kit.operation({
      name: '$validate',
      resourceType: 'Patient',
      input: { resourceType: 'Patient', birthDate: 'yesterday' },
    })) as unknown as { issue: { severity: string; expression?: string[] }[] };
    expect(bad.issue[0]).toMatchObject({ severity: 'error', expression: ['Patient.birthDate'] });

    const compartment = await kit.compartmentSearch({
      resourceType: 'Observation',
      compartment: { resourceType: 'Patient', id: patientId },
      searchParams: { code: '8480-6' },
    });
    expect(ids(compartment)).toHaveLength(2);
    const everything = await kit.operation({
      name: '$everything',
      resourceType: 'Patient',
      id: patientId,
      method: 'GET',
    });
    expect(ids(everything)).toContain(patientId);
    expect(ids(everything)).toHaveLength(4);

    const has = await kit.search({
      resourceType: 'Patient',
      searchParams: { '_has:Observation:subject:code': '8462-4', family },
    });
    expect(ids(has)).toEqual([patientId]);
    const composite = await kit.search({
      resourceType: 'Observation',
      searchParams: { 'code-value-quantity': '8480-6$gt130', subject: `Patient/${patientId}` },
    });
    expect(ids(composite)).toHaveLength(1);
  });

  it('fhir-kit-client walks pages forwards and back (nextPage, prevPage)', async () => {
    const first = (await kit.search({
      resourceType: 'Observation',
      searchParams: { subject: `Patient/${patientId}`, _count: 1 },
    })) as unknown as Bundle;
    const second = (await kit.nextPage({ bundle: first as never })) as unknown as Bundle;
    const third = (await kit.nextPage({ bundle: second as never })) as unknown as Bundle;
    expect(kit.nextPage({ bundle: third as never })).toBeUndefined();
    const walked = [first, second, third].flatMap(ids);
    expect(new Set(walked).size).toBe(3);
    const back = (await kit.prevPage({ bundle: third as never })) as unknown as Bundle;
    expect(ids(back)).toEqual(ids(second));
    const start = (await kit.prevPage({ bundle: back as never })) as unknown as Bundle;
    expect(ids(start)).toEqual(ids(first));
    expect(kit.prevPage({ bundle: start as never })).toBeUndefined();
    // System history (fhir-kit-client's history() without a type) holds the Patient's two versions.
    const sys = (await kit.history({ options: {} } as never)) as unknown as Bundle & { type: string };
    expect(sys.type).toBe('history');
    expect(ids(sys).filter((id) => id === patientId)).toHaveLength(2);
  });

  it('MedplumClient: compartment search, $everything and _offset pages with previous links', async () => {
    const medplum = new MedplumClient({ baseUrl: ctx.base, fetch, clientId: ADMIN_CLIENT_ID });
    await medplum.startClientLogin(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
    const inCompartment = await medplum.get(medplum.fhirUrl('Patient', patientId, 'Observation'));
    expect(ids(inCompartment)).toHaveLength(3);
    const everything = await medplum.readPatientEverything(patientId);
    expect(ids(everything)).toHaveLength(4);
    const page = await medplum.search('Observation', {
      subject: `Patient/${patientId}`,
      _count: '2',
      _offset: '2',
    });
    expect(page.entry).toHaveLength(1);
    const previous = page.link?.find((l: { relation?: string }) => l.relation === 'previous')?.url as string;
    expect(ids(await medplum.get(previous))).toHaveLength(2);
  });
});
