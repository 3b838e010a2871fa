// Parameters that are unions of others (combo-code = code + component-code, migration 027: no rows of their own) with
// :missing and :not answered from sp_missing (migration 028): the two changes together give the answers the rows of
// the parts give. An Observation whose code is text only has a code (its :missing=false holds).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { createNamed, startTestApp, type TestApp } from '../support/app.js';

const coded = (code: string, comp?: string): Record<string, unknown> => ({
  resourceType: 'Observation',
  status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code }] },
  ...(comp ? { component: [{ code: { coding: [{ system: 'http://loinc.org', code: comp }] } }] } : {}),
});
describe.each(testDatabases())('union parameters with :missing and :not on $name', (database) => {
  let t: TestApp;
  let token: string;
  const id: Record<string, string> = {};
  beforeAll(async () => {
    t = await startTestApp(database);
    token = (await t.newProject()).adminToken;
    Object.assign(
      id,
      await createNamed(t, token, {
        a: coded('1'),
        b: coded('2'),
        c: coded('3', '1'),
        n: { resourceType: 'Observation', status: 'final', code: { text: 'x' } },
      }),
    );
  });
  afterAll(async () => t?.close());
  const ids = async (q: string): Promise<string[]> => {
    const r = await t.request({ method: 'GET', url: `${t.fhir}/Observation?${q}`, token });
    expect(r.statusCode, r.body).toBe(200);
    return (r.json().entry ?? []).map((e: { resource: { id: string } }) => e.resource.id).sort();
  };
  const names = (...k: string[]) => k.map((x) => id[x]!).sort();
  it('combo-code:not and :missing read code and component-code rows', async () => {
    expect(await ids('combo-code:not=http://loinc.org|1')).toEqual(names('b', 'n'));
    expect(await ids('combo-code:not=1')).toEqual(names('b', 'n'));
    expect(await ids('combo-code:missing=false')).toEqual(names('a', 'b', 'c', 'n'));
    expect(await ids('combo-code:missing=true')).toEqual([]);
    expect(await ids('code:not=http://loinc.org|1')).toEqual(names('b', 'c', 'n'));
    expect(await ids('component-code:missing=true')).toEqual(names('a', 'b', 'n'));
  });
});
