// SMART `patient/` scopes reach only the patient in context's compartment
// (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html, R4 Patient CompartmentDefinition): reads,
// searches with includes, chains and `_has`, history, compartment search, $everything and $csv see only that patient's
// data; writes may neither change nor make another patient's; bulk work over stored data is refused. Every case here
// passed another patient's data through before the narrowing existed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteRequest, postBundle, setUserPassword, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { kickOff } from '../support/jobs.js';
import { smartLaunch } from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://app.example/callback';

type Json = Record<string, unknown>;
const ids = (bundle: Json): string[] =>
  ((bundle.entry as { resource: Json }[] | undefined) ?? []).map(
    (e) => `${e.resource.resourceType as string}/${e.resource.id as string}`,
  );

describe.each(testDatabases())('patient scopes on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let me: string; // the signed-in Patient user's own Patient id
  let other: string; // another patient of the same project
  const made: Record<string, string> = {};
  let token: string; // launch/patient patient/*.cruds
  let mixed: string; // user/Practitioner.rs user/Patient.rs patient/*.rs

  const req = (tok: string, method: string, path: string, payload?: unknown) =>
    t.request({
      method: method as 'GET',
      url: `${t.fhir}/${path}`,
      token: tok,
      ...(payload !== undefined ? { payload: payload as Json } : {}),
    });
  const create = async (resource: Json): Promise<string> => {
    const res = await req(admin, 'POST', resource.resourceType as string, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const obs = (patient: string, code: string, extra: Json = {}) => ({
    resourceType: 'Observation',
    status: 'final',
    code: { coding: [{ system: 'http://loinc.org', code }] },
    subject: { reference: `Patient/${patient}` },
    ...extra,
  });

  beforeAll(async () => {
    t = await startTestApp(database);
    const p = await t.newProject('Patient Scopes');
    admin = p.adminToken;
    const client = await req(admin, 'PUT', 'ClientApplication/patient-app', {
      resourceType: 'ClientApplication',
      id: 'patient-app',
      name: 'Patient app',
      redirectUri: REDIRECT,
    });
    expect(client.statusCode, client.body).toBeLessThan(300);
    const invited = await inviteRequest(t, admin, p.projectId, {
      resourceType: 'Patient',
      firstName: 'Mia',
      lastName: 'Mine',
      email: 'mia@scopes.example',
    });
    expect(invited.statusCode, invited.body).toBe(200);
    const membership = invited.json() as { user: { reference: string }; profile: { reference: string } };
    me = membership.profile.reference.split('/')[1] as string;
    await setUserPassword(t, membership.user.reference.split('/')[1] as string, PASSWORD);

    other = await create({ resourceType: 'Patient', name: [{ family: 'Otherson' }] });
    // A Patient that links to me is in my compartment (the Patient compartment's `link` parameter).
    made.linked = await create({
      resourceType: 'Patient',
      name: [{ family: 'Linked' }],
      link: [{ other: { reference: `Patient/${me}` }, type: 'seealso' }],
    });
    made.doc = await create({ resourceType: 'Practitioner', name: [{ family: 'Doc' }] });
    made.med = await create({ resourceType: 'Medication', code: { text: 'aspirin' } });
    made.enc = await create({
      resourceType: 'Encounter',
      status: 'finished',
      class: { code: 'AMB' },
      subject: { reference: `Patient/${me}` },
    });
    made.mine = await create(obs(me, '1111-1', { performer: [{ reference: `Practitioner/${made.doc}` }] }));
    made.theirs = await create(obs(other, '2222-2'));
    // Mine, performed by another patient (so in both compartments): its performer is out of my reach.
    made.mineWithOther = await create(obs(me, '7777-7', { performer: [{ reference: `Patient/${other}` }] }));
    // Another patient's Observation made during my Encounter.
    made.theirsInMyEncounter = await create(
      obs(other, '3333-3', { encounter: { reference: `Encounter/${made.enc}` } }),
    );

    const launch = (scope: string) =>
      smartLaunch(t.app, {
        clientId: 'patient-app',
        redirectUri: REDIRECT,
        aud: 'http://cinder.test/fhir/R4',
        email: 'mia@scopes.example',
        password: PASSWORD,
        scope,
      });
    const a = await launch('launch/patient patient/*.cruds');
    expect(a.patient).toBe(me);
    expect(a.scope).toBe('launch/patient patient/*.cruds');
    token = a.access_token as string;
    mixed = (await launch('launch/patient user/Practitioner.rs user/Patient.rs patient/*.rs'))
      .access_token as string;
  });
  afterAll(async () => t?.close());

  it('reads the patient and its data, and nothing of another patient', async () => {
    expect((await req(token, 'GET', `Patient/${me}`)).statusCode).toBe(200);
    expect((await req(token, 'GET', `Observation/${made.mine}`)).statusCode).toBe(200);
    expect((await req(token, 'GET', `Patient/${made.linked}`)).statusCode).toBe(200);
    for (const path of [
      `Patient/${other}`,
      `Observation/${made.theirs}`,
      `Observation/${made.theirs}/_history/1`,
    ]) {
      const res = await req(token, 'GET', path);
      expect(res.statusCode, path).toBe(404);
      expect(res.json().issue[0].code).toBe('not-found');
    }
    // Types outside every Patient compartment are not reached by patient/ scopes at all.
    const med = await req(token, 'GET', `Medication/${made.med}`);
    expect(med.statusCode).toBe(403);
    expect(med.json().issue[0].code).toBe('forbidden');
  });

  it('searches only the compartment, with includes, chains and _has narrowed too', async () => {
    const observations = ids((await req(token, 'GET', 'Observation?_count=50')).json());
    expect(observations.sort()).toEqual(
      [`Observation/${made.mine}`, `Observation/${made.mineWithOther}`].sort(),
    );
    const patients = ids((await req(token, 'GET', 'Patient?_count=50')).json());
    expect(patients.sort()).toEqual([`Patient/${me}`, `Patient/${made.linked}`].sort());
    // _include of another patient: my Observation's performer is not mine to see.
    const inc = await req(token, 'GET', `Observation?code=7777-7&_include=Observation:performer`);
    expect(ids(inc.json())).toEqual([`Observation/${made.mineWithOther}`]);
    // _revinclude through my Encounter must not bring the other patient's Observation.
    const rev = await req(token, 'GET', `Encounter?_id=${made.enc}&_revinclude=Observation:encounter`);
    expect(ids(rev.json())).toEqual([`Encounter/${made.enc}`]);
    // _has and chains read through the compartment only.
    const has = await req(token, 'GET', `Encounter?_has:Observation:encounter:code=3333-3`);
    expect(has.statusCode, has.body).toBe(200);
    expect(ids(has.json())).toEqual([]);
    const chain = await req(token, 'GET', 'Observation?performer:Patient.family=Otherson');
    expect(chain.statusCode, chain.body).toBe(200);
    expect(ids(chain.json())).toEqual([]);
    // A compartment search of another patient finds nothing.
    expect(ids((await req(token, 'GET', `Patient/${other}/Observation`)).json())).toEqual([]);
  });

  it('keeps history, $everything and $csv to the compartment, and refuses bulk work', async () => {
    const typeHistory = ids((await req(token, 'GET', 'Observation/_history')).json());
    expect(typeHistory.sort()).toEqual(
      [`Observation/${made.mine}`, `Observation/${made.mineWithOther}`].sort(),
    );
    const system = ids((await req(token, 'GET', '_history?_count=100')).json());
    expect(system).toContain(`Observation/${made.mine}`);
    expect(system).not.toContain(`Observation/${made.theirs}`);
    expect(system).not.toContain(`Patient/${other}`);
    expect((await req(token, 'GET', `Observation/${made.theirs}/_history`)).statusCode).toBe(404);

    expect((await req(token, 'GET', `Patient/${other}/$everything`)).statusCode).toBe(404);
    // With user/Patient.rs the other Patient is readable, but its compartment's Observations stay out of reach.
    const theirEverything = await req(mixed, 'GET', `Patient/${other}/$everything`);
    expect(theirEverything.statusCode, theirEverything.body).toBe(200);
    // (My Observation that names them as performer is in their compartment and in my reach.)
    expect(ids(theirEverything.json()).sort()).toEqual(
      [`Patient/${other}`, `Observation/${made.mineWithOther}`].sort(),
    );
    const everything = ids((await req(token, 'GET', `Patient/${me}/$everything`)).json());
    expect(everything).toContain(`Observation/${made.mine}`);
    expect(everything).not.toContain(`Observation/${made.theirsInMyEncounter}`);

    const csv = await req(token, 'GET', 'Patient/$csv?_fields=id');
    expect(csv.statusCode, csv.body).toBe(200);
    const rows = csv.body.trim().split(/\r?\n/).slice(1).sort();
    expect(rows).toEqual([me, made.linked].sort());

    const bulk = await kickOff(t, token, 'Patient/$export');
    expect(bulk.statusCode).toBe(403);
    expect(bulk.json().issue[0].code).toBe('forbidden');
    const view = await req(token, 'POST', '$viewdefinition-run', {
      resourceType: 'Parameters',
      parameter: [
        {
          name: 'viewResource',
          resource: {
            resourceType: 'ViewDefinition',
            status: 'active',
            resource: 'Patient',
            select: [{ column: [{ name: 'id', path: 'id' }] }],
          },
        },
      ],
    });
    expect(view.statusCode, view.body).toBe(403);
  });

  it('writes only within the compartment', async () => {
    const forbidden = (res: { statusCode: number; json: () => Json }) => {
      expect(res.statusCode).toBe(403);
      expect((res.json().issue as Json[])[0]).toMatchObject({ code: 'forbidden' });
    };
    // Create: another patient's Observation is refused, mine is made.
    forbidden(await req(token, 'POST', 'Observation', obs(other, '4444-4')));
    expect((await req(token, 'POST', 'Observation', obs(me, '4444-4'))).statusCode).toBe(201);
    // A new Patient outside my compartment, also by update-as-create.
    forbidden(await req(token, 'POST', 'Patient', { resourceType: 'Patient' }));
    forbidden(await req(token, 'PUT', 'Patient/made-by-put', { resourceType: 'Patient', id: 'made-by-put' }));
    // Another patient's data cannot be changed (not visible), nor mine moved out of my compartment.
    const theirs = { ...obs(other, '2222-2'), id: made.theirs };
    expect((await req(token, 'PUT', `Observation/${made.theirs}`, theirs)).statusCode).toBe(404);
    expect((await req(token, 'DELETE', `Observation/${made.theirs}`)).statusCode).toBe(404);
    forbidden(
      await req(token, 'PUT', `Observation/${made.mine}`, { ...obs(other, '1111-1'), id: made.mine }),
    );
    const patch = await t.request({
      method: 'PATCH',
      url: `${t.fhir}/Observation/${made.mine}`,
      token,
      headers: { 'content-type': 'application/json-patch+json' },
      payload: JSON.stringify([{ op: 'replace', path: '/subject/reference', value: `Patient/${other}` }]),
    });
    forbidden(patch);
    const still = (await req(admin, 'GET', `Observation/${made.mine}`)).json();
    expect(still.subject).toEqual({ reference: `Patient/${me}` });
    // Bundles: a transaction with one entry outside fails whole; a batch fails that entry only.
    const tx = await postBundle(t, token, 'transaction', [
      { resource: obs(me, '5555-5'), request: { method: 'POST', url: 'Observation' } },
      { resource: obs(other, '5555-5'), request: { method: 'POST', url: 'Observation' } },
    ]);
    forbidden(tx);
    const batch = await postBundle(t, token, 'batch', [
      { resource: obs(me, '6666-6'), request: { method: 'POST', url: 'Observation' } },
      { resource: obs(other, '6666-6'), request: { method: 'POST', url: 'Observation' } },
    ]);
    expect(batch.statusCode, batch.body).toBe(200);
    const statuses = (batch.json().entry as { response: { status: string } }[]).map((e) => e.response.status);
    expect(statuses[0]).toMatch(/^201/);
    expect(statuses[1]).toMatch(/^403/);
    const made5 = (await req(admin, 'GET', 'Observation?code=5555-5,6666-6')).json();
    expect(ids(made5)).toHaveLength(1);
  });

  it('keeps types that a user/ scope grants whole', async () => {
    // user/Practitioner.rs reads every Practitioner and includes them; patient/*.rs still narrows the rest.
    expect((await req(mixed, 'GET', `Practitioner/${made.doc}`)).statusCode).toBe(200);
    const inc = await req(mixed, 'GET', `Observation?code=1111-1&_include=Observation:performer`);
    expect(ids(inc.json()).sort()).toEqual([`Observation/${made.mine}`, `Practitioner/${made.doc}`].sort());
    expect((await req(mixed, 'GET', `Observation/${made.theirs}`)).statusCode).toBe(404);
    expect((await req(mixed, 'GET', `Patient/${other}`)).statusCode).toBe(200);
    // The narrowed token gets no Practitioner at all (not in a Patient compartment).
    expect((await req(token, 'GET', `Practitioner/${made.doc}`)).statusCode).toBe(403);
  });
});
