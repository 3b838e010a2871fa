// Observation/$lastn (R4 observation-operation-lastn, API.md §11): the newest `max` Observations per code of one
// subject, and what another project, a narrow token and malformed parameters get.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditEvents, createNamed, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { patientToken } from '../support/patient-token.js';

type Json = Record<string, unknown>;
const LOINC = 'http://loinc.org';
const CAT = 'http://terminology.hl7.org/CodeSystem/observation-category';

const obs = (patient: string, codes: [string, string][], category: string | null, date?: string): Json => ({
  resourceType: 'Observation',
  status: 'final',
  ...(category ? { category: [{ coding: [{ system: CAT, code: category }] }] } : {}),
  code: { coding: codes.map(([system, code]) => ({ system, code })) },
  subject: { reference: `Patient/${patient}` },
  ...(date ? { effectiveDateTime: date } : {}),
});

describe.each(testDatabases())('Observation lastn on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let projectId: string;
  let otherAdmin: string;
  let p: string; // the main patient
  let q: string; // a patient with multi-coded Observations
  const id: Record<string, string> = {};

  const get = (token: string, query: string) =>
    t.request({ method: 'GET', url: `${t.fhir}/Observation/$lastn?${query}`, token });
  const ids = (body: Json): string[] =>
    ((body.entry as { resource: Json }[] | undefined) ?? []).map((e) => e.resource.id as string);
  const createAll = async (token: string, named: Record<string, Json>): Promise<void> => {
    Object.assign(id, await createNamed(t, token, named));
  };

  beforeAll(async () => {
    t = await startTestApp(database);
    const a = await t.newProject('Lastn A');
    admin = a.adminToken;
    projectId = a.projectId;
    otherAdmin = (await t.newProject('Lastn B')).adminToken;
    await createAll(admin, {
      p: { resourceType: 'Patient', name: [{ family: 'Main' }] },
      q: { resourceType: 'Patient', name: [{ family: 'Multi' }] },
    });
    p = id.p as string;
    q = id.q as string;
    await createAll(admin, {
      hr1: obs(p, [[LOINC, '8867-4']], 'vital-signs', '2024-01-01'),
      hr2: obs(p, [[LOINC, '8867-4']], 'vital-signs', '2024-03-01T10:00:00Z'),
      hr3: obs(p, [[LOINC, '8867-4']], 'vital-signs', '2024-02-01'),
      bp1: obs(p, [[LOINC, '85354-9']], 'vital-signs', '2024-01-10'),
      glu1: obs(p, [[LOINC, '2339-0']], 'laboratory', '2024-01-05'),
      glu2: obs(p, [[LOINC, '2339-0']], 'laboratory', '2024-04-05'),
      undated: obs(p, [[LOINC, '2339-0']], 'laboratory'),
      mc: obs(
        q,
        [
          [LOINC, '8867-4'],
          ['http://local', 'hr'],
        ],
        'vital-signs',
        '2024-05-01',
      ),
      qhr: obs(q, [[LOINC, '8867-4']], 'vital-signs', '2024-06-01'),
      qlocal: obs(q, [['http://local', 'hr']], 'vital-signs', '2024-04-01'),
    });
    // Another project's Observation that names project A's patient: never A's, and B sees only its own.
    await createAll(otherAdmin, { foreign: obs(p, [[LOINC, '8867-4']], 'vital-signs', '2025-01-01') });
  });
  afterAll(async () => t?.close());

  it('answers the newest Observation per code of a category, newest first within a code', async () => {
    const one = await get(admin, `patient=${p}&category=vital-signs`);
    expect(one.statusCode, one.body).toBe(200);
    const b = one.json() as Json;
    expect(b.resourceType).toBe('Bundle');
    expect(b.type).toBe('searchset');
    expect(new Set(ids(b))).toEqual(new Set([id.hr2, id.bp1]));
    expect(b.total).toBe(2);
    const two = (await get(admin, `patient=Patient/${p}&category=vital-signs&max=2`)).json() as Json;
    // Codes in order (85354-9 before 8867-4), each newest first.
    expect(ids(two)).toEqual([id.bp1, id.hr2, id.hr3]);
    const entry = (two.entry as { fullUrl: string; search: Json }[])[0]!;
    expect(entry.fullUrl).toMatch(new RegExp(`/Observation/${id.bp1}$`));
    expect(entry.search.mode).toBe('match');
  });

  it('filters by code (with or without a system) and by several categories, undated last', async () => {
    const sys = (await get(admin, `subject=Patient/${p}&code=${LOINC}|2339-0&max=5`)).json() as Json;
    expect(ids(sys)).toEqual([id.glu2, id.glu1, id.undated]);
    const bare = (await get(admin, `patient=${p}&code=2339-0&max=2`)).json() as Json;
    expect(ids(bare)).toEqual([id.glu2, id.glu1]);
    const both = (await get(admin, `patient=${p}&category=${CAT}|laboratory,vital-signs`)).json() as Json;
    expect(new Set(ids(both))).toEqual(new Set([id.glu2, id.hr2, id.bp1]));
    const none = (await get(admin, `patient=${p}&category=${CAT}|exam`)).json() as Json;
    expect(none.total).toBe(0);
    expect(ids(none)).toEqual([]);
  });

  it('groups by each coding and lists an Observation once; deletes drop out', async () => {
    const one = (await get(admin, `patient=${q}&category=vital-signs`)).json() as Json;
    // local|hr: mc (05-01) is newer than qlocal; loinc|8867-4: qhr (06-01).
    expect(ids(one)).toEqual([id.mc, id.qhr]);
    const two = (await get(admin, `patient=${q}&category=vital-signs&max=2`)).json() as Json;
    expect(ids(two)).toEqual([id.mc, id.qlocal, id.qhr]);
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/Observation/${id.qhr}`, token: admin });
    expect(del.statusCode).toBeLessThan(300);
    const after = (await get(admin, `patient=${q}&code=${LOINC}|8867-4`)).json() as Json;
    expect(ids(after)).toEqual([id.mc]);
  });

  it('takes a Parameters body by POST', async () => {
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/Observation/$lastn`,
      token: admin,
      payload: {
        resourceType: 'Parameters',
        parameter: [
          { name: 'patient', valueReference: { reference: `Patient/${p}` } },
          { name: 'code', valueString: `${LOINC}|8867-4` },
          { name: 'max', valueInteger: 2 },
        ],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(ids(res.json() as Json)).toEqual([id.hr2, id.hr3]);
  });

  it("keeps projects apart: another project's member gets nothing of the patient", async () => {
    const mine = (await get(admin, `patient=${p}&code=${LOINC}|8867-4&max=10`)).json() as Json;
    expect(ids(mine)).not.toContain(id.foreign);
    const theirs = await get(otherAdmin, `patient=${p}&code=${LOINC}|8867-4&max=10`);
    expect(theirs.statusCode).toBe(200);
    expect(ids(theirs.json() as Json)).toEqual([id.foreign]);
    // A super administrator sees every project's.
    const all = (await get(t.adminToken, `patient=${p}&code=${LOINC}|8867-4&max=10`)).json() as Json;
    expect(ids(all)).toEqual([id.foreign, id.hr2, id.hr3, id.hr1]);
  });

  it('answers 403 to a token without Observation search, and narrows a patient token to its patient', async () => {
    const narrow = await scopedClientToken(t, admin, projectId, 'system/Patient.rs');
    const refused = await get(narrow, `patient=${p}&category=vital-signs`);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().resourceType).toBe('OperationOutcome');
    const me = await patientToken(t, admin, projectId, 'patient/Observation.rs patient/Patient.rs');
    await createAll(admin, { mine: obs(me.patient, [[LOINC, '8867-4']], 'vital-signs', '2024-01-01') });
    const own = await get(me.token, `patient=${me.patient}&category=vital-signs`);
    expect(own.statusCode, own.body).toBe(200);
    expect(ids(own.json() as Json)).toEqual([id.mine]);
    const other = await get(me.token, `patient=${p}&category=vital-signs`);
    expect(other.statusCode, other.body).toBe(200);
    expect(ids(other.json() as Json)).toEqual([]);
  });

  it('refuses malformed parameters with 400 and an OperationOutcome', async () => {
    const huge = 'x'.repeat(5000);
    const many = Array.from({ length: 60 }, (_, n) => `c${n}`).join(',');
    for (const query of [
      'category=vital-signs',
      `patient=${p}`,
      `patient=${p}&subject=Patient/${p}&category=vital-signs`,
      `patient=${p}&category=vital-signs&max=-1`,
      `patient=${p}&category=vital-signs&max=abc`,
      `patient=${p}&category=vital-signs&max=0`,
      `patient=${p}&category=vital-signs&max=1000000000`,
      `patient=${p}&category=vital-signs&max=1001`,
      `patient=${p}&category=vital-signs&max=1&max=2`,
      `patient=Group/${p}&category=vital-signs`,
      `subject=${huge}&category=vital-signs`,
      `patient=${p}&code=${many}`,
      `patient=${p}&code=${LOINC}|`,
      `patient=${p}&category=vital-signs&date=ge2020`,
      `patient=${p}&category=vital-signs&_sort=-date`,
    ]) {
      const res = await get(admin, query);
      expect(res.statusCode, query).toBe(400);
      const outcome = res.json() as { resourceType: string; issue: { severity: string }[] };
      expect(outcome.resourceType).toBe('OperationOutcome');
      expect(outcome.issue[0]?.severity).toBe('error');
    }
  });

  it('bounds the answer: the newest of many, and at most 10000 Observations', async () => {
    const many: Record<string, Json> = {};
    for (let n = 0; n < 150; n++)
      many[`m${n}`] = obs(
        q,
        [[LOINC, '29463-7']],
        'vital-signs',
        new Date(Date.UTC(2020, 0, 1 + n)).toISOString(),
      );
    for (let n = 0; n < 11; n++) many[`k${n}`] = obs(q, [['http://k', `k${n}`]], 'exam', '2024-01-01');
    await createAll(admin, many);
    const newest = (await get(admin, `patient=${q}&code=${LOINC}|29463-7&max=3`)).json() as Json;
    expect(ids(newest)).toEqual([id.m149, id.m148, id.m147]);
    const tooMany = await get(admin, `patient=${q}&category=exam&max=1000`);
    expect(tooMany.statusCode).toBe(400);
    expect(tooMany.json().issue[0].details.text).toMatch(/at most 10000/);
    expect((await get(admin, `patient=${q}&category=exam&max=900`)).statusCode).toBe(200);
  });

  it('is audited as a search of the patient, and refuses a body that is not Parameters', async () => {
    expect((await get(admin, `patient=${p}&code=${LOINC}|85354-9`)).statusCode).toBe(200);
    const events = await auditEvents(t, admin, `subtype=search&patient=Patient/${p}`, (e) =>
      e.some((x) => JSON.stringify(x).includes('$lastn')),
    );
    const lastn = events.find((x) => JSON.stringify(x).includes('$lastn')) as Json;
    const query = (lastn.entity as { query?: string }[]).find((e) => e.query)?.query as string;
    expect(Buffer.from(query, 'base64').toString('utf8')).toContain('85354-9');
    const bad = await t.request({
      method: 'POST',
      url: `${t.fhir}/Observation/$lastn`,
      token: admin,
      payload: { resourceType: 'Patient', parameter: 'x' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().resourceType).toBe('OperationOutcome');
  });

  it('is in the CapabilityStatement', async () => {
    const cs = (await t.request({ method: 'GET', url: `${t.fhir}/metadata` })).json() as {
      rest: { resource: { type: string; operation?: { name: string }[] }[] }[];
    };
    const observation = cs.rest[0]!.resource.find((r) => r.type === 'Observation');
    expect(observation?.operation?.map((o) => o.name)).toContain('lastn');
  });
});
