// lowBoundary()/highBoundary() of decimals in SQL on FHIR views through $viewdefinition-run (API.md §7): a stored
// decimal's written precision counts (`1.0` → 0.95..1.05, the official suite's fn_boundary cases) and the boundary
// is written exactly (a large value keeps every digit, a precision argument gives that many digits); another
// project sees none of the rows, a token without Observation search is refused, and a hostile precision is no 5xx.
// https://hl7.org/fhirpath/#lowboundaryprecision-integer-decimal--date--datetime--time
import { beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { scopedClientToken, useProjectApp } from '../support/app.js';

const boundaryView = (low: string, high: string, code: string) => ({
  resourceType: 'ViewDefinition',
  resource: 'Observation',
  where: [{ path: `code.text = '${code}'` }],
  select: [
    {
      column: [
        { name: 'written', path: 'value.ofType(Quantity).value', type: 'decimal' },
        { name: 'low', path: `value.ofType(Quantity).value.${low}`, type: 'decimal' },
        { name: 'high', path: `value.ofType(Quantity).value.${high}`, type: 'decimal' },
      ],
    },
  ],
});
const params = (...parameter: Record<string, unknown>[]) => ({ resourceType: 'Parameters', parameter });

describe.each(testDatabases())('decimal boundaries in views on $name', (database) => {
  const ctx = useProjectApp(database);
  const code = `boundary-${Date.now()}`;
  let projectId = '';

  const run = (view: unknown, token = ctx.token, format = 'json') =>
    ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/$viewdefinition-run`,
      token,
      payload: params({ name: 'viewResource', resource: view }, { name: '_format', valueCode: format }),
    });

  beforeAll(async () => {
    const p = await ctx.t.newProject();
    ctx.token = p.adminToken;
    projectId = p.projectId;
    // Stored as written: the texts are sent raw, as JSON.stringify would drop `1.0`'s zero.
    for (const value of ['1.0', '1.50', '12345678901234567890.12', '-0.0']) {
      const res = await ctx.t.request({
        method: 'POST',
        url: `${ctx.t.fhir}/Observation`,
        token: ctx.token,
        headers: { 'content-type': 'application/fhir+json' },
        payload: `{"resourceType":"Observation","status":"final","code":{"text":"${code}"},"valueQuantity":{"value":${value}}}`,
      });
      expect(res.statusCode, res.body).toBe(201);
    }
  });

  it("gives a stored decimal's boundaries at its written precision, exactly", async () => {
    const res = await run(boundaryView('lowBoundary()', 'highBoundary()', code));
    expect(res.statusCode, res.body).toBe(200);
    const rows = res.body.slice(1, -1).split('},{');
    expect(rows.map((r) => r.replace(/^\{|\}$/g, '')).sort()).toEqual(
      [
        '"written":-0.0,"low":-0.05,"high":0.05',
        '"written":1.0,"low":0.95,"high":1.05',
        '"written":1.50,"low":1.495,"high":1.505',
        '"written":12345678901234567890.12,"low":12345678901234567890.115,"high":12345678901234567890.125',
      ].sort(),
    );
    const csv = await run(boundaryView('lowBoundary()', 'highBoundary()', code), ctx.token, 'csv');
    expect(csv.body.split('\r\n')).toContain('1.0,0.95,1.05');
  });

  it('writes a precision argument as that many digits; a negative or too large one gives no value', async () => {
    const res = await run(boundaryView('lowBoundary(2)', 'highBoundary(6)', code), ctx.token, 'csv');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.body.split('\r\n').slice(1, -1).sort()).toEqual(
      [
        '-0.0,-0.05,0.050000',
        '1.0,0.95,1.050000',
        '1.50,1.49,1.505000',
        '12345678901234567890.12,12345678901234567890.11,12345678901234567890.125000',
      ].sort(),
    );
    const outOfRange = await run(boundaryView('lowBoundary(-1)', 'highBoundary(2147483647)', code));
    expect(outOfRange.statusCode, outOfRange.body).toBe(200);
    for (const row of outOfRange.json() as Record<string, unknown>[])
      expect([row.low, row.high]).toEqual([null, null]);
  });

  it('answers 422 with an OperationOutcome for a malformed or mistyped precision, never 5xx', async () => {
    for (const [low, high] of [
      ["lowBoundary('x')", 'highBoundary()'],
      ['lowBoundary(1, 2)', 'highBoundary()'],
      ['lowBoundary(' + '('.repeat(300), 'highBoundary()'],
    ]) {
      const res = await run(boundaryView(low as string, high as string, code));
      expect(res.statusCode, `${low}: ${res.body.slice(0, 200)}`).toBe(422);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
  });

  it("shows another project's member none of the rows, and refuses a token without Observation search", async () => {
    const other = (await ctx.t.newProject()).adminToken;
    const theirs = await run(boundaryView('lowBoundary()', 'highBoundary()', code), other);
    expect(theirs.statusCode, theirs.body).toBe(200);
    expect(theirs.json()).toEqual([]);
    const narrow = await scopedClientToken(ctx.t, ctx.token, projectId, 'system/Patient.rs');
    const scoped = await run(boundaryView('lowBoundary()', 'highBoundary()', code), narrow);
    expect(scoped.statusCode).toBe(403);
    expect(scoped.json().issue[0].code).toBe('forbidden');
  });
});
