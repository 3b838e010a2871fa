// Synthea patients (the fixture in test/fixtures/synthea-r4, transaction Bundles) load as transactions, and their
// resources are then found by search.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { readSyntheaBundles } from '../support/synthea.js';

const bundles = readSyntheaBundles();

describe.each(testDatabases())('Synthea on $name', (database) => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await startTestApp(database);
    token = (await t.newProject('Synthea')).adminToken;
  });
  afterAll(async () => t?.close());

  it('loads every fixture patient as a transaction and finds their resources by search', async () => {
    expect(bundles).toHaveLength(7);
    let resources = 0;
    for (const { file, bundle } of bundles) {
      const expected = new Map<string, number>();
      for (const e of bundle.entry) {
        const type = e.resource.resourceType as string;
        expected.set(type, (expected.get(type) ?? 0) + 1);
      }
      const res = await t.request({ method: 'POST', url: t.fhir, token, payload: bundle });
      expect(res.statusCode, `${file}: ${res.body.slice(0, 300)}`).toBe(200);
      const out = res.json() as { entry: { response: { status: string; location: string } }[] };
      expect(out.entry).toHaveLength(bundle.entry.length);
      expect(out.entry.every((e) => e.response.status.startsWith('201'))).toBe(true);
      resources += out.entry.length;
      const patientIndex = bundle.entry.findIndex((e) => e.resource.resourceType === 'Patient');
      const patientId = out.entry[patientIndex]?.response.location.split('/')[1] as string;
      for (const type of ['Observation', 'Encounter', 'Condition']) {
        const search = await t.request({
          method: 'GET',
          url: `${t.fhir}/${type}?subject=Patient/${patientId}&_summary=count`,
          token,
        });
        expect(search.statusCode).toBe(200);
        expect(search.json().total, `${file} ${type}`).toBe(expected.get(type) ?? 0);
      }
    }
    expect(resources).toBe(768);
  }, 300_000);
});
