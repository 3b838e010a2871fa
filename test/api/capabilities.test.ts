// The CapabilityStatement lists exactly what works (issue 14): every search parameter, _include and _revinclude
// value it names for a type is accepted by that type's search, and what it leaves out (special parameters) is not.
import { describe, expect, it } from 'vitest';
import { parseSearchRequest } from '../../src/fhir/search/parse.js';
import { getSearchParam } from '../../src/fhir/search/registry.js';
import { testDatabases } from '../support/db.js';
import { useProjectApp } from '../support/app.js';

interface CsResource {
  type: string;
  searchParam: { name: string; type: string }[];
  searchInclude: string[];
  searchRevInclude: string[];
  interaction: { code: string }[];
}

const SAMPLE: Record<string, string> = {
  string: 'x',
  token: 'x',
  reference: 'x',
  date: '2020',
  number: '1',
  quantity: '1',
  uri: 'http://x',
};

/** A value the parameter accepts: composites get one sample per component, joined by `$`. */
function sample(type: string, code: string, paramType: string): string {
  if (paramType !== 'composite') return SAMPLE[paramType] as string;
  const comps = getSearchParam(type, code)?.components ?? [];
  return comps.map((c) => SAMPLE[c.type]).join('$');
}

describe.each(testDatabases().slice(-1))('CapabilityStatement on $name', (database) => {
  const ctx = useProjectApp(database);

  it('lists only search parameters, includes and revincludes that the search accepts', async () => {
    const res = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/metadata` });
    const cs = res.json() as { rest: { resource: CsResource[]; security: { cors: boolean } }[] };
    const rest = cs.rest[0] as (typeof cs.rest)[0];
    expect(rest.security.cors).toBe(true);
    let checked = 0;
    for (const r of rest.resource) {
      for (const p of r.searchParam) {
        expect(
          () => parseSearchRequest(r.type, { [p.name]: sample(r.type, p.name, p.type) }),
          `${r.type}?${p.name}`,
        ).not.toThrow();
        checked++;
      }
      for (const inc of r.searchInclude)
        expect(() => parseSearchRequest(r.type, { _include: inc })).not.toThrow();
      for (const inc of r.searchRevInclude)
        expect(() => parseSearchRequest(r.type, { _revinclude: inc })).not.toThrow();
      // Special parameters (e.g. Location `near`) are not supported, and not listed.
      for (const name of ['near', '_text', '_content', '_list', '_query', '_filter']) {
        expect(r.searchParam.map((p) => p.name)).not.toContain(name);
      }
    }
    expect(checked).toBeGreaterThan(1000);
    const obs = rest.resource.find((r) => r.type === 'Observation') as CsResource;
    expect(obs.searchParam.map((p) => p.name)).toEqual(
      expect.arrayContaining([
        'code-value-quantity',
        'component-code-value-quantity',
        'combo-code-value-concept',
      ]),
    );
    expect(obs.searchInclude).toContain('Observation:subject');
    const patient = rest.resource.find((r) => r.type === 'Patient') as CsResource;
    expect(patient.searchRevInclude).toEqual(
      expect.arrayContaining(['*', 'Observation:subject', 'Encounter:patient']),
    );
    // A composite and a search on a listed parameter answer 200 through HTTP.
    for (const q of ['Observation?code-value-quantity=x$1', 'Patient?_revinclude=Observation:subject']) {
      const s = await ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/${q}`, token: ctx.token });
      expect(s.statusCode, q).toBe(200);
    }
    const near = await ctx.t.request({
      method: 'GET',
      url: `${ctx.t.fhir}/Location?near=1|1|1|km`,
      token: ctx.token,
    });
    expect(near.statusCode).toBeGreaterThanOrEqual(400);
    expect(near.json().resourceType).toBe('OperationOutcome');
  });
});
