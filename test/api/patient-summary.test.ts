// Patient/<id>/$summary (IPS 2.0.0, API.md §11): a document Bundle with an IPS Composition first, its sections'
// entries and what they reference, only what the caller may read; another project's patient is not found.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundleRefs, createNamed, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { patientToken } from '../support/patient-token.js';

type Json = Record<string, unknown>;
const LOINC = 'http://loinc.org';
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';
const IPS_COMPOSITION = 'http://hl7.org/fhir/uv/ips/StructureDefinition/Composition-uv-ips';

interface Section {
  title: string;
  code: { coding: { system: string; code: string }[] };
  text: { status: string; div: string };
  entry?: { reference: string }[];
  emptyReason?: { coding: { code: string }[] };
}

const sectionsOf = (bundle: Json): Map<string, Section> => {
  const c = (bundle.entry as { resource: Json }[])[0]!.resource as { section: Section[] };
  return new Map(c.section.map((s) => [s.code.coding[0]!.code, s]));
};
const refsOf = bundleRefs;

describe.each(testDatabases())('Patient summary on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let projectId: string;
  let otherAdmin: string;
  const id: Record<string, string> = {};

  const summary = (token: string, patient: string, query = '') =>
    t.request({ method: 'GET', url: `${t.fhir}/Patient/${patient}/$summary${query}`, token });
  const createAll = async (token: string, named: Record<string, Json>): Promise<void> => {
    Object.assign(id, await createNamed(t, token, named));
  };

  beforeAll(async () => {
    t = await startTestApp(database);
    const a = await t.newProject('Summary A');
    admin = a.adminToken;
    projectId = a.projectId;
    otherAdmin = (await t.newProject('Summary B')).adminToken;
    await createAll(admin, {
      doc: { resourceType: 'Practitioner', name: [{ family: 'Doc' }] },
      med: { resourceType: 'Medication', code: { text: 'aspirin' } },
      patient: { resourceType: 'Patient', name: [{ family: 'Summarised' }] },
      empty: { resourceType: 'Patient', name: [{ family: 'Nothing' }] },
    });
    const p = { reference: `Patient/${id.patient}` };
    await createAll(admin, {
      problem: {
        resourceType: 'Condition',
        clinicalStatus: { coding: [{ code: 'active' }] },
        code: { text: 'Asthma <severe> & "chronic"' },
        subject: p,
        asserter: { reference: `Practitioner/${id.doc}` },
      },
      resolved: {
        resourceType: 'Condition',
        clinicalStatus: { coding: [{ code: 'resolved' }] },
        code: { text: 'Measles' },
        subject: p,
      },
      allergy: { resourceType: 'AllergyIntolerance', code: { text: 'Peanut' }, patient: p },
      medication: {
        resourceType: 'MedicationStatement',
        status: 'active',
        medicationReference: { reference: `Medication/${id.med}` },
        subject: p,
      },
      vaccine: {
        resourceType: 'Immunization',
        status: 'completed',
        vaccineCode: { text: 'MMR' },
        patient: p,
        occurrenceDateTime: '2020-01-01',
      },
      hrOld: {
        resourceType: 'Observation',
        status: 'final',
        category: [{ coding: [{ system: CAT, code: 'vital-signs' }] }],
        code: { coding: [{ system: LOINC, code: '8867-4', display: 'Heart rate' }] },
        subject: p,
        effectiveDateTime: '2023-01-01',
      },
      hrNew: {
        resourceType: 'Observation',
        status: 'final',
        category: [{ coding: [{ system: CAT, code: 'vital-signs' }] }],
        code: { coding: [{ system: LOINC, code: '8867-4', display: 'Heart rate' }] },
        subject: p,
        effectiveDateTime: '2024-01-01',
      },
      lab: {
        resourceType: 'Observation',
        status: 'final',
        category: [{ coding: [{ system: CAT, code: 'laboratory' }] }],
        code: { coding: [{ system: LOINC, code: '2339-0', display: 'Glucose' }] },
        subject: p,
        effectiveDateTime: '2024-02-01',
      },
    });
  });
  afterAll(async () => t?.close());

  it('answers an IPS document: Composition first, sections with entries, every reference in the Bundle', async () => {
    const res = await summary(admin, id.patient as string);
    expect(res.statusCode, res.body).toBe(200);
    const b = res.json() as Json;
    expect(b.resourceType).toBe('Bundle');
    expect(b.type).toBe('document');
    expect((b.identifier as Json).system).toBe('urn:ietf:rfc:3986');
    expect((b.identifier as Json).value).toMatch(/^urn:uuid:[0-9a-f-]{36}$/);
    expect(Number.isNaN(Date.parse(b.timestamp as string))).toBe(false);
    expect(b.total).toBeUndefined();
    const entries = b.entry as { fullUrl: string; resource: Json; search?: unknown }[];
    for (const e of entries) {
      expect(typeof e.fullUrl).toBe('string');
      expect(e.search).toBeUndefined();
    }
    expect(new Set(entries.map((e) => e.fullUrl)).size).toBe(entries.length);
    const c = entries[0]!.resource as Json & { section: Section[]; author: { reference: string }[] };
    expect(c.resourceType).toBe('Composition');
    expect(c.status).toBe('final');
    expect((c.type as { coding: Json[] }).coding[0]).toMatchObject({ system: LOINC, code: '60591-5' });
    expect(c.title).toBe('International Patient Summary');
    expect(Number.isNaN(Date.parse(c.date as string))).toBe(false);
    expect((c.subject as Json).reference).toBe(entries[1]!.fullUrl);
    expect(entries[1]!.resource.id).toBe(id.patient);
    // The author, a Device standing for the server, is in the Bundle.
    const author = entries.find((e) => e.fullUrl === c.author[0]!.reference);
    expect(author?.resource.resourceType).toBe('Device');
    // Every reference of the Composition resolves to an entry's fullUrl.
    const fullUrls = new Set(entries.map((e) => e.fullUrl));
    for (const s of c.section) for (const e of s.entry ?? []) expect(fullUrls).toContain(e.reference);

    const sections = sectionsOf(b);
    const ref = (k: string) => `${t.config.baseUrl}fhir/R4/${k}`;
    expect(sections.get('11450-4')?.entry?.map((e) => e.reference)).toEqual([ref(`Condition/${id.problem}`)]);
    expect(sections.get('11348-0')?.entry?.map((e) => e.reference)).toEqual([
      ref(`Condition/${id.resolved}`),
    ]);
    expect(sections.get('48765-2')?.entry?.map((e) => e.reference)).toEqual([
      ref(`AllergyIntolerance/${id.allergy}`),
    ]);
    expect(sections.get('10160-0')?.entry?.map((e) => e.reference)).toEqual([
      ref(`MedicationStatement/${id.medication}`),
    ]);
    expect(sections.get('11369-6')?.entry).toHaveLength(1);
    // Vital signs and results: the newest Observation per code.
    expect(sections.get('8716-3')?.entry?.map((e) => e.reference)).toEqual([ref(`Observation/${id.hrNew}`)]);
    expect(sections.get('30954-2')?.entry?.map((e) => e.reference)).toEqual([ref(`Observation/${id.lab}`)]);
    expect(sections.has('47519-4')).toBe(false); // no procedures: an optional section is left out
    // What the entries reference, one level: the Medication and the asserting Practitioner.
    expect(refsOf(b)).toEqual(expect.arrayContaining([`Medication/${id.med}`, `Practitioner/${id.doc}`]));
    expect(refsOf(b)).not.toContain(`Observation/${id.hrOld}`);
    // Narrative: XHTML with the text escaped.
    const problems = sections.get('11450-4')!;
    expect(problems.text.status).toBe('generated');
    expect(problems.text.div).toMatch(/^<div xmlns="http:\/\/www\.w3\.org\/1999\/xhtml">/);
    expect(problems.text.div).toContain('Asthma &#60;severe&#62; &#38; &#34;chronic&#34;');
    expect(problems.text.div).not.toContain('<severe>');
  });

  it('gives the required sections an emptyReason when there is nothing to list', async () => {
    const b = (await summary(admin, id.empty as string)).json() as Json;
    const sections = sectionsOf(b);
    expect([...sections.keys()]).toEqual(['11450-4', '48765-2', '10160-0']);
    for (const s of sections.values()) {
      expect(s.entry).toBeUndefined();
      expect(s.emptyReason?.coding[0]?.code).toBe('unavailable');
      expect(s.text.div).toContain('No information available');
    }
  });

  it('validates against the IPS Composition profile (loaded into the project)', async () => {
    const sd = JSON.parse(
      fs.readFileSync(
        new URL('../fixtures/ips/StructureDefinition-Composition-uv-ips.json', import.meta.url),
        'utf8',
      ),
    ) as Json;
    const stored = await t.request({
      method: 'POST',
      url: `${t.fhir}/StructureDefinition`,
      token: admin,
      payload: sd,
    });
    expect(stored.statusCode, stored.body).toBe(201);
    const validate = async (composition: Json) => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/Composition/$validate`,
        token: admin,
        payload: {
          resourceType: 'Parameters',
          parameter: [
            { name: 'resource', resource: composition },
            { name: 'profile', valueCanonical: IPS_COMPOSITION },
          ],
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { issue: { severity: string }[] }).issue.filter((i) => i.severity === 'error');
    };
    for (const patient of [id.patient, id.empty]) {
      const b = (await summary(admin, patient as string)).json() as Json;
      const composition = (b.entry as { resource: Json }[])[0]!.resource;
      expect(await validate(composition), JSON.stringify(composition)).toEqual([]);
      // The profile is really applied: without the required Problems section, or with a wrong type, it fails.
      const sections = composition.section as Section[];
      const noProblems = {
        ...composition,
        section: sections.filter((s) => s.code.coding[0]!.code !== '11450-4'),
      };
      expect((await validate(noProblems)).length).toBeGreaterThan(0);
      expect(
        (await validate({ ...composition, type: { coding: [{ system: LOINC, code: '11503-0' }] } })).length,
      ).toBeGreaterThan(0);
    }
  });

  it("answers 404 for another project's patient and for an unknown one", async () => {
    const other = await summary(otherAdmin, id.patient as string);
    expect(other.statusCode).toBe(404);
    expect(other.json().resourceType).toBe('OperationOutcome');
    expect((await summary(admin, 'no-such-patient')).statusCode).toBe(404);
  });

  it('leaves out what a narrow token may not read, and withholds the sections it cannot fill', async () => {
    const narrow = await scopedClientToken(t, admin, projectId, 'system/Patient.rs system/Observation.rs');
    const res = await summary(narrow, id.patient as string);
    expect(res.statusCode, res.body).toBe(200);
    const b = res.json() as Json;
    const types = new Set(refsOf(b).map((r) => r.split('/')[0]));
    for (const hidden of [
      'Condition',
      'AllergyIntolerance',
      'MedicationStatement',
      'Medication',
      'Practitioner',
    ])
      expect(types.has(hidden), hidden).toBe(false);
    expect(types.has('Observation')).toBe(true);
    const sections = sectionsOf(b);
    expect(sections.get('11450-4')?.emptyReason?.coding[0]?.code).toBe('withheld');
    expect(sections.has('11348-0')).toBe(false);
    expect(res.body).not.toContain('Asthma');
    const noPatient = await scopedClientToken(t, admin, projectId, 'system/Observation.rs');
    expect((await summary(noPatient, id.patient as string)).statusCode).toBe(403);
  });

  it("narrows a patient token to its own patient's summary", async () => {
    const me = await patientToken(t, admin, projectId, 'patient/*.rs');
    const own = await summary(me.token, me.patient);
    expect(own.statusCode, own.body).toBe(200);
    expect(refsOf(own.json() as Json)).toContain(`Patient/${me.patient}`);
    expect((await summary(me.token, id.patient as string)).statusCode).toBe(404);
  });

  it('refuses parameters it does not support, and bounds each section', async () => {
    const bad = await summary(admin, id.patient as string, '?profile=http://example.org/x');
    expect(bad.statusCode).toBe(400);
    expect(bad.json().resourceType).toBe('OperationOutcome');
    for (const odd of ['x'.repeat(5000), '%00%01', '..%2F..%2FObservation']) {
      const res = await summary(admin, odd);
      expect(res.statusCode, odd.slice(0, 20)).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, odd.slice(0, 20)).toBeLessThan(500);
    }
    const body = await t.request({
      method: 'POST',
      url: `${t.fhir}/Patient/${id.patient}/$summary`,
      token: admin,
      payload: { resourceType: 'Parameters', parameter: [{ name: 'identifier', valueString: 'x' }] },
    });
    expect(body.statusCode).toBe(400);
    const many: Record<string, Json> = {};
    for (let n = 0; n < 120; n++)
      many[`imm${n}`] = {
        resourceType: 'Immunization',
        status: 'completed',
        vaccineCode: { text: `Vaccine ${n}` },
        patient: { reference: `Patient/${id.empty}` },
        occurrenceDateTime: '2021-01-01',
      };
    await createAll(admin, many);
    const b = (await summary(admin, id.empty as string)).json() as Json;
    expect(sectionsOf(b).get('11369-6')?.entry).toHaveLength(100);
  });
});
