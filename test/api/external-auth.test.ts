// Direct external authentication (API.md §4, seed §5) and invite (API.md §3), through HTTP, against a mock
// identity provider: identification rules and precedence, every 401 case, the response shape, the one-hour cache.
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { testDatabases } from '../support/db.js';
import { startTestApp, type TestApp, postResource } from '../support/app.js';

describe.each(testDatabases())('external authentication on $name', (database) => {
  let t: TestApp;
  let idp: MockIdp;
  let now = Date.now();
  let project: { projectId: string; adminToken: string; memberToken: string };
  let practitioner: { id: string; membershipId: string };
  const nowSec = () => Math.floor(now / 1000);

  const userinfo = (token: string) => t.request({ method: 'GET', url: '/oauth2/userinfo', token });
  const invite = (body: Record<string, unknown>, token = project.adminToken, projectId = project.projectId) =>
    t.request({
      method: 'POST',
      url: `/admin/projects/${projectId}/invite`,
      token,
      headers: { 'content-type': 'application/json' },
      payload: body,
    });

  beforeAll(async () => {
    idp = await startMockIdp();
    t = await startTestApp(
      database,
      { externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }] },
      { clock: () => new Date(now) },
    );
    project = await t.newProject('External');
    const res = await invite({
      resourceType: 'Practitioner',
      firstName: 'Alice',
      lastName: 'Smith',
      email: 'alice@example.org',
      externalId: 'idp|alice',
    });
    expect(res.statusCode).toBe(200);
    const m = res.json();
    practitioner = { id: m.profile.reference.split('/')[1], membershipId: m.id };
    const withIdentifier = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Practitioner/${practitioner.id}`,
      token: project.adminToken,
      payload: {
        resourceType: 'Practitioner',
        id: practitioner.id,
        identifier: [{ system: 'https://idp.example/ids', value: 'alice-1' }],
        name: [{ given: ['Alice'], family: 'Smith' }],
      },
    });
    expect(withIdentifier.statusCode).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });
  beforeEach(() => {
    idp.mode = 'ok';
    now = Date.now();
  });

  it('answers the documented JSON with a service token scoped to the membership (fhirUser Type/id)', async () => {
    const token = await idp.token(
      { sub: 'whoever', fhirUser: `Practitioner/${practitioner.id}` },
      { now: nowSec(), lifetime: 600 },
    );
    const res = await userinfo(token);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      sub: 'whoever',
      fhirUser: `Practitioner/${practitioner.id}`,
      name: 'Alice Smith',
      given_name: 'Alice',
      family_name: 'Smith',
      profile: { reference: `Practitioner/${practitioner.id}`, display: 'Alice Smith' },
      project: { reference: `Project/${project.projectId}`, display: 'External' },
      membership: { reference: `ProjectMembership/${practitioner.membershipId}` },
      token_type: 'Bearer',
    });
    // Never past the external token's exp (600 s), even though accessTokenLifetime is 3600.
    expect(body.expires_in).toBeLessThanOrEqual(600);
    expect(decodeJwt(body.access_token).exp).toBeLessThanOrEqual(nowSec() + 600);
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/Practitioner/${practitioner.id}`,
      token: body.access_token,
    });
    expect(read.statusCode).toBe(200);
    const other = await t.newProject('Other');
    const foreign = (await postResource(t, other.adminToken, { resourceType: 'Patient' })).json();
    expect(
      (await t.request({ method: 'GET', url: `${t.fhir}/Patient/${foreign.id}`, token: body.access_token }))
        .statusCode,
    ).toBe(404);
  });

  it.each([
    ['search', (_id: string) => `Practitioner?identifier=https://idp.example/ids|alice-1`],
    ['search with %7C', () => 'Practitioner?identifier=https://idp.example/ids%7Calice-1'],
    [
      'absolute URL with search',
      () => 'https://idp.example/fhir/Practitioner?identifier=https://idp.example/ids|alice-1',
    ],
    ['absolute URL with id', (id: string) => `https://idp.example/fhir/Practitioner/${id}`],
  ])('accepts fhirUser as %s', async (_name, form) => {
    const token = await idp.token({ fhirUser: form(practitioner.id) }, { now: nowSec() });
    const res = await userinfo(token);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().fhirUser).toBe(`Practitioner/${practitioner.id}`);
    expect(res.json().sub).toBeUndefined();
  });

  it('reads ext.fhirUser, falls back to sub → externalId, and prefers fhirUser over sub', async () => {
    const ext = await userinfo(
      await idp.token({ ext: { fhirUser: `Practitioner/${practitioner.id}` } }, { now: nowSec() }),
    );
    expect(ext.statusCode).toBe(200);
    const bySub = await userinfo(await idp.token({ sub: 'idp|alice' }, { now: nowSec() }));
    expect(bySub.statusCode).toBe(200);
    expect(bySub.json().membership.reference).toBe(`ProjectMembership/${practitioner.membershipId}`);
    // fhirUser wins: it names a profile that has no membership, so the (valid) sub is not used.
    const lone = (await postResource(t, project.adminToken, { resourceType: 'Practitioner' })).json();
    const both = await userinfo(
      await idp.token({ sub: 'idp|alice', fhirUser: `Practitioner/${lone.id}` }, { now: nowSec() }),
    );
    expect(both.statusCode).toBe(401);
  });

  it('accepts the external JWT directly as a bearer token on FHIR and /auth/me', async () => {
    const token = await idp.token({ sub: 'idp|alice' }, { now: nowSec() });
    const read = await t.request({ method: 'GET', url: `${t.fhir}/Practitioner/${practitioner.id}`, token });
    expect(read.statusCode).toBe(200);
    const me = await t.request({ method: 'GET', url: '/auth/me', token });
    expect(me.json().membership.id).toBe(practitioner.membershipId);
  });

  it.each([
    ['not a JWT', async () => 'not-a-jwt'],
    [
      'an unknown issuer',
      async () => await idp.token({ sub: 'idp|alice', iss: 'https://elsewhere.example/' }, { now: nowSec() }),
    ],
    [
      'an expired token',
      async () => idp.token({ sub: 'idp|alice', exp: nowSec() - 5 }, { now: nowSec() - 100 }),
    ],
    ['a token without exp', async () => idp.token({ sub: 'idp|alice', exp: null }, { now: nowSec() })],
    ['no matching membership', async () => idp.token({ sub: 'nobody' }, { now: nowSec() })],
    [
      'a fhirUser that names no profile',
      async () => idp.token({ fhirUser: 'Practitioner/missing' }, { now: nowSec() }),
    ],
    [
      'a fhirUser search matching nothing',
      async () => idp.token({ fhirUser: 'Practitioner?identifier=none|x' }, { now: nowSec() }),
    ],
    ['a malformed fhirUser', async () => idp.token({ fhirUser: 'not a reference' }, { now: nowSec() })],
  ])('answers 401 invalid_token for %s', async (_name, make) => {
    const before = idp.calls;
    const res = await userinfo(await make());
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Bearer error="invalid_token"/);
    expect(res.json().issue[0].severity).toBe('error');
    if (_name === 'an expired token' || _name === 'not a JWT' || _name === 'an unknown issuer')
      expect(idp.calls).toBe(before);
  });

  it('answers 401 when the provider rejects the token, and does not cache the failure', async () => {
    const token = await idp.token({ sub: 'idp|alice' }, { now: nowSec() });
    idp.mode = 'reject';
    expect((await userinfo(token)).statusCode).toBe(401);
    idp.mode = 'ok';
    const calls = idp.calls;
    expect((await userinfo(token)).statusCode).toBe(200);
    expect(idp.calls).toBe(calls + 1);
  });

  it('answers 401 when the provider returns another subject', async () => {
    idp.mode = 'other-sub';
    expect((await userinfo(await idp.token({ sub: 'idp|alice' }, { now: nowSec() }))).statusCode).toBe(401);
  });

  it('answers 401 when a fhirUser search matches several profiles', async () => {
    // Profiles are resources with a membership (API.md §4): two invited Practitioners with one identifier.
    for (const name of ['Twin1', 'Twin2']) {
      const m = (await invite({ resourceType: 'Practitioner', firstName: name, lastName: 'Dup' })).json();
      const id = (m.profile.reference as string).split('/')[1] as string;
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/Practitioner/${id}`,
        token: project.adminToken,
        payload: { resourceType: 'Practitioner', id, identifier: [{ system: 'urn:dup', value: 'twin' }] },
      });
      expect(put.statusCode).toBe(200);
    }
    const res = await userinfo(
      await idp.token({ fhirUser: 'Practitioner?identifier=urn:dup|twin' }, { now: nowSec() }),
    );
    expect(res.statusCode).toBe(401);
    expect(res.json().issue[0].details.text).toMatch(/several profiles/);
  });

  it('caches a success for one hour: one provider call for repeated and concurrent requests, again after expiry', async () => {
    const token = await idp.token({ sub: 'idp|alice' }, { now: nowSec(), lifetime: 3 * 3600 });
    const before = idp.calls;
    const results = await Promise.all(Array.from({ length: 10 }, () => userinfo(token)));
    expect(results.every((r) => r.statusCode === 200)).toBe(true);
    expect(idp.calls).toBe(before + 1);
    expect((await userinfo(token)).statusCode).toBe(200);
    expect(idp.calls).toBe(before + 1);
    now += 3600 * 1000 + 1000;
    expect((await userinfo(token)).statusCode).toBe(200);
    expect(idp.calls).toBe(before + 2);
  });

  it('never serves a cached result past the token exp', async () => {
    const token = await idp.token({ sub: 'idp|alice' }, { now: nowSec(), lifetime: 60 });
    expect((await userinfo(token)).statusCode).toBe(200);
    now += 61 * 1000;
    const calls = idp.calls;
    expect((await userinfo(token)).statusCode).toBe(401);
    expect(idp.calls).toBe(calls);
  });

  it('stops accepting a cached token once its membership is deactivated', async () => {
    const res = await invite({
      resourceType: 'Patient',
      firstName: 'Bob',
      lastName: 'Jones',
      externalId: 'idp|bob',
    });
    const m = res.json();
    const token = await idp.token({ sub: 'idp|bob' }, { now: nowSec() });
    expect((await t.request({ method: 'GET', url: '/auth/me', token })).statusCode).toBe(200);
    const upd = await t.request({
      method: 'PUT',
      url: `${t.fhir}/ProjectMembership/${m.id}`,
      token: project.adminToken,
      payload: { ...m, meta: undefined, active: false },
    });
    expect(upd.statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url: '/auth/me', token })).statusCode).toBe(401);
  });

  it('answers userinfo for the service token without a new access token', async () => {
    const res = await userinfo(project.adminToken);
    expect(res.statusCode).toBe(200);
    expect(res.json().access_token).toBeUndefined();
    expect(res.json().project.reference).toBe(`Project/${project.projectId}`);
    expect(res.json().sub).toBe(decodeJwt(project.adminToken).sub);
  });

  describe('invite', () => {
    it('creates profile, user and membership; 403 for non-admins and other projects; 400 for bad bodies', async () => {
      const ok = await invite({
        resourceType: 'Practitioner',
        firstName: 'Carol',
        lastName: 'King',
        email: 'carol@example.org',
        admin: true,
      });
      expect(ok.statusCode).toBe(200);
      const m = ok.json();
      expect(m).toMatchObject({
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${project.projectId}` },
        admin: true,
      });
      const profile = await t.request({
        method: 'GET',
        url: `${t.fhir}/${m.profile.reference}`,
        token: project.adminToken,
      });
      expect(profile.json().name[0]).toMatchObject({ given: ['Carol'], family: 'King' });
      // Inviting the same email again links the existing User.
      const again = await invite({
        resourceType: 'Patient',
        firstName: 'Carol',
        lastName: 'King',
        email: 'CAROL@example.org',
      });
      expect(again.json().user.reference).toBe(m.user.reference);
      expect(
        (await invite({ resourceType: 'Practitioner', firstName: 'X', lastName: 'Y' }, project.memberToken))
          .statusCode,
      ).toBe(403);
      const other = await t.newProject('Elsewhere');
      expect(
        (await invite({ resourceType: 'Practitioner', firstName: 'X', lastName: 'Y' }, other.adminToken))
          .statusCode,
      ).toBe(403);
      expect(
        (
          await invite(
            { resourceType: 'Practitioner', firstName: 'X', lastName: 'Y' },
            t.adminToken,
            other.projectId,
          )
        ).statusCode,
      ).toBe(200);
      for (const bad of [
        { resourceType: 'Observation', firstName: 'X', lastName: 'Y' },
        { resourceType: 'Practitioner', lastName: 'Y' },
        { resourceType: 'Practitioner', firstName: '', lastName: 'Y' },
      ]) {
        const res = await invite(bad);
        expect(res.statusCode).toBe(400);
        expect(res.json().issue[0].code).toBe('invalid');
      }
    });

    it('keeps externalId unique across projects, for invites (also concurrent) and for FHIR writes', async () => {
      const first = await invite({
        resourceType: 'Practitioner',
        firstName: 'Dup',
        lastName: 'One',
        externalId: 'dup-ext-1',
      });
      expect(first.statusCode).toBe(200);
      const other = await t.newProject('Dup');
      const second = await invite(
        { resourceType: 'Practitioner', firstName: 'Dup', lastName: 'Two', externalId: 'dup-ext-1' },
        other.adminToken,
        other.projectId,
      );
      expect(second.statusCode).toBe(409);
      expect(second.json().issue[0].code).toBe('duplicate');
      const race = await Promise.all(
        [1, 2, 3, 4].map((i) =>
          invite({ resourceType: 'Patient', firstName: `R${i}`, lastName: 'Race', externalId: 'race-ext' }),
        ),
      );
      expect(race.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409]);
      const viaFhir = await t.request({
        method: 'POST',
        url: `${t.fhir}/ProjectMembership`,
        token: other.adminToken,
        payload: {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${other.projectId}` },
          user: { reference: 'User/x' },
          // The profile must be a resource of the membership's project (API.md §3).
          profile: {
            reference: `Practitioner/${(await postResource(t, other.adminToken, { resourceType: 'Practitioner' })).json().id}`,
          },
          externalId: 'dup-ext-1',
        },
      });
      expect(viaFhir.statusCode).toBe(409);
    });
  });

  // Last in this file: it removes the unique index to stand in for data that reached the database another way
  // (a restore), which is what seed §5.6's 401 still guards.
  it('answers 401 when several memberships share the externalId (seed §5.6)', async () => {
    await t.db.query('DROP INDEX resources_membership_external_id');
    // Whole memberships (a live profile and user of the project), as a restore would bring them.
    for (const name of ['One', 'Two']) {
      const res = await invite({ resourceType: 'Practitioner', firstName: name, lastName: 'Shared' });
      expect(res.statusCode).toBe(200);
      await t.db.query(
        `UPDATE resources SET content = jsonb_set(content::jsonb, '{externalId}', '"shared-ext"')
         WHERE resource_type = 'ProjectMembership' AND id = $1`,
        [res.json().id],
      );
    }
    const res = await userinfo(await idp.token({ sub: 'shared-ext' }, { now: nowSec() }));
    expect(res.statusCode).toBe(401);
    expect(res.json().issue[0].details.text).toMatch(/Several project memberships/);
  });
});
