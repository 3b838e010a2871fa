// Compartment search through HTTP (issue 14 point 4): GET {fhir}/<Compartment>/<id>/<Type> on the published R4
// CompartmentDefinitions: only the parameters they list count, `{def}` is the compartment's own resource, and other
// searches, paths and projects are unaffected.
import { beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { created, useProjectApp } from '../support/app.js';

type Json = Record<string, unknown>;

describe.each(testDatabases())('compartments on $name', (database) => {
  const ctx = useProjectApp(database);
  let p1: Json;
  let p2: Json;
  let enc: Json;
  const obs: Record<string, Json> = {};

  const get = (url: string, token = ctx.token) =>
    ctx.t.request({ method: 'GET', url: `${ctx.t.fhir}/${url}`, token });
  const ids = async (url: string): Promise<string[]> => {
    const res = await get(url);
    expect(res.statusCode, res.body).toBe(200);
    return ((res.json().entry ?? []) as { resource: { id: string } }[]).map((e) => e.resource.id).sort();
  };
  const sorted = (...rs: (Json | undefined)[]): string[] => rs.map((r) => r?.id as string).sort();

  beforeAll(async () => {
    p1 = await created(ctx.t, ctx.token, { resourceType: 'Patient', name: [{ family: 'One' }] });
    p2 = await created(ctx.t, ctx.token, { resourceType: 'Patient', name: [{ family: 'Two' }] });
    enc = await created(ctx.t, ctx.token, {
      resourceType: 'Encounter',
      status: 'finished',
      class: { code: 'AMB' },
      subject: { reference: `Patient/${p1.id as string}` },
    });
    const o = (key: string, extra: Json, code = 'a') =>
      created(ctx.t, ctx.token, {
        resourceType: 'Observation',
        status: 'final',
        code: { coding: [{ system: 'https://example.org', code }] },
        ...extra,
      }).then((r) => (obs[key] = r));
    await o('subject', {
      subject: { reference: `Patient/${p1.id as string}` },
      encounter: { reference: `Encounter/${enc.id as string}` },
    });
    await o('performer', { performer: [{ reference: `Patient/${p1.id as string}` }] }, 'b');
    await o('focus', { focus: [{ reference: `Patient/${p1.id as string}` }] });
    await o('other', { subject: { reference: `Patient/${p2.id as string}` } });
  });

  it('finds what the Patient CompartmentDefinition lists (subject, performer), not focus', async () => {
    expect(await ids(`Patient/${p1.id as string}/Observation`)).toEqual(sorted(obs.subject, obs.performer));
    expect(await ids(`Patient/${p2.id as string}/Observation`)).toEqual(sorted(obs.other));
    expect(await ids(`Patient/${p1.id as string}/Observation?code=https://example.org|b`)).toEqual(
      sorted(obs.performer),
    );
    expect(await ids(`Patient/${p1.id as string}/Encounter`)).toEqual(sorted(enc));
    const page = await get(`Patient/${p1.id as string}/Observation?_count=1&_total=accurate`);
    expect(page.json().total).toBe(2);
    expect(page.json().entry).toHaveLength(1);
  });

  it('covers the other compartments, {def} included', async () => {
    expect(await ids(`Encounter/${enc.id as string}/Observation`)).toEqual(sorted(obs.subject));
    expect(await ids(`Encounter/${enc.id as string}/Encounter`)).toEqual(sorted(enc));
  });

  it('answers 404 for a missing or invisible owner or an unknown compartment, 400 for a type it does not hold', async () => {
    expect((await get('Patient/nope/Observation')).statusCode).toBe(404);
    const other = await ctx.t.newProject();
    expect((await get(`Patient/${p1.id as string}/Observation`, other.adminToken)).statusCode).toBe(404);
    expect((await get(`Observation/${obs.subject?.id as string}/Patient`)).statusCode).toBe(404);
    expect((await get(`Patient/${p1.id as string}/Organization`)).statusCode).toBe(400);
    // Instance history is not a compartment.
    expect((await get(`Patient/${p1.id as string}/_history`)).statusCode).toBe(200);
  });

  it('Patient/<id>/$everything: the Patient and its compartment, with _type, _since and _count paging', async () => {
    const pid = p1.id as string;
    const all = sorted(p1, enc, obs.subject, obs.performer);
    expect(await ids(`Patient/${pid}/$everything`)).toEqual(all);
    expect(await ids(`Patient/${pid}/$everything?_type=Observation`)).toEqual(
      sorted(obs.subject, obs.performer),
    );
    // A type outside the compartment: nothing, not an error.
    expect(await ids(`Patient/${pid}/$everything?_type=Practitioner`)).toEqual([]);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect(await ids(`Patient/${pid}/$everything?_since=${encodeURIComponent(future)}`)).toEqual([]);
    const seen: string[] = [];
    let url: string | undefined = `Patient/${pid}/$everything?_count=2`;
    for (let pages = 0; url; pages++) {
      expect(pages).toBeLessThan(3);
      const res = await get(url);
      expect(res.statusCode, res.body).toBe(200);
      const b = res.json() as {
        entry?: { resource: { id: string } }[];
        link: { relation: string; url: string }[];
      };
      seen.push(...(b.entry ?? []).map((e) => e.resource.id));
      url = b.link.find((l) => l.relation === 'next')?.url.replace(`http://cinder.test${ctx.t.fhir}/`, '');
    }
    expect(seen.sort()).toEqual(all);
    const other = await ctx.t.newProject();
    expect((await get(`Patient/${pid}/$everything`, other.adminToken)).statusCode).toBe(404);
    expect((await get(`Patient/${pid}/$everything?_count=x`)).statusCode).toBe(400);
  });
});
