// A ViewDefinition over Synthea data gives the same rows as `$csv` for the columns both can express (issue 15): the
// fixture patients (test/fixtures/synthea-r4) loaded as transactions, then Patients and one patient's Observations
// as CSV both ways. `$csv` escapes spreadsheet formulas and starts with a BOM; the columns chosen hold neither.
import { beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { useProjectApp } from '../support/app.js';
import { readSyntheaBundles } from '../support/synthea.js';

const bundles = readSyntheaBundles().slice(0, 3);

/** CSV text → sorted records (no BOM, no trailing empty line). */
const records = (csv: string): string[] =>
  csv
    .replace(/^\uFEFF/, '')
    .split('\r\n')
    .filter((l) => l !== '')
    .sort();

describe.each(testDatabases().slice(-1))('views and $csv over Synthea on $name', (database) => {
  const ctx = useProjectApp(database);
  let patientId = '';

  beforeAll(async () => {
    for (const { bundle } of bundles) {
      const res = await ctx.t.request({ method: 'POST', url: ctx.t.fhir, token: ctx.token, payload: bundle });
      expect(res.statusCode).toBe(200);
      const out = res.json() as { entry: { response: { location: string } }[] };
      const i = bundle.entry.findIndex((e) => e.resource.resourceType === 'Patient');
      patientId ||= out.entry[i]?.response.location.split('/')[1] as string;
    }
  });

  /** `$csv` with these `_fields` and the view with the same columns (names = FHIRPath) as CSV: the same records. */
  const compare = async (type: string, paths: string[], query: string, patient?: string): Promise<number> => {
    const csv = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/${type}/$csv?_fields=${encodeURIComponent(paths.join(','))}${query}`,
      token: ctx.token,
    });
    expect(csv.statusCode, csv.body).toBe(200);
    const view = {
      resourceType: 'ViewDefinition',
      resource: type,
      select: [{ column: paths.map((path, i) => ({ name: `c${i}`, path })) }],
    };
    const run = await ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/$viewdefinition-run`,
      token: ctx.token,
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'viewResource', resource: view },
          { name: '_format', valueCode: 'csv' },
          { name: 'header', valueBoolean: false },
          ...(patient ? [{ name: 'patient', valueReference: { reference: `Patient/${patient}` } }] : []),
        ],
      },
    });
    expect(run.statusCode, run.body).toBe(200);
    // `$csv`'s first record is its header; the view's CSV was asked without one.
    const lines = csv.body.replace(/^\uFEFF/, '').split('\r\n');
    expect(lines[0]).toBe(paths.join(','));
    const rows = records(lines.slice(1).join('\r\n'));
    expect(records(run.body)).toEqual(rows);
    return rows.length;
  };

  it('gives the same Patient rows', async () => {
    const n = await compare('Patient', ['id', 'birthDate', 'gender', 'name.first().family'], '');
    expect(n).toBe(3);
  });

  it("gives the same rows of one patient's Observations", async () => {
    const n = await compare(
      'Observation',
      ['id', 'status', 'code.coding.first().code', 'effectiveDateTime', 'valueQuantity.unit'],
      `&subject=Patient/${patientId}`,
      patientId,
    );
    expect(n).toBeGreaterThan(10);
  });
});
