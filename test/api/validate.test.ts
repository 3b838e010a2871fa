// $validate through HTTP (issue 14 point 2): type and instance level, the resource as the body or in Parameters,
// modes create / update / delete, the base profile; every issue with its expression; nothing stored.
import { describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, useProjectApp } from '../support/app.js';

type Outcome = { resourceType: string; issue: { severity: string; code: string; expression?: string[] }[] };

describe.each(testDatabases())('validate on $name', (database) => {
  const ctx = useProjectApp(database);
  const validate = (url: string, payload: unknown, token = ctx.token) =>
    ctx.t.request({
      method: 'POST',
      url: `${ctx.t.fhir}/${url}`,
      token,
      payload: payload as Record<string, unknown>,
    });
  const count = async (): Promise<number> =>
    (
      await ctx.t.request({
        method: 'GET',
        url: `${ctx.t.fhir}/Patient?_total=accurate&_count=0`,
        token: ctx.token,
      })
    ).json().total as number;

  it('answers All OK for a valid resource and stores nothing', async () => {
    const before = await count();
    const res = await validate('Patient/$validate', { resourceType: 'Patient', name: [{ family: 'Valid' }] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'information', code: 'informational', details: { text: 'All OK' } }],
    });
    expect(await count()).toBe(before);
  });

  it('lists every issue with its expression, as the body or in Parameters', async () => {
    const bad = { resourceType: 'Patient', gender: 42, nickname: 'x', name: [{ given: [true] }] };
    for (const payload of [
      bad,
      { resourceType: 'Parameters', parameter: [{ name: 'resource', resource: bad }] },
    ]) {
      const res = await validate('Patient/$validate', payload);
      expect(res.statusCode).toBe(200);
      const oo = res.json() as Outcome;
      expect(oo.issue.every((i) => i.severity === 'error')).toBe(true);
      expect(oo.issue.flatMap((i) => i.expression ?? []).sort()).toEqual(
        ['Patient.gender', 'Patient.name[0].given[0]', 'Patient.nickname'].sort(),
      );
    }
    const wrongType = await validate('Patient/$validate', {
      resourceType: 'Observation',
      status: 'final',
      code: {},
    });
    expect((wrongType.json() as Outcome).issue.map((i) => i.expression?.[0])).toContain('resourceType');
  });

  it('checks modes: update needs the URL id, delete the resource and the right to delete it', async () => {
    const p = await created(ctx.t, ctx.token, { resourceType: 'Patient', name: [{ family: 'Mode' }] });
    const id = p.id as string;
    const params = (mode: string, resource?: unknown) => ({
      resourceType: 'Parameters',
      parameter: [{ name: 'mode', valueCode: mode }, ...(resource ? [{ name: 'resource', resource }] : [])],
    });
    const ok = await validate(`Patient/${id}/$validate`, params('update', { ...p, gender: 'female' }));
    expect((ok.json() as Outcome).issue[0]?.severity).toBe('information');
    const otherId = await validate(`Patient/${id}/$validate`, params('update', { ...p, id: 'other' }));
    expect((otherId.json() as Outcome).issue[0]).toMatchObject({
      severity: 'error',
      expression: ['Patient.id'],
    });
    expect((await validate('Patient/$validate', params('update', p))).statusCode).toBe(400);
    expect((await validate(`Patient/${id}/$validate`, params('delete'))).json().issue[0].severity).toBe(
      'information',
    );
    expect((await validate('Patient/nope/$validate', params('delete'))).statusCode).toBe(404);
    expect((await validate('Patient/$validate', params('sideways', p))).statusCode).toBe(400);
    // A project member may not write ClientApplications: $validate says so before anything is tried.
    const member = (await ctx.t.newProject()).memberToken;
    const client = await validate(
      'ClientApplication/$validate',
      params('create', { resourceType: 'ClientApplication' }),
      member,
    );
    expect(client.statusCode).toBe(403);
  });

  it('knows the base profile; an unknown explicit profile is an error not-found (API.md §9)', async () => {
    const patient = { resourceType: 'Patient' };
    const base = await validate('Patient/$validate', {
      resourceType: 'Parameters',
      parameter: [
        { name: 'resource', resource: patient },
        { name: 'profile', valueCanonical: 'http://hl7.org/fhir/StructureDefinition/Patient' },
      ],
    });
    // The base profile is in the shared set: its invariants run too, and dom-6 (narrative) is only a warning.
    expect((base.json() as Outcome).issue.filter((i) => i.severity === 'error')).toEqual([]);
    const other = await validate('Patient/$validate', {
      resourceType: 'Parameters',
      parameter: [
        { name: 'resource', resource: patient },
        {
          name: 'profile',
          valueCanonical: 'http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient',
        },
      ],
    });
    expect((other.json() as Outcome).issue[0]).toMatchObject({
      severity: 'error',
      code: 'not-found',
      expression: ['profile'],
    });
  });
});
