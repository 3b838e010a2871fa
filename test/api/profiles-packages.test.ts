// Profiles and terminology together, as a deployment runs them (API.md §9): US Core loaded from a package folder named
// in `packages`, beside the shared R4 base value sets and code systems, so bindings are checked against real
// expansions: the IG's examples validate with no error, a required binding violated is an error at its element (and
// a write declaring the profile answers 422), and searches use the shared value sets with `:in`.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationOutcomeIssue } from '../../src/fhir/outcome.js';
import { postResource, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { writePackageFolder } from '../support/fhir-package.js';

type Json = Record<string, unknown>;
const fixture = (name: string): Json =>
  JSON.parse(readFileSync(new URL(`../fixtures/us-core/${name}`, import.meta.url), 'utf8')) as Json;
const GENDER_VS = 'http://hl7.org/fhir/ValueSet/administrative-gender';

describe.each(testDatabases())(
  'US Core from a package, with the shared terminology, on $name',
  (database) => {
    let t: TestApp;
    let p: { projectId: string; adminToken: string; memberToken: string };
    beforeAll(async () => {
      t = await startTestApp(database, { packages: [writePackageFolder()] });
      p = await t.newProject();
    });
    afterAll(async () => t?.close());

    const validate = async (resource: Json): Promise<OperationOutcomeIssue[]> => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/${String(resource.resourceType)}/$validate`,
        token: p.adminToken,
        payload: resource,
      });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json() as { issue: OperationOutcomeIssue[] }).issue;
    };
    const errors = (issues: OperationOutcomeIssue[]) => issues.filter((i) => i.severity === 'error');

    it("validates the IG's examples with no error, their bindings checked against the shared value sets", async () => {
      for (const name of ['patient-example.json', 'blood-pressure.json', 'Device-knee.json']) {
        const issues = await validate(fixture(name));
        expect(errors(issues), `${name}: ${JSON.stringify(issues, null, 1)}`).toEqual([]);
      }
    });

    it('reports a required binding violated at its element, and a write declaring the profile answers 422', async () => {
      const patient: Json = { ...fixture('patient-example.json'), gender: 'robot' };
      delete patient.id;
      const issues = await validate(patient);
      const hit = errors(issues).find((i) => i.expression?.[0] === 'Patient.gender');
      expect(hit, JSON.stringify(issues, null, 1)).toBeDefined();
      expect(hit?.details?.text).toContain(GENDER_VS);
      const before = await t.request({
        method: 'GET',
        url: `${t.fhir}/Patient?_summary=count`,
        token: p.adminToken,
      });
      const write = await postResource(t, p.adminToken, patient);
      expect(write.statusCode, write.body).toBe(422);
      expect(
        write.json().issue.some((i: OperationOutcomeIssue) => i.expression?.[0] === 'Patient.gender'),
      ).toBe(true);
      const after = await t.request({
        method: 'GET',
        url: `${t.fhir}/Patient?_summary=count`,
        token: p.adminToken,
      });
      expect(after.json().total).toBe(before.json().total);
      // The same Patient with a code of the value set is stored.
      const good = await postResource(t, p.adminToken, { ...patient, gender: 'other' });
      expect(good.statusCode, good.body).toBe(201);
    });

    it('searches with a shared value set (:in) and a shared code system hierarchy (:below)', async () => {
      const q = await t.newProject();
      for (const gender of ['female', 'male', 'unknown'])
        expect((await postResource(t, q.adminToken, { resourceType: 'Patient', gender })).statusCode).toBe(
          201,
        );
      const inSet = await t.request({
        method: 'GET',
        url: `${t.fhir}/Patient?gender:in=${encodeURIComponent(GENDER_VS)}&_summary=count`,
        token: q.adminToken,
      });
      expect(inSet.statusCode, inSet.body).toBe(200);
      expect(inSet.json().total).toBe(3);
      const expanded = await t.request({
        method: 'GET',
        url: `${t.fhir}/ValueSet/$expand?url=${encodeURIComponent(GENDER_VS)}`,
        token: q.adminToken,
      });
      expect(expanded.statusCode, expanded.body).toBe(200);
      const codes = (expanded.json().expansion.contains as { code: string }[]).map((c) => c.code).sort();
      expect(codes).toEqual(['female', 'male', 'other', 'unknown']);
    });
  },
);
