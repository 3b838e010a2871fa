// Views through the FHIRPath worker pool (csv/fhirpath-pool.ts): checkView and viewRows run compileView off the event
// loop; its 422s come back as FhirErrors, and a view whose FHIRPath runs past the deadline fails as too costly.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFhirpathPool, type FhirpathPool } from '../csv/fhirpath-pool.js';
import { FhirError } from '../outcome.js';

const view = {
  resourceType: 'ViewDefinition',
  resource: 'Patient',
  select: [
    { column: [{ name: 'id', path: 'getResourceKey()' }] },
    { forEachOrNull: 'name', column: [{ name: 'given', path: 'given', collection: true }] },
  ],
};
const jsons = [
  JSON.stringify({ resourceType: 'Patient', id: 'p1', name: [{ given: ['Ann'] }, { given: ['Nan', 'N'] }] }),
  JSON.stringify({ resourceType: 'Patient', id: 'p2' }),
  JSON.stringify({ resourceType: 'Observation', id: 'o1' }),
];

let pool: FhirpathPool;
beforeAll(() => {
  pool = createFhirpathPool({ timeoutMs: 30_000, size: 1 });
});
afterAll(() => pool.close());

const rejection = async (p: Promise<unknown>): Promise<FhirError> => {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(FhirError);
    return err as FhirError;
  }
  throw new Error('no error');
};

describe('views in the FHIRPath pool', () => {
  it('checkView gives the columns; viewRows the rows of every resource, in order', async () => {
    expect(await pool.checkView(view)).toEqual([
      { name: 'id', collection: false },
      { name: 'given', collection: true },
    ]);
    expect(await pool.viewRows(view, jsons)).toEqual([
      { id: 'p1', given: ['Ann'] },
      { id: 'p1', given: ['Nan', 'N'] },
      { id: 'p2', given: null },
    ]);
    expect(await pool.viewRows(view, [])).toEqual([]);
  });

  it("a view's 422 comes back as the same FhirError (code, status, element)", async () => {
    const bad = { ...view, select: [{ column: [{ name: 'x', path: 'name.nope()' }] }] };
    const err = await rejection(pool.checkView(bad));
    expect(err.status).toBe(422);
    expect(err.issueCode).toBe('processing');
    expect(err.code).toBe('views.unknown-function');
    expect(err.issues[0]?.expression).toEqual(['ViewDefinition.select[0].column[0].path']);
    const multi = { ...view, select: [{ column: [{ name: 'given', path: 'name.given' }] }] };
    expect((await rejection(pool.viewRows(multi, jsons))).code).toBe('views.multiple-values');
  });

  it('a FHIRPath past the deadline fails with 422 too-costly, and the pool goes on', async () => {
    const fast = createFhirpathPool({ timeoutMs: 1000, size: 1 });
    try {
      const u = `(${Array.from({ length: 20 }, (_, i) => i + 1).join('|')})`;
      const costly = {
        ...view,
        select: [
          {
            column: [
              { name: 'n', path: `(1|2).select(${u}.select(${u}.select(${u}.select(${u})))).count()` },
            ],
          },
        ],
      };
      const err = await rejection(fast.viewRows(costly, jsons.slice(0, 1)));
      expect(err.issueCode).toBe('too-costly');
      expect(err.status).toBe(422);
      expect(err.code).toBe('views.fhirpath-too-costly');
      expect(err.message).toMatch(/ViewDefinition's FHIRPath is too costly: .*limit of 1000 ms/);
      expect(await fast.viewRows(view, jsons.slice(1, 2))).toEqual([{ id: 'p2', given: null }]);
    } finally {
      await fast.close();
    }
  });
});
