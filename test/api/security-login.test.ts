// Issue 12, login side (API.md §1–§4): nothing that answers a login names another project's resource, a client logs in
// only through a membership of its own project, start-up never adopts a tenant's client as the super administrator's,
// fhirUser names only a person, another project cannot lock a user out, and deleting or deactivating a client,
// membership or user ends its tokens (on every instance). Rows that the write rules now refuse are inserted with SQL,
// as a restore would bring them.
import { randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { s256 } from '../../src/auth/authorization-code.js';
import { BootstrapError, ensureSuperAdmin } from '../../src/auth/bootstrap.js';
import type { Db } from '../../src/storage/db.js';
import { postgresSignals, type Signals } from '../../src/storage/signals.js';
import { testDatabases } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import {
  ADMIN_CLIENT_ID,
  ADMIN_CLIENT_SECRET,
  postResource,
  startTestApp,
  tokenRequest,
  type TestApp,
  inviteRequest,
} from '../support/app.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Stores a resource directly (no write rule, no index), as restored data would arrive. */
async function insertRow(db: Db, projectId: string, resource: Json): Promise<void> {
  const content = {
    ...resource,
    meta: { versionId: '1', lastUpdated: new Date().toISOString(), project: projectId },
  };
  await db.query(
    `INSERT INTO resources (resource_type, id, project_id, version_id, last_updated, deleted, content)
     VALUES ($1, $2, $3, 1, now(), false, $4::jsonb)`,
    [resource.resourceType, resource.id, projectId, JSON.stringify(content)],
  );
}

/** Changes stored content directly (a restore), without the write rules and without the auth-changed signal. */
async function patchRow(db: Db, type: string, id: string, changes: Json): Promise<void> {
  await db.query(
    `UPDATE resources SET content = content::jsonb || $3::jsonb WHERE resource_type = $1 AND id = $2`,
    [type, id, JSON.stringify(changes)],
  );
}

describe.each(testDatabases())('login security on $name', (database) => {
  let t: TestApp;
  let idp: MockIdp;
  let a: { projectId: string; adminToken: string };
  let b: { projectId: string; adminToken: string };
  const nowSec = () => Math.floor(Date.now() / 1000);

  const post = async (token: string, resource: Json): Promise<Json> => {
    const res = await postResource(t, token, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as Json;
  };
  /** A ClientApplication of the project (created by the super administrator), with a membership unless told. */
  const newClient = async (
    projectId: string,
    opts: { membership?: boolean; admin?: boolean; extra?: Json } = {},
  ): Promise<{ id: string; secret: string; membershipId?: string }> => {
    const secret = `secret-${randomUUID()}`;
    const c = await post(t.adminToken, {
      resourceType: 'ClientApplication',
      name: 'client',
      secret,
      meta: { project: projectId },
      ...opts.extra,
    });
    if (opts.membership === false) return { id: c.id, secret };
    const m = await post(t.adminToken, {
      resourceType: 'ProjectMembership',
      meta: { project: projectId },
      project: { reference: `Project/${projectId}` },
      user: { reference: `ClientApplication/${c.id}` },
      profile: { reference: `ClientApplication/${c.id}` },
      admin: opts.admin ?? false,
    });
    return { id: c.id, secret, membershipId: m.id };
  };
  const clientLogin = (id: string, secret: string) =>
    tokenRequest(t.app, { grant_type: 'client_credentials', client_id: id, client_secret: secret });
  const me = (token: string) => t.request({ method: 'GET', url: '/auth/me', token });
  const userinfo = (token: string) => t.request({ method: 'GET', url: '/oauth2/userinfo', token });
  const invite = async (projectId: string, token: string, body: Json): Promise<Json> => {
    const res = await inviteRequest(t, token, projectId, body);
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Json;
  };
  const passwordLogin = (email: string, password: string, challenge: string) =>
    t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ email, password, codeChallenge: challenge, codeChallengeMethod: 'S256' }),
    });
  /** A user of project A with a password: its membership, profile, user id and a code-flow token response. */
  const passwordUser = async (): Promise<{
    membership: Json;
    userId: string;
    email: string;
    tokens: Json;
  }> => {
    const email = `user-${randomUUID().slice(0, 8)}@a.example`;
    const membership = await invite(a.projectId, a.adminToken, {
      resourceType: 'Practitioner',
      firstName: 'Pat',
      lastName: 'Word',
      email,
    });
    const userId = (membership.user.reference as string).split('/')[1] as string;
    const set = await t.request({
      method: 'POST',
      url: `/admin/users/${userId}/password`,
      token: t.adminToken,
      headers: { 'content-type': 'application/json' },
      payload: { password: 'password-0123456789' },
    });
    expect(set.statusCode).toBe(200);
    const verifier = randomBytes(32).toString('base64url');
    const login = await passwordLogin(email, 'password-0123456789', s256(verifier));
    expect(login.statusCode, login.body).toBe(200);
    const res = await tokenRequest(t.app, {
      grant_type: 'authorization_code',
      code: login.json().code,
      code_verifier: verifier,
    });
    expect(res.statusCode, res.body).toBe(200);
    return { membership, userId, email, tokens: res.json() as Json };
  };
  const readPatients = (token: string) => t.request({ method: 'GET', url: `${t.fhir}/Patient`, token });

  beforeAll(async () => {
    idp = await startMockIdp();
    t = await startTestApp(database, {
      externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }],
    });
    a = await t.newProject('Tenant A');
    b = await t.newProject('Tenant B');
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
  });

  describe('1. a membership naming another project’s resource never answers a login', () => {
    /** Resources of B that a membership of A must never lend a login: a Patient, a client with its IdP, a membership. */
    const foreignTargets = async (): Promise<Record<string, string>> => {
      const patient = await post(b.adminToken, { resourceType: 'Patient', name: [{ family: 'Foreign' }] });
      const client = await newClient(b.projectId, {
        extra: {
          identityProvider: {
            authorizeUrl: 'https://idp.b.example/authorize',
            tokenUrl: 'https://idp.b.example/token',
            userInfoUrl: 'https://idp.b.example/userinfo',
            clientId: 'b-client',
            clientSecret: 'b-idp-secret',
          },
        },
      });
      return {
        Patient: `Patient/${patient.id as string}`,
        ClientApplication: `ClientApplication/${client.id}`,
        ProjectMembership: `ProjectMembership/${client.membershipId as string}`,
      };
    };

    it.each(['Patient', 'ClientApplication', 'ProjectMembership'])(
      'refuses the client login of a restored membership whose profile is B’s %s',
      async (type) => {
        const target = (await foreignTargets())[type] as string;
        const c = await newClient(a.projectId, { membership: false });
        await insertRow(t.db, a.projectId, {
          resourceType: 'ProjectMembership',
          id: randomUUID(),
          project: { reference: `Project/${a.projectId}` },
          user: { reference: `ClientApplication/${c.id}` },
          profile: { reference: target },
          admin: true,
        });
        const res = await clientLogin(c.id, c.secret);
        expect(res.statusCode).toBe(401);
        expect(res.json()).toMatchObject({ error: 'invalid_client' });
        expect(res.body).not.toContain(target.split('/')[1]);
      },
    );

    it.each(['Patient', 'ClientApplication', 'ProjectMembership'])(
      'ends a login whose membership was restored to name B’s %s: /auth/me and userinfo answer 401',
      async (type) => {
        const target = (await foreignTargets())[type] as string;
        const c = await newClient(a.projectId);
        const login = await clientLogin(c.id, c.secret);
        expect(login.statusCode).toBe(200);
        const token = login.json().access_token as string;
        await patchRow(t.db, 'ProjectMembership', c.membershipId as string, {
          profile: { reference: target },
        });
        for (const res of [await me(token), await userinfo(token)]) {
          expect(res.statusCode).toBe(401);
          expect(res.json().issue[0]).toMatchObject({ code: 'login' });
          expect(res.body).not.toContain(target.split('/')[1]);
        }
        expect((await clientLogin(c.id, c.secret)).statusCode).toBe(401);
      },
    );

    it('refuses a restored membership whose profile lives in its project but whose project element names another', async () => {
      const c = await newClient(a.projectId, { membership: false });
      await insertRow(t.db, a.projectId, {
        resourceType: 'ProjectMembership',
        id: randomUUID(),
        project: { reference: `Project/${b.projectId}` },
        user: { reference: `ClientApplication/${c.id}` },
        profile: { reference: `ClientApplication/${c.id}` },
      });
      expect((await clientLogin(c.id, c.secret)).statusCode).toBe(401);
    });

    it('never issues a token response (code flow) naming B’s resource as profile', async () => {
      const user = await passwordUser();
      const patient = await post(b.adminToken, { resourceType: 'Patient' });
      await patchRow(t.db, 'ProjectMembership', user.membership.id as string, {
        profile: { reference: `Patient/${patient.id as string}` },
      });
      // The earlier login ends; a new one finds no usable membership.
      expect((await me(user.tokens.access_token as string)).statusCode).toBe(401);
      const refreshed = await tokenRequest(t.app, {
        grant_type: 'refresh_token',
        refresh_token: user.tokens.refresh_token as string,
      });
      expect(refreshed.statusCode).toBe(400);
      expect(refreshed.json()).toMatchObject({ error: 'invalid_grant' });
      const res = await passwordLogin(
        user.email,
        'password-0123456789',
        s256(randomBytes(32).toString('base64url')),
      );
      expect(res.statusCode).toBe(403);
      expect(res.json().issue[0]).toMatchObject({
        code: 'forbidden',
        details: { text: /no active project membership/ },
      });
    });

    it('refuses an external token whose membership (fhirUser or sub) names B’s Practitioner', async () => {
      const practitioner = await post(b.adminToken, { resourceType: 'Practitioner' });
      const ref = `Practitioner/${practitioner.id as string}`;
      const user = await invite(a.projectId, a.adminToken, {
        resourceType: 'Patient',
        firstName: 'X',
        lastName: 'Y',
      });
      const externalId = `ext-${randomUUID()}`;
      await insertRow(t.db, a.projectId, {
        resourceType: 'ProjectMembership',
        id: randomUUID(),
        project: { reference: `Project/${a.projectId}` },
        user: user.user,
        profile: { reference: ref },
        externalId,
        admin: true,
      });
      for (const claims of [{ fhirUser: ref }, { sub: externalId }]) {
        const res = await userinfo(await idp.token(claims, { now: nowSec() }));
        expect(res.statusCode).toBe(401);
        expect(res.json().issue[0].details.text).toMatch(/No project membership matches/);
        expect(res.body).not.toContain(practitioner.id);
      }
    });
  });

  describe('2. a client logs in only through a membership of its own project', () => {
    it('ignores a membership another project made for the client, even an older one', async () => {
      const c = await newClient(b.projectId, { membership: false });
      const aProfile = await post(a.adminToken, { resourceType: 'Practitioner' });
      // A's admin captured B's client before B gave it a membership (older rows were chosen first).
      await insertRow(t.db, a.projectId, {
        resourceType: 'ProjectMembership',
        id: randomUUID(),
        project: { reference: `Project/${a.projectId}` },
        user: { reference: `ClientApplication/${c.id}` },
        profile: { reference: `Practitioner/${aProfile.id as string}` },
        admin: true,
      });
      const lone = await clientLogin(c.id, c.secret);
      expect(lone.statusCode).toBe(401);
      expect(lone.json()).toMatchObject({ error: 'invalid_client', error_description: /own project/ });
      await post(t.adminToken, {
        resourceType: 'ProjectMembership',
        meta: { project: b.projectId },
        project: { reference: `Project/${b.projectId}` },
        user: { reference: `ClientApplication/${c.id}` },
        profile: { reference: `ClientApplication/${c.id}` },
      });
      const res = await clientLogin(c.id, c.secret);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({
        project: { reference: `Project/${b.projectId}` },
        profile: { reference: `ClientApplication/${c.id}` },
      });
      const token = res.json().access_token as string;
      expect((await me(token)).json().project.id).toBe(b.projectId);
      // B's client writes into B, never into A.
      const written = await post(token, { resourceType: 'Patient' });
      expect(written.meta.project).toBe(b.projectId);
    });
  });

  describe('3. start-up never adopts a tenant’s ClientApplication or User', () => {
    const env = () => ({
      clock: () => new Date(),
      newId: randomUUID,
      fhirBase: `${t.config.baseUrl}fhir/R4`,
    });

    it.each([false, true])(
      'refuses admin.clientId naming a client a tenant created (deleted: %s) and leaves it untouched',
      async (deleted) => {
        const id = `tenant-client-${randomUUID().slice(0, 8)}`;
        const put = await t.request({
          method: 'PUT',
          url: `${t.fhir}/ClientApplication/${id}`,
          token: a.adminToken,
          payload: {
            resourceType: 'ClientApplication',
            id,
            name: 'mine',
            secret: 'tenant-secret-0123456789',
          },
        });
        expect(put.statusCode, put.body).toBe(201);
        await post(a.adminToken, {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${a.projectId}` },
          user: { reference: `ClientApplication/${id}` },
          profile: { reference: `ClientApplication/${id}` },
          admin: true,
        });
        if (deleted) {
          const del = await t.request({
            method: 'DELETE',
            url: `${t.fhir}/ClientApplication/${id}`,
            token: a.adminToken,
          });
          expect(del.statusCode).toBeLessThan(300);
        }
        const err = await ensureSuperAdmin(t.db, env(), {
          ...t.config.admin,
          clientId: id,
          clientSecret: 'operator-secret-0123456789',
        }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(BootstrapError);
        expect((err as Error).message).toMatch(
          new RegExp(`^Invalid configuration: admin\\.clientId: .*${id}`),
        );
        expect((err as Error).message).not.toContain('\n');
        // Nothing changed: the operator's secret does not log in, the tenant's client keeps its project.
        expect((await clientLogin(id, 'operator-secret-0123456789')).statusCode).toBe(401);
        const memberships = await t.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM resources WHERE resource_type = 'ProjectMembership'
             AND content->'user'->>'reference' = $1 AND project_id <> $2`,
          [`ClientApplication/${id}`, a.projectId],
        );
        expect(memberships.rows[0]?.n).toBe(0);
        if (!deleted) {
          const login = await clientLogin(id, 'tenant-secret-0123456789');
          expect(login.statusCode).toBe(200);
          expect(login.json().project.reference).toBe(`Project/${a.projectId}`);
        }
      },
    );

    it('refuses admin.email naming a User a tenant invited', async () => {
      const email = `taken-${randomUUID().slice(0, 8)}@tenant.example`;
      await invite(a.projectId, a.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'T',
        lastName: 'U',
        email,
      });
      const err = await ensureSuperAdmin(t.db, env(), { ...t.config.admin, email }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(BootstrapError);
      expect((err as Error).message).toMatch(/^Invalid configuration: admin\.email: /);
    });

    it('still ensures the configured super administrator idempotently', async () => {
      await ensureSuperAdmin(t.db, env(), t.config.admin);
      const res = await clientLogin(ADMIN_CLIENT_ID, ADMIN_CLIENT_SECRET);
      expect(res.statusCode).toBe(200);
      expect(res.json().project.reference).toBe(`Project/${t.superProjectId}`);
    });
  });

  describe('4. fhirUser names only a Patient, Practitioner or RelatedPerson', () => {
    it.each([
      ['Type/id', `ClientApplication/${ADMIN_CLIENT_ID}`],
      ['search', `ClientApplication?_id=${ADMIN_CLIENT_ID}`],
      ['URL with id', `https://idp.example/fhir/ClientApplication/${ADMIN_CLIENT_ID}`],
      ['URL with search', `https://idp.example/fhir/ClientApplication?_id=${ADMIN_CLIENT_ID}`],
    ])('refuses the admin ClientApplication as fhirUser (%s)', async (_form, fhirUser) => {
      const res = await userinfo(await idp.token({ sub: 'mallory', fhirUser }, { now: nowSec() }));
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toMatch(/invalid_token/);
      expect(res.json().issue[0].details.text).toMatch(/only a Patient, Practitioner or RelatedPerson/);
      expect(res.json().access_token).toBeUndefined();
    });

    it('refuses a User or a ProjectMembership as fhirUser', async () => {
      const m = await invite(a.projectId, a.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'U',
        lastName: 'M',
        email: `um-${randomUUID().slice(0, 8)}@a.example`,
      });
      for (const fhirUser of [m.user.reference as string, `ProjectMembership/${m.id as string}`]) {
        const res = await userinfo(await idp.token({ fhirUser }, { now: nowSec() }));
        expect(res.statusCode).toBe(401);
        expect(res.json().issue[0].details.text).toMatch(/only a Patient, Practitioner or RelatedPerson/);
      }
    });
  });

  describe('5. another project cannot lock a user out', () => {
    it('ignores copies of the identifier without a membership, and memberships of another project', async () => {
      const system = `urn:victim:${randomUUID()}`;
      const m = await invite(a.projectId, a.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'V',
        lastName: 'Ictim',
      });
      const id = (m.profile.reference as string).split('/')[1] as string;
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/Practitioner/${id}`,
        token: a.adminToken,
        payload: { resourceType: 'Practitioner', id, identifier: [{ system, value: 'v' }] },
      });
      expect(put.statusCode).toBe(200);
      // B copies the identifier, and (restored data) gives A's Practitioner a membership of B.
      await post(b.adminToken, { resourceType: 'Practitioner', identifier: [{ system, value: 'v' }] });
      const bUser = await invite(b.projectId, b.adminToken, {
        resourceType: 'Patient',
        firstName: 'B',
        lastName: 'B',
      });
      await insertRow(t.db, b.projectId, {
        resourceType: 'ProjectMembership',
        id: randomUUID(),
        project: { reference: `Project/${b.projectId}` },
        user: bUser.user,
        profile: { reference: `Practitioner/${id}` },
      });
      for (const fhirUser of [`Practitioner?identifier=${system}|v`, `Practitioner/${id}`]) {
        const res = await userinfo(await idp.token({ fhirUser }, { now: nowSec() }));
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json()).toMatchObject({
          fhirUser: `Practitioner/${id}`,
          project: { reference: `Project/${a.projectId}` },
          membership: { reference: `ProjectMembership/${m.id as string}` },
        });
      }
    });
  });

  describe('7. deleting or deactivating a client, membership or user ends its tokens', () => {
    it('a deleted ClientApplication: its token stops at once and it cannot log in', async () => {
      const c = await newClient(a.projectId);
      const token = (await clientLogin(c.id, c.secret)).json().access_token as string;
      expect((await readPatients(token)).statusCode).toBe(200);
      const del = await t.request({
        method: 'DELETE',
        url: `${t.fhir}/ClientApplication/${c.id}`,
        token: a.adminToken,
      });
      expect(del.statusCode).toBeLessThan(300);
      const after = await readPatients(token);
      expect(after.statusCode).toBe(401);
      expect(after.json().issue[0]).toMatchObject({ code: 'login' });
      expect((await clientLogin(c.id, c.secret)).json()).toMatchObject({ error: 'invalid_client' });
    });

    it.each(['off', 'error'])(
      'a ClientApplication with status %s: its token stops, it cannot log in, and reactivating it revives no old token',
      async (status) => {
        const c = await newClient(a.projectId);
        const token = (await clientLogin(c.id, c.secret)).json().access_token as string;
        expect((await readPatients(token)).statusCode).toBe(200);
        const put = (s: string) =>
          t.request({
            method: 'PUT',
            url: `${t.fhir}/ClientApplication/${c.id}`,
            token: a.adminToken,
            payload: { resourceType: 'ClientApplication', id: c.id, name: 'client', status: s },
          });
        expect((await put(status)).statusCode).toBe(200);
        expect((await readPatients(token)).statusCode).toBe(401);
        expect((await clientLogin(c.id, c.secret)).json()).toMatchObject({ error: 'invalid_client' });
        expect((await put('active')).statusCode).toBe(200);
        expect((await readPatients(token)).statusCode).toBe(401);
        const again = await clientLogin(c.id, c.secret);
        expect(again.statusCode).toBe(200);
        expect((await readPatients(again.json().access_token as string)).statusCode).toBe(200);
      },
    );

    it('a deactivated membership: its token stops, and reactivating it revives no old token', async () => {
      const c = await newClient(a.projectId);
      const token = (await clientLogin(c.id, c.secret)).json().access_token as string;
      expect((await readPatients(token)).statusCode).toBe(200);
      const membership = (
        await t.request({
          method: 'GET',
          url: `${t.fhir}/ProjectMembership/${c.membershipId as string}`,
          token: a.adminToken,
        })
      ).json() as Json;
      const put = (active: boolean) =>
        t.request({
          method: 'PUT',
          url: `${t.fhir}/ProjectMembership/${membership.id as string}`,
          token: a.adminToken,
          payload: { ...membership, active },
        });
      expect((await put(false)).statusCode).toBe(200);
      expect((await readPatients(token)).statusCode).toBe(401);
      expect((await clientLogin(c.id, c.secret)).statusCode).toBe(401);
      expect((await put(true)).statusCode).toBe(200);
      expect((await readPatients(token)).statusCode).toBe(401);
      expect((await clientLogin(c.id, c.secret)).statusCode).toBe(200);
    });

    it('a deleted membership: its token stops', async () => {
      const c = await newClient(a.projectId);
      const token = (await clientLogin(c.id, c.secret)).json().access_token as string;
      expect((await readPatients(token)).statusCode).toBe(200);
      const del = await t.request({
        method: 'DELETE',
        url: `${t.fhir}/ProjectMembership/${c.membershipId as string}`,
        token: a.adminToken,
      });
      expect(del.statusCode).toBeLessThan(300);
      expect((await readPatients(token)).statusCode).toBe(401);
    });

    it('a deleted User: its access and refresh tokens stop, and it cannot log in', async () => {
      const user = await passwordUser();
      const token = user.tokens.access_token as string;
      expect((await readPatients(token)).statusCode).toBe(200);
      const del = await t.request({
        method: 'DELETE',
        url: `${t.fhir}/User/${user.userId}`,
        token: t.adminToken,
      });
      expect(del.statusCode).toBeLessThan(300);
      expect((await readPatients(token)).statusCode).toBe(401);
      const refreshed = await tokenRequest(t.app, {
        grant_type: 'refresh_token',
        refresh_token: user.tokens.refresh_token as string,
      });
      expect(refreshed.json()).toMatchObject({ error: 'invalid_grant' });
      const again = await passwordLogin(
        user.email,
        'password-0123456789',
        s256(randomBytes(32).toString('base64url')),
      );
      expect(again.statusCode).toBe(400);
    });

    it('a membership whose User was deleted no longer logs in an external token', async () => {
      const externalId = `ext-${randomUUID()}`;
      const m = await invite(a.projectId, a.adminToken, {
        resourceType: 'Practitioner',
        firstName: 'E',
        lastName: 'X',
        email: `ex-${randomUUID().slice(0, 8)}@a.example`,
        externalId,
      });
      const token = await idp.token({ sub: externalId }, { now: nowSec() });
      expect((await userinfo(token)).statusCode).toBe(200);
      const del = await t.request({
        method: 'DELETE',
        url: `${t.fhir}/${m.user.reference as string}`,
        token: t.adminToken,
      });
      expect(del.statusCode).toBeLessThan(300);
      expect((await userinfo(token)).statusCode).toBe(401);
    });
  });
});

// Two instances on one PostgreSQL: a client deleted through one instance stops working on the other, whose cached
// principal is dropped by the auth-changed signal (LISTEN/NOTIFY).
const url = process.env.TEST_DATABASE_URL;
const postgres = testDatabases().find((d) => d.name === 'postgres');

describe.runIf(url && postgres)('login security on two instances sharing PostgreSQL', () => {
  let one: TestApp;
  let two: TestApp;
  const signals: Signals[] = [];

  beforeAll(async () => {
    const channel = `auth_${randomBytes(4).toString('hex')}`;
    const sig = (): Signals => {
      const s = postgresSignals(url as string, { schema: channel });
      signals.push(s);
      return s;
    };
    const database = postgres as NonNullable<typeof postgres>;
    one = await startTestApp(database, {}, { signals: sig() });
    two = await startTestApp(database, {}, { db: one.db, signals: sig() });
  });
  afterAll(async () => {
    await two?.close();
    await one?.close();
    for (const s of signals) await s.close();
  });

  /** Asks until the answer is `status` (a signal crosses instances asynchronously); gives up after 10 s. */
  const eventually = async (ask: () => Promise<number>, status: number): Promise<number> => {
    let last = await ask();
    for (let i = 0; i < 100 && last !== status; i++) {
      await new Promise((r) => setTimeout(r, 100));
      last = await ask();
    }
    return last;
  };

  it.each(['delete the client', 'deactivate the client', 'deactivate the membership'])(
    'ends the token on the other instance when one instance is told to %s',
    async (change) => {
      const project = await one.newProject();
      const secret = `secret-${randomUUID()}`;
      const client = (
        await postResource(one, project.adminToken, { resourceType: 'ClientApplication', name: 'c', secret })
      ).json() as Json;
      const membership = (
        await postResource(one, project.adminToken, {
          resourceType: 'ProjectMembership',
          project: { reference: `Project/${project.projectId}` },
          user: { reference: `ClientApplication/${client.id as string}` },
          profile: { reference: `ClientApplication/${client.id as string}` },
        })
      ).json() as Json;
      const token = await one.token(client.id as string, secret);
      const read = async () =>
        (await two.request({ method: 'GET', url: `${two.fhir}/Patient`, token })).statusCode;
      expect(await read()).toBe(200); // now cached on instance two
      const res =
        change === 'delete the client'
          ? await one.request({
              method: 'DELETE',
              url: `${one.fhir}/ClientApplication/${client.id as string}`,
              token: project.adminToken,
            })
          : change === 'deactivate the client'
            ? await one.request({
                method: 'PUT',
                url: `${one.fhir}/ClientApplication/${client.id as string}`,
                token: project.adminToken,
                payload: { resourceType: 'ClientApplication', id: client.id, name: 'c', status: 'off' },
              })
            : await one.request({
                method: 'PUT',
                url: `${one.fhir}/ProjectMembership/${membership.id as string}`,
                token: project.adminToken,
                payload: { ...membership, active: false },
              });
      expect(res.statusCode).toBeLessThan(300);
      expect(await eventually(read, 401)).toBe(401);
      const again = await tokenRequest(two.app, {
        grant_type: 'client_credentials',
        client_id: client.id as string,
        client_secret: secret,
      });
      expect(again.json()).toMatchObject({ error: 'invalid_client' });
    },
  );
});
