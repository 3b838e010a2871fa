// The 88 Synthea patients (../shared/data/synthea-r4, transaction Bundles) load as transactions, and their
// resources are then found by search.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp } from '../support/app.js';

const dir = path.resolve('../shared/data/synthea-r4');
const files = fs.existsSync(dir)
  ? fs
      .readdirSync(dir)
      .filter((f) => f.endsWith('.json.gz'))
      .sort()
  : [];

interface Entry {
  fullUrl: string;
  resource: { resourceType: string; id: string };
  response?: { location?: string };
}

describe.each(testDatabases())('Synthea on $name', (database) => {
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await startTestApp(database);
    token = (await t.newProject('Synthea')).adminToken;
  });
  afterAll(async () => t?.close());

  it('loads all 88 patients as transactions and finds their resources by search', async () => {
    expect(files).toHaveLength(88);
    let resources = 0;
    const started = Date.now();
    for (const file of files) {
      const bundle = JSON.parse(zlib.gunzipSync(fs.readFileSync(path.join(dir, file))).toString('utf8')) as {
        entry: Entry[];
      };
      const expected = new Map<string, number>();
      for (const e of bundle.entry)
        expected.set(e.resource.resourceType, (expected.get(e.resource.resourceType) ?? 0) + 1);
      const res = await t.request({ method: 'POST', url: t.fhir, token, payload: bundle });
      expect(res.statusCode, `${file}: ${res.body.slice(0, 300)}`).toBe(200);
      const out = res.json() as { entry: { response: { status: string; location: string } }[] };
      expect(out.entry).toHaveLength(bundle.entry.length);
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
    const seconds = (Date.now() - started) / 1000;
    console.log(
      `[${database.name}] loaded ${resources} Synthea resources in ${seconds.toFixed(1)} s (${Math.round(resources / seconds)}/s, incl. searches)`,
    );
    expect(resources).toBe(25086);
  }, 600_000);
});
