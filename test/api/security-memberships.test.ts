// A member reads its own ProjectMembership and no other (issue 25, point 5; docs/security.md): memberships
// name users, admin flags and clients. Another membership answers 403, as every admin-only type does, whether it
// exists or not; searches, includes, chains, history, $csv and $export leave the others out, and a member's token is
// never granted ProjectMembership scopes.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { inviteRequest, startTestApp, tokenRequest, type TestApp } from '../support/app.js';
import { downloadOutput, startExport, waitForJob } from '../support/jobs.js';

type Json = Record<string, unknown>;

const ids = (res: LightMyRequestResponse): string[] =>
  ((res.json().entry ?? []) as { resource: { resourceType: string; id: string } }[]).map(
    (e) => `${e.resource.resourceType}/${e.resource.id}`,
  );

const forbidden = (res: LightMyRequestResponse, what: string): void => {
  expect(res.statusCode, `${what}: ${res.body}`).toBe(403);
  expect(res.json().issue[0], what).toMatchObject({
    severity: 'error',
    code: 'forbidden',
    details: { text: 'Forbidden: reading ProjectMembership needs a project administrator' },
  });
};

describe.each(testDatabases())('a member reads only its own membership on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let member: string;
  let projectId: string;
  let own: string;
  let adminMembership: string;
  let patient: string;
  let patientMembership: string;
  let patientUser: string;

  const get = (url: string, token = member) => t.request({ method: 'GET', url: `${t.fhir}/${url}`, token });

  beforeAll(async () => {
    t = await startTestApp(database, {}, { jobs: {} });
    ({ adminToken: admin, memberToken: member, projectId } = await t.newProject());
    const me = async (token: string) =>
      ((await t.request({ method: 'GET', url: '/auth/me', token })).json().membership as Json).id as string;
    own = await me(member);
    adminMembership = await me(admin);
    const invited = await inviteRequest(t, admin, projectId, {
      resourceType: 'Patient',
      firstName: 'Pat',
      lastName: 'Member',
      email: `pat-${projectId}@example.org`,
    });
    expect(invited.statusCode, invited.body).toBe(200);
    patientMembership = invited.json().id as string;
    patientUser = (invited.json().user.reference as string).split('/')[1] as string;
    patient = (invited.json().profile.reference as string).split('/')[1] as string;
  });
  afterAll(async () => t?.close());

  it('reads no User (email, names) of its project: docs/security.md says members cannot', async () => {
    for (const url of [
      `User/${patientUser}`,
      'User',
      `User?_id=${patientUser}`,
      `User/${patientUser}/_history`,
    ]) {
      const res = await get(url);
      expect(res.statusCode, `${url}: ${res.body}`).toBe(403);
      expect(res.json().issue[0].details.text).toBe('Forbidden: reading User needs a project administrator');
    }
    expect((await get(`User/${patientUser}`, admin)).statusCode).toBe(200);
  });

  it('finds only its own membership by search; an admin finds them all', async () => {
    for (const query of ['', '?_total=accurate', `?_id=${own},${adminMembership},${patientMembership}`]) {
      const res = await get(`ProjectMembership${query}`);
      expect(res.statusCode, res.body).toBe(200);
      expect(ids(res), query).toEqual([`ProjectMembership/${own}`]);
      if (query === '?_total=accurate') expect(res.json().total).toBe(1);
    }
    expect((await get(`ProjectMembership?_id=${adminMembership}`)).json().entry ?? []).toEqual([]);
    const count = await get('ProjectMembership?_summary=count');
    expect(count.json().total).toBe(1);
    const all = await get('ProjectMembership', admin);
    expect(ids(all).sort()).toEqual(
      [own, adminMembership, patientMembership].map((id) => `ProjectMembership/${id}`).sort(),
    );
  });

  it('reads its own membership, its versions and history; any other answers 403, existing or not', async () => {
    for (const url of [`ProjectMembership/${own}`, `ProjectMembership/${own}/_history/1`]) {
      const res = await get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.json().id).toBe(own);
    }
    const history = await get(`ProjectMembership/${own}/_history`);
    expect(history.statusCode).toBe(200);
    expect(ids(history)).toEqual([`ProjectMembership/${own}`]);
    for (const id of [adminMembership, patientMembership, 'no-such-membership']) {
      for (const url of [
        `ProjectMembership/${id}`,
        `ProjectMembership/${id}/_history/1`,
        `ProjectMembership/${id}/_history`,
      ])
        forbidden(await get(url), url);
    }
    forbidden(await get('ProjectMembership/_history'), 'type history');
    const system = await get('_history?_count=1000');
    expect(system.statusCode).toBe(200);
    expect(ids(system).filter((x) => x.startsWith('ProjectMembership/'))).toEqual([]);
  });

  it('sees no other membership through _include, _revinclude, chains or _has', async () => {
    const rev = await get(`Patient?_id=${patient}&_revinclude=ProjectMembership:profile`);
    expect(rev.statusCode, rev.body).toBe(200);
    expect(ids(rev)).toEqual([`Patient/${patient}`]);
    // Included memberships are not walked further either (their users would follow).
    const iterate = await get(
      `Patient?_id=${patient}&_revinclude=ProjectMembership:profile&_include:iterate=ProjectMembership:user`,
    );
    expect(ids(iterate)).toEqual([`Patient/${patient}`]);
    forbidden(await get(`Patient?_has:ProjectMembership:profile:_id=${patientMembership}`), '_has');
    // The admin sees what the member may not.
    const adminRev = await get(`Patient?_id=${patient}&_revinclude=ProjectMembership:profile`, admin);
    expect(ids(adminRev)).toContain(`ProjectMembership/${patientMembership}`);
  });

  it('leaves other memberships out of $csv and $export', async () => {
    const csv = await get('ProjectMembership/$csv?_fields=id');
    expect(csv.statusCode, csv.body).toBe(200);
    expect(csv.body).toContain(own);
    for (const other of [adminMembership, patientMembership]) expect(csv.body).not.toContain(other);
    const job = await startExport(t, member, '_type=ProjectMembership,Patient');
    const done = await waitForJob(t, job, member);
    expect(done.status).toBe('completed');
    const out = await downloadOutput(t, done, member);
    expect(out.ProjectMembership).toBeUndefined();
    expect(out.Patient?.map((p) => p.id)).toContain(patient);
  });

  /** A new client of the project (admin or not) logging in with `scope`. */
  async function clientLogin(scope: string, isAdmin: boolean): Promise<LightMyRequestResponse> {
    const post = async (resource: Json): Promise<string> => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/${resource.resourceType as string}`,
        token: t.adminToken,
        payload: { ...resource, meta: { project: projectId } },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    };
    const secret = 'membership-scope-secret-0123456789';
    const client = await post({ resourceType: 'ClientApplication', name: scope, secret });
    await post({
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${projectId}` },
      user: { reference: `ClientApplication/${client}` },
      profile: { reference: `ClientApplication/${client}` },
      admin: isAdmin,
    });
    return tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: client,
      client_secret: secret,
      scope,
    });
  }

  it('grants a member no ProjectMembership scope; with system/*.rs it still reads its own membership', async () => {
    const mixed = await clientLogin('system/ProjectMembership.rs system/Patient.rs', false);
    expect(mixed.statusCode, mixed.body).toBe(200);
    expect(mixed.json().scope).toBe('system/Patient.rs');
    const only = await clientLogin('system/ProjectMembership.read', false);
    expect(only.statusCode).toBe(400);
    expect(only.json().error).toBe('invalid_scope');
    const asAdmin = await clientLogin('system/ProjectMembership.rs system/Patient.rs', true);
    expect(asAdmin.json().scope).toBe('system/ProjectMembership.rs system/Patient.rs');
    const wide = await clientLogin('system/*.rs', false);
    const token = wide.json().access_token as string;
    const mine = ((await t.request({ method: 'GET', url: '/auth/me', token })).json().membership as Json)
      .id as string;
    expect((await get(`ProjectMembership/${mine}`, token)).statusCode).toBe(200);
    expect(ids(await get('ProjectMembership', token))).toEqual([`ProjectMembership/${mine}`]);
    forbidden(await get(`ProjectMembership/${own}`, token), 'another member client');
  });
});
