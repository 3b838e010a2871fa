// Composition/<id>/$document (R4 composition-operation-document, API.md §11): the document Bundle of a stored
// Composition, with what it references (nested sections too) that the caller may read, and nothing of another project.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleRefs, createNamed, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { patientToken } from '../support/patient-token.js';

type Json = Record<string, unknown>;
const refsOf = bundleRefs;

describe.each(testDatabases())('Composition document on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let projectId: string;
  let otherAdmin: string;
  const id: Record<string, string> = {};

  const document = (token: string, composition: string, query = '') =>
    t.request({ method: 'GET', url: `${t.fhir}/Composition/${composition}/$document${query}`, token });
  const createAll = async (token: string, named: Record<string, Json>): Promise<void> => {
    Object.assign(id, await createNamed(t, token, named));
  };
  const composition = (extra: Json = {}): Json => ({
    resourceType: 'Composition',
    status: 'final',
    type: { coding: [{ system: 'http://loinc.org', code: '11488-4' }] },
    subject: { reference: `Patient/${id.patient}` },
    encounter: { reference: `Encounter/${id.encounter}` },
    date: '2024-05-01',
    author: [{ reference: `Practitioner/${id.author}` }],
    title: 'Consultation note',
    attester: [{ mode: 'legal', party: { reference: `Practitioner/${id.attester}` } }],
    custodian: { reference: `Organization/${id.org}` },
    section: [
      {
        title: 'Findings',
        entry: [{ reference: `Observation/${id.obs}` }],
        section: [{ title: 'Nested', entry: [{ reference: `Condition/${id.condition}` }] }],
      },
    ],
    ...extra,
  });

  beforeAll(async () => {
    t = await startTestApp(database);
    const a = await t.newProject('Document A');
    admin = a.adminToken;
    projectId = a.projectId;
    otherAdmin = (await t.newProject('Document B')).adminToken;
    await createAll(admin, {
      patient: { resourceType: 'Patient', name: [{ family: 'Documented' }] },
      author: { resourceType: 'Practitioner', name: [{ family: 'Author' }] },
      attester: { resourceType: 'Practitioner', name: [{ family: 'Attester' }] },
      org: { resourceType: 'Organization', name: 'Custodian' },
      lab: { resourceType: 'Organization', name: 'Lab' },
      other: { resourceType: 'Patient', name: [{ family: 'Other' }] },
    });
    await createAll(otherAdmin, { foreign: { resourceType: 'Organization', name: 'Not yours' } });
    await createAll(admin, {
      encounter: {
        resourceType: 'Encounter',
        status: 'finished',
        class: { code: 'AMB' },
        subject: { reference: `Patient/${id.patient}` },
      },
      obs: {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'Finding' },
        subject: { reference: `Patient/${id.patient}` },
        performer: [{ reference: `Organization/${id.lab}` }],
      },
      condition: {
        resourceType: 'Condition',
        code: { text: 'Nested' },
        subject: { reference: `Patient/${id.patient}` },
      },
    });
    await createAll(admin, {
      doc: composition(),
      // References to a missing resource and to another project's: left out alike.
      dangling: composition({
        custodian: { reference: `Organization/${id.foreign}` },
        section: [{ title: 'Missing', entry: [{ reference: 'Observation/no-such-observation' }] }],
      }),
      otherPatients: composition({ subject: { reference: `Patient/${id.other}` }, section: undefined }),
    });
  });
  afterAll(async () => t?.close());

  it('answers a document Bundle: the Composition first, then everything it references', async () => {
    const res = await document(admin, id.doc as string);
    expect(res.statusCode, res.body).toBe(200);
    const b = res.json() as Json;
    expect(b.type).toBe('document');
    expect((b.identifier as Json).system).toBe('urn:ietf:rfc:3986');
    expect(typeof (b.identifier as Json).value).toBe('string');
    expect(Number.isNaN(Date.parse(b.timestamp as string))).toBe(false);
    const refs = refsOf(b);
    expect(refs[0]).toBe(`Composition/${id.doc}`);
    expect(refs.slice(1, 6)).toEqual([
      `Patient/${id.patient}`,
      `Encounter/${id.encounter}`,
      `Practitioner/${id.author}`,
      `Practitioner/${id.attester}`,
      `Organization/${id.org}`,
    ]);
    // Section entries, nested ones too, and one level of what they reference (the Observation's performer).
    expect(refs).toEqual(
      expect.arrayContaining([
        `Observation/${id.obs}`,
        `Condition/${id.condition}`,
        `Organization/${id.lab}`,
      ]),
    );
    expect(new Set(refs).size).toBe(refs.length);
    for (const e of b.entry as { fullUrl: string; resource: Json }[])
      expect(e.fullUrl).toBe(
        `${t.config.baseUrl}fhir/R4/${e.resource.resourceType as string}/${e.resource.id as string}`,
      );
  });

  it("leaves out references that are missing or another project's", async () => {
    const b = (await document(admin, id.dangling as string)).json() as Json;
    const refs = refsOf(b);
    expect(refs).not.toContain(`Organization/${id.foreign}`);
    expect(refs.some((r) => r.startsWith('Observation/'))).toBe(false);
    expect(refs).toContain(`Patient/${id.patient}`);
  });

  it("answers 404 for another project's Composition and an unknown one", async () => {
    const other = await document(otherAdmin, id.doc as string);
    expect(other.statusCode).toBe(404);
    expect(other.json().resourceType).toBe('OperationOutcome');
    expect((await document(admin, 'no-such-composition')).statusCode).toBe(404);
  });

  it('follows the narrow token: 403 without Composition read, and only the readable types', async () => {
    const none = await scopedClientToken(t, admin, projectId, 'system/Patient.rs');
    expect((await document(none, id.doc as string)).statusCode).toBe(403);
    const some = await scopedClientToken(t, admin, projectId, 'system/Composition.rs system/Patient.rs');
    const b = (await document(some, id.doc as string)).json() as Json;
    expect(refsOf(b)).toEqual([`Composition/${id.doc}`, `Patient/${id.patient}`]);
  });

  it("gives a patient token its own patient's document and not another's", async () => {
    const me = await patientToken(t, admin, projectId, 'patient/*.rs');
    await createAll(admin, {
      mine: composition({
        subject: { reference: `Patient/${me.patient}` },
        custodian: undefined,
        section: undefined,
      }),
    });
    const own = await document(me.token, id.mine as string);
    expect(own.statusCode, own.body).toBe(200);
    const refs = refsOf(own.json() as Json);
    expect(refs).toContain(`Patient/${me.patient}`);
    expect(refs).not.toContain(`Patient/${id.patient}`);
    expect((await document(me.token, id.otherPatients as string)).statusCode).toBe(404);
  });

  it('refuses persist=true and unknown or malformed parameters with 400', async () => {
    for (const query of ['?persist=true', '?persist=maybe', '?graph=http://example.org/g', '?x=1']) {
      const res = await document(admin, id.doc as string, query);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    expect((await document(admin, id.doc as string, '?persist=false')).statusCode).toBe(200);
    // A huge or strange id is not found, never a server error.
    for (const bad of ['x'.repeat(5000), '%00%01', '..%2F..%2FPatient']) {
      const res = await document(admin, bad);
      expect(res.statusCode, bad.slice(0, 20)).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, bad.slice(0, 20)).toBeLessThan(500);
    }
  });

  it('is in the CapabilityStatement with $summary and $lastn', async () => {
    const cs = (await t.request({ method: 'GET', url: `${t.fhir}/metadata` })).json() as {
      rest: { resource: { type: string; operation?: { name: string; definition: string }[] }[] }[];
    };
    const ops = (type: string) => cs.rest[0]!.resource.find((r) => r.type === type)?.operation ?? [];
    expect(ops('Composition').map((o) => o.name)).toContain('document');
    expect(ops('Patient').find((o) => o.name === 'summary')?.definition).toBe(
      'http://hl7.org/fhir/uv/ips/OperationDefinition/summary',
    );
    expect(ops('Observation').map((o) => o.name)).toContain('lastn');
  });
});
