// A document Bundle ($document, $summary; API.md §11) holds the resources the Composition and its entries reference,
// not Cinder's own provenance: `meta.author` (e.g. ClientApplication/<id>) is no FHIR reference of the resource.
// Found by the docs check of issue 29; this test fails until document-bundle.ts stops descending into `meta`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleRefs, createNamed, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';

describe.each(testDatabases())('document Bundles leave meta.author out on $name', (database) => {
  let t: TestApp;
  let admin: string;
  const id: Record<string, string> = {};

  beforeAll(async () => {
    t = await startTestApp(database);
    admin = (await t.newProject('Meta author')).adminToken;
    Object.assign(
      id,
      await createNamed(t, admin, { patient: { resourceType: 'Patient', name: [{ family: 'Meta' }] } }),
    );
    Object.assign(
      id,
      await createNamed(t, admin, {
        med: {
          resourceType: 'MedicationStatement',
          status: 'active',
          subject: { reference: `Patient/${id.patient}` },
          medicationCodeableConcept: { text: 'Metformin' },
        },
        doc: {
          resourceType: 'Composition',
          status: 'final',
          type: { text: 'Note' },
          subject: { reference: `Patient/${id.patient}` },
          date: '2024-05-01',
          author: [{ reference: `Patient/${id.patient}` }],
          title: 'Note',
        },
      }),
    );
  });
  afterAll(async () => t?.close());

  it('$document holds only what the Composition references', async () => {
    const res = await t.request({
      method: 'GET',
      url: `${t.fhir}/Composition/${id.doc}/$document`,
      token: admin,
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(bundleRefs(res.json())).toEqual([`Composition/${id.doc}`, `Patient/${id.patient}`]);
  });

  it('$summary holds no ClientApplication', async () => {
    const res = await t.request({
      method: 'GET',
      url: `${t.fhir}/Patient/${id.patient}/$summary`,
      token: admin,
    });
    expect(res.statusCode, res.body).toBe(200);
    const types = bundleRefs(res.json()).map((r) => r.split('/')[0]);
    expect(types).toContain('MedicationStatement');
    expect(types).not.toContain('ClientApplication');
  });
});
