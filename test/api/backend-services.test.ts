// SMART Backend Services (API.md §2, https://hl7.org/fhir/smart-app-launch/backend-services.html): client_credentials
// with a client assertion signed by a key of the ClientApplication's jwksUri, SMART system scopes that narrow what the
// token may do (enforced by src/fhir/access.ts), and the discovery documents.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeJwt, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_CLIENT_ID,
  ADMIN_CLIENT_SECRET,
  postResource,
  startTestApp,
  tokenRequest,
  type TestApp,
} from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { ASYNC, downloadOutput, jobIdOf, kickOff, waitForJob } from '../support/jobs.js';

const ASSERTION_TYPE = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
const TOKEN_URL = 'http://cinder.test/oauth2/token';
const REFUSED = { error: 'invalid_client', error_description: 'Invalid client assertion' };

interface Key {
  kid: string;
  alg: 'RS384' | 'ES384' | 'RS256';
  privateKey: CryptoKey;
  jwk: JWK;
}

async function newKey(alg: Key['alg']): Promise<Key> {
  const pair = await generateKeyPair(alg, { extractable: true });
  const kid = `${alg}-${randomUUID().slice(0, 8)}`;
  return { kid, alg, privateKey: pair.privateKey, jwk: { ...(await exportJWK(pair.publicKey)), kid, alg } };
}

/** A JWK Set server on loopback: each path serves its own key list and counts its requests. */
interface JwksServer {
  url(path: string): string;
  serve(path: string, keys: Key[]): void;
  hits(path: string): number;
  close(): Promise<void>;
}

async function startJwksServer(): Promise<JwksServer> {
  const sets = new Map<string, Key[]>();
  const hits = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const path = req.url ?? '';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    const keys = sets.get(path);
    if (!keys) return res.writeHead(404).end();
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ keys: keys.map((k) => k.jwk) }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: (path) => `http://127.0.0.1:${port}${path}`,
    serve: (path, keys) => void sets.set(path, keys),
    hits: (path) => hits.get(path) ?? 0,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe.each(testDatabases())('SMART Backend Services on $name', (database) => {
  let jwks: JwksServer;
  /** Allows the loopback JWKS server (allowedOutboundHosts), runs export jobs; its clock can be moved forward. */
  let t: TestApp;
  /** A second instance on the same database, also allowing loopback. */
  let twin: TestApp;
  /** The same database without allowedOutboundHosts. */
  let strict: TestApp;
  let offsetMs = 0;
  const clock = (): Date => new Date(Date.now() + offsetMs);
  const nowSeconds = (): number => Math.floor(clock().getTime() / 1000);
  let project: { projectId: string; adminToken: string };
  let rs: Key;
  let es: Key;
  let patientId: string;
  let observationId: string;

  /** A ClientApplication with `jwksUri` (serving `keys`) and a membership of its project; returns its id. */
  const backendClient = async (
    path: string,
    keys: Key[],
    opts: { admin?: boolean; extra?: Record<string, unknown>; app?: TestApp; token?: string } = {},
  ): Promise<string> => {
    jwks.serve(path, keys);
    const app = opts.app ?? t;
    const token = opts.token ?? project.adminToken;
    const c = await postResource(app, token, {
      resourceType: 'ClientApplication',
      name: `backend ${path}`,
      jwksUri: jwks.url(path),
      ...opts.extra,
    });
    expect(c.statusCode, c.body).toBe(201);
    const id = c.json().id as string;
    const m = await postResource(app, token, {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${project.projectId}` },
      user: { reference: `ClientApplication/${id}` },
      profile: { reference: `ClientApplication/${id}` },
      admin: opts.admin ?? false,
    });
    expect(m.statusCode, m.body).toBe(201);
    return id;
  };

  /** A client assertion; `claims` entries set to undefined are left out. */
  const assertion = (
    clientId: string,
    key: Key,
    claims: Record<string, unknown> = {},
    header: Record<string, unknown> = {},
  ): Promise<string> => {
    const now = nowSeconds();
    const payload: Record<string, unknown> = {
      iss: clientId,
      sub: clientId,
      aud: TOKEN_URL,
      exp: now + 240,
      iat: now,
      jti: randomUUID(),
      ...claims,
    };
    for (const k of Object.keys(payload)) if (payload[k] === undefined) delete payload[k];
    return new SignJWT(payload)
      .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT', ...header })
      .sign(key.privateKey);
  };

  /** A token request with an assertion; `scope` is `system/*.rs` unless given (undefined: none sent). */
  const exchange = (jwt: string, fields: Record<string, string | undefined> = {}, app: TestApp = t) => {
    const form: Record<string, string | undefined> = {
      grant_type: 'client_credentials',
      client_assertion_type: ASSERTION_TYPE,
      client_assertion: jwt,
      scope: 'system/*.rs',
      ...fields,
    };
    for (const k of Object.keys(form)) if (form[k] === undefined) delete form[k];
    return tokenRequest(app.app, form as Record<string, string>);
  };

  /** A token of a member client that proves itself with a secret (write scopes are granted to such clients). */
  const secretToken = async (scope?: string): Promise<string> => {
    const res = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: secretClient.id,
      client_secret: secretClient.secret,
      ...(scope ? { scope } : {}),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token as string;
  };
  const secretClient = { id: '', secret: `s-${randomUUID()}` };

  /** A token for `clientId` signed with `key`, asking for `scope`. */
  const tokenFor = async (clientId: string, key: Key, scope?: string): Promise<string> => {
    const res = await exchange(await assertion(clientId, key), scope ? { scope } : {});
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token as string;
  };

  const expectRefused = (res: { statusCode: number; json(): unknown; body: string }) => {
    expect(res.statusCode, res.body).toBe(401);
    expect(res.json()).toEqual(REFUSED);
  };

  let client: string;

  beforeAll(async () => {
    jwks = await startJwksServer();
    t = await startTestApp(database, { allowedOutboundHosts: ['127.0.0.1'] }, { clock, jobs: {} });
    twin = await startTestApp(database, { allowedOutboundHosts: ['127.0.0.1'] }, { clock, db: t.db });
    strict = await startTestApp(database, {}, { db: t.db });
    project = await t.newProject();
    rs = await newKey('RS384');
    es = await newKey('ES384');
    client = await backendClient('/jwks/main', [rs, es]);
    const c = await postResource(t, project.adminToken, {
      resourceType: 'ClientApplication',
      name: 'writer',
      secret: secretClient.secret,
    });
    secretClient.id = c.json().id as string;
    await postResource(t, project.adminToken, {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${project.projectId}` },
      user: { reference: `ClientApplication/${secretClient.id}` },
      profile: { reference: `ClientApplication/${secretClient.id}` },
    });
    const p = await postResource(t, project.adminToken, {
      resourceType: 'Patient',
      name: [{ family: 'Scoped' }],
    });
    patientId = p.json().id as string;
    const o = await postResource(t, project.adminToken, {
      resourceType: 'Observation',
      status: 'final',
      code: { text: 'weight' },
      subject: { reference: `Patient/${patientId}` },
    });
    observationId = o.json().id as string;
  });
  afterAll(async () => {
    await strict?.close();
    await twin?.close();
    await t?.close();
    await jwks?.close();
  });

  describe('client assertions', () => {
    it('RS384 and ES384 assertions get tokens carrying the granted scope', async () => {
      const byRs = await exchange(await assertion(client, rs), { scope: 'system/Patient.rs' });
      expect(byRs.statusCode, byRs.body).toBe(200);
      expect(byRs.json()).toMatchObject({
        token_type: 'Bearer',
        scope: 'system/Patient.rs',
        project: { reference: `Project/${project.projectId}` },
        profile: { reference: `ClientApplication/${client}` },
      });
      expect(decodeJwt(byRs.json().access_token as string)).toMatchObject({
        scope: 'system/Patient.rs',
        client_id: client,
      });
      // The form's client_id is optional; when given it must be the assertion's issuer.
      const byEs = await exchange(await assertion(client, es), { scope: 'system/*.read', client_id: client });
      expect(byEs.statusCode, byEs.body).toBe(200);
      expect(byEs.json().scope).toBe('system/*.read');
      const read = await t.request({
        method: 'GET',
        url: `${t.fhir}/Patient/${patientId}`,
        token: byEs.json().access_token as string,
      });
      expect(read.statusCode).toBe(200);
    });

    it('RS256 assertions work too, and unsupported algorithms are refused', async () => {
      const rs256 = await newKey('RS256');
      const id = await backendClient('/jwks/rs256', [rs256]);
      expect((await exchange(await assertion(id, rs256))).statusCode).toBe(200);
      const hs = await new SignJWT({
        iss: id,
        sub: id,
        aud: TOKEN_URL,
        exp: nowSeconds() + 60,
        jti: randomUUID(),
      })
        .setProtectedHeader({ alg: 'HS256', kid: rs256.kid })
        .sign(new TextEncoder().encode('a-shared-secret-of-at-least-32-bytes!'));
      expectRefused(await exchange(hs));
    });

    it('refuses an assertion whose aud is not the token endpoint', async () => {
      expectRefused(await exchange(await assertion(client, rs, { aud: 'http://cinder.test/fhir/R4' })));
      expectRefused(await exchange(await assertion(client, rs, { aud: undefined })));
    });

    it('refuses exp more than five minutes ahead, a missing exp and an expired one', async () => {
      // Five minutes plus the allowed clock difference (30 s) is the limit.
      expectRefused(await exchange(await assertion(client, rs, { exp: nowSeconds() + 332 })));
      expectRefused(await exchange(await assertion(client, rs, { exp: undefined })));
      expectRefused(await exchange(await assertion(client, rs, { exp: nowSeconds() - 60 })));
      // Just inside the limit works, and so does a client that rounds its exp up (bulk-data-client: now + 300).
      expect((await exchange(await assertion(client, rs, { exp: nowSeconds() + 295 }))).statusCode).toBe(200);
      expect((await exchange(await assertion(client, rs, { exp: nowSeconds() + 301 }))).statusCode).toBe(200);
    });

    it('refuses an assertion whose iss, sub or client_id is not the client', async () => {
      const other = await backendClient('/jwks/other', [await newKey('ES384')]);
      expectRefused(await exchange(await assertion(client, rs, { sub: other })));
      expectRefused(await exchange(await assertion(client, rs, { iss: other })));
      expectRefused(await exchange(await assertion(client, rs), { client_id: other }));
    });

    it('uses each jti once, on every instance sharing the database; a missing jti is refused', async () => {
      const jwt = await assertion(client, rs);
      expect((await exchange(jwt)).statusCode).toBe(200);
      expectRefused(await exchange(jwt));
      expectRefused(await exchange(jwt, {}, twin));
      // A new assertion reusing the jti is a replay too.
      const jti = decodeJwt(jwt).jti as string;
      expectRefused(await exchange(await assertion(client, es, { jti })));
      expectRefused(await exchange(await assertion(client, es, { jti }), {}, twin));
      expectRefused(await exchange(await assertion(client, rs, { jti: undefined })));
      // Another client may use the same jti value: uniqueness is per issuer (RFC 7523 §3).
      const other = await backendClient('/jwks/jti', [es]);
      expect((await exchange(await assertion(other, es, { jti }))).statusCode).toBe(200);
    });

    it('refuses a signature by a key that is not in the set, under a known or an unknown kid', async () => {
      const stranger = await newKey('RS384');
      expectRefused(await exchange(await assertion(client, stranger, {}, { kid: rs.kid })));
      expectRefused(await exchange(await assertion(client, stranger)));
      // A jku other than the registered jwksUri is refused (keys only ever come from jwksUri).
      expectRefused(await exchange(await assertion(client, rs, {}, { jku: jwks.url('/jwks/elsewhere') })));
    });

    it('fetches the key set again for an unknown kid (key rotation), at most once per cooldown', async () => {
      const first = await newKey('ES384');
      const second = await newKey('ES384');
      const third = await newKey('ES384');
      const id = await backendClient('/jwks/rotate', [first]);
      expect((await exchange(await assertion(id, first))).statusCode).toBe(200);
      expect(jwks.hits('/jwks/rotate')).toBe(1);
      // Cached: no second fetch for a known kid.
      expect((await exchange(await assertion(id, first))).statusCode).toBe(200);
      expect(jwks.hits('/jwks/rotate')).toBe(1);
      jwks.serve('/jwks/rotate', [second]);
      // Right after a fetch, an unknown kid does not make the server fetch again.
      expectRefused(await exchange(await assertion(id, second)));
      expect(jwks.hits('/jwks/rotate')).toBe(1);
      offsetMs += 31_000;
      expect((await exchange(await assertion(id, second))).statusCode).toBe(200);
      expect(jwks.hits('/jwks/rotate')).toBe(2);
      // Made-up kids right after that fetch cost nothing.
      for (let i = 0; i < 3; i++) expectRefused(await exchange(await assertion(id, third)));
      expect(jwks.hits('/jwks/rotate')).toBe(2);
    });

    it('never fetches a jwksUri on a private address unless the operator allows its host', async () => {
      const key = await newKey('RS384');
      const id = await backendClient('/jwks/strict', [key]);
      expectRefused(await exchange(await assertion(id, key), {}, strict));
      expect(jwks.hits('/jwks/strict')).toBe(0);
      // The same client and key work where the host is allowed.
      expect((await exchange(await assertion(id, key))).statusCode).toBe(200);
      expect(jwks.hits('/jwks/strict')).toBe(1);
    });

    it('refuses a client that is not active or has no membership', async () => {
      const key = await newKey('ES384');
      const off = await backendClient('/jwks/off', [key], { extra: { status: 'off' } });
      const res = await exchange(await assertion(off, key));
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
      jwks.serve('/jwks/lonely', [key]);
      const lonely = await postResource(t, project.adminToken, {
        resourceType: 'ClientApplication',
        name: 'no membership',
        jwksUri: jwks.url('/jwks/lonely'),
      });
      const res2 = await exchange(await assertion(lonely.json().id as string, key));
      expect(res2.statusCode).toBe(401);
      expect(res2.json().error).toBe('invalid_client');
    });

    it('refuses a client secret and an assertion together, and an unknown assertion type', async () => {
      const both = await exchange(await assertion(client, rs), { client_secret: 'x' });
      expect(both.statusCode).toBe(400);
      expect(both.json().error).toBe('invalid_request');
      const type = await exchange(await assertion(client, rs), { client_assertion_type: 'urn:example:saml' });
      expect(type.statusCode).toBe(400);
      expect(type.json().error).toBe('invalid_request');
    });
  });

  describe('scopes', () => {
    const get = (token: string, url: string) => t.request({ method: 'GET', url: `${t.fhir}/${url}`, token });
    const expectForbidden = (res: { statusCode: number; json(): unknown; body: string }) => {
      expect(res.statusCode, res.body).toBe(403);
      expect((res.json() as { issue: { code: string }[] }).issue[0]?.code).toBe('forbidden');
    };

    it('system/Patient.rs reads and searches Patient only, and writes nothing', async () => {
      const token = await tokenFor(client, rs, 'system/Patient.rs');
      expect((await get(token, `Patient/${patientId}`)).statusCode).toBe(200);
      const found = await get(token, `Patient?_id=${patientId}`);
      expect(found.statusCode).toBe(200);
      expect(found.json().entry).toHaveLength(1);
      expect((await get(token, `Patient/${patientId}/_history`)).statusCode).toBe(200);
      expectForbidden(await get(token, `Observation/${observationId}`));
      expectForbidden(await get(token, `Observation?subject=Patient/${patientId}`));
      // A chained parameter searches its target type, which must be permitted too.
      expectForbidden(await get(token, `Patient?general-practitioner:Practitioner.name=x`));
      expectForbidden(await postResource(t, token, { resourceType: 'Patient', name: [{ family: 'New' }] }));
      expectForbidden(
        await t.request({
          method: 'PUT',
          url: `${t.fhir}/Patient/${patientId}`,
          token,
          payload: { resourceType: 'Patient', id: patientId },
        }),
      );
      expectForbidden(await t.request({ method: 'DELETE', url: `${t.fhir}/Patient/${patientId}`, token }));
    });

    it('v1 system/*.read reads every type but cannot write; system/*.write (with a secret) writes', async () => {
      const read = await tokenFor(client, es, 'system/*.read');
      expect((await get(read, `Observation/${observationId}`)).statusCode).toBe(200);
      expectForbidden(
        await postResource(t, read, { resourceType: 'Observation', status: 'final', code: { text: 'x' } }),
      );
      const write = await secretToken('system/*.write');
      expect((await postResource(t, write, { resourceType: 'Basic', code: { text: 'w' } })).statusCode).toBe(
        201,
      );
      expectForbidden(await get(write, `Patient/${patientId}`));
      const all = await secretToken('system/*.*');
      expect((await postResource(t, all, { resourceType: 'Basic', code: { text: 'a' } })).statusCode).toBe(
        201,
      );
      expect((await get(all, `Patient/${patientId}`)).statusCode).toBe(200);
    });

    it('v2 letters: r without s reads but does not search; c creates but does not update', async () => {
      const token = await secretToken('system/Patient.r system/Basic.c');
      expect((await get(token, `Patient/${patientId}`)).statusCode).toBe(200);
      expectForbidden(await get(token, `Patient?_id=${patientId}`));
      const created = await postResource(t, token, { resourceType: 'Basic', code: { text: 'c' } });
      expect(created.statusCode).toBe(201);
      const id = created.json().id as string;
      expectForbidden(
        await t.request({
          method: 'PUT',
          url: `${t.fhir}/Basic/${id}`,
          token,
          payload: { resourceType: 'Basic', id, code: { text: 'u' } },
        }),
      );
      const cruds = await secretToken('system/Basic.cruds');
      expect(
        (
          await t.request({
            method: 'PUT',
            url: `${t.fhir}/Basic/${id}`,
            token: cruds,
            payload: { resourceType: 'Basic', id, code: { text: 'u' } },
          })
        ).statusCode,
      ).toBe(200);
    });

    it('a batch entry outside the scope is refused, one inside works', async () => {
      const token = await tokenFor(client, rs, 'system/Patient.rs');
      const res = await t.request({
        method: 'POST',
        url: t.fhir,
        token,
        payload: {
          resourceType: 'Bundle',
          type: 'batch',
          entry: [
            { request: { method: 'GET', url: `Patient/${patientId}` } },
            { request: { method: 'GET', url: `Observation/${observationId}` } },
          ],
        },
      });
      expect(res.statusCode, res.body).toBe(200);
      const statuses = (res.json() as { entry: { response: { status: string } }[] }).entry.map(
        (e) => e.response.status,
      );
      expect(statuses[0]).toMatch(/^200/);
      expect(statuses[1]).toMatch(/^403/);
    });

    it('grants only what the client may do; nothing grantable is invalid_scope', async () => {
      // A member client may not read ClientApplications: that scope is left out, or refused when it is all.
      const mixed = await exchange(await assertion(client, rs), {
        scope: 'system/ClientApplication.rs system/Patient.rs offline_access',
      });
      expect(mixed.statusCode, mixed.body).toBe(200);
      expect(mixed.json().scope).toBe('system/Patient.rs');
      for (const scope of [
        'system/ClientApplication.rs',
        'patient/*.read',
        'user/Patient.rs',
        'system/Nope.rs',
        'openid system/ClientApplication.read',
      ]) {
        const res = await exchange(await assertion(client, rs), { scope });
        expect(res.statusCode, scope).toBe(400);
        expect(res.json().error).toBe('invalid_scope');
      }
      // Project admins may use ClientApplications but not change Projects: `.*` on Project is trimmed to `.read`.
      const admin = await backendClient('/jwks/admin', [es], { admin: true });
      const clients = await exchange(await assertion(admin, es), { scope: 'system/ClientApplication.*' });
      expect(clients.json().scope).toBe('system/ClientApplication.read');
      const projects = await exchange(await assertion(admin, es), {
        scope: 'system/Project.* system/Project.cud',
      });
      expect(projects.json().scope).toBe('system/Project.read');
    });

    it('tokens without resource scopes keep working as before (client secrets)', async () => {
      const token = await secretToken();
      expect((await postResource(t, token, { resourceType: 'Basic', code: { text: 'p' } })).statusCode).toBe(
        201,
      );
      const openid = await secretToken('openid offline_access');
      expect((await get(openid, `Observation/${observationId}`)).statusCode).toBe(200);
    });

    it('an assertion must ask for system scopes and is granted read access only (Bulk Data)', async () => {
      const jwt = await assertion(client, rs);
      // Refusals for the scope do not use the assertion up: BDT sends one assertion with several scopes.
      for (const scope of [undefined, '', 'launch fhirUser', 'invalid test value', 'system/Patient.write']) {
        const res = await exchange(jwt, { scope });
        expect(res.statusCode, String(scope)).toBe(400);
        expect(res.json().error).toBe('invalid_scope');
      }
      for (const scope of [
        'system/Patient.c',
        'system/Patient.u',
        'system/Patient.d',
        'system/Patient.cud',
      ]) {
        expect((await exchange(jwt, { scope })).json().error, scope).toBe('invalid_scope');
      }
      const granted = await exchange(jwt, {
        scope: 'system/*.* system/Patient.cruds system/Observation.write',
      });
      expect(granted.statusCode, granted.body).toBe(200);
      expect(granted.json().scope).toBe('system/*.read system/Patient.rs');
      expectRefused(await exchange(jwt));
      const read = await tokenFor(client, es, 'system/*.read');
      expectForbidden(await postResource(t, read, { resourceType: 'Basic', code: { text: 'x' } }));
    });

    it('client secrets get scopes too', async () => {
      const secret = `s-${randomUUID()}`;
      const c = await postResource(t, project.adminToken, {
        resourceType: 'ClientApplication',
        name: 'secret',
        secret,
      });
      const id = c.json().id as string;
      await postResource(t, project.adminToken, {
        resourceType: 'ProjectMembership',
        project: { reference: `Project/${project.projectId}` },
        user: { reference: `ClientApplication/${id}` },
        profile: { reference: `ClientApplication/${id}` },
      });
      const res = await tokenRequest(t.app, {
        grant_type: 'client_credentials',
        client_id: id,
        client_secret: secret,
        scope: 'system/Observation.read',
      });
      expect(res.json().scope).toBe('system/Observation.read');
      const token = res.json().access_token as string;
      expect((await get(token, `Observation/${observationId}`)).statusCode).toBe(200);
      expectForbidden(await get(token, `Patient/${patientId}`));
    });

    it('a scope-limited super administrator token runs no super administrator action', async () => {
      const res = await tokenRequest(t.app, {
        grant_type: 'client_credentials',
        client_id: ADMIN_CLIENT_ID,
        client_secret: ADMIN_CLIENT_SECRET,
        scope: 'system/*.read',
      });
      const token = res.json().access_token as string;
      expectForbidden(await postResource(t, token, { resourceType: 'Project', name: 'no' }));
      expectForbidden(
        await t.request({
          method: 'POST',
          url: `${t.fhir}/$reindex`,
          token,
          headers: ASYNC,
          payload: { resourceType: 'Parameters' },
        }),
      );
      const invite = await t.request({
        method: 'POST',
        url: `/admin/projects/${project.projectId}/invite`,
        token,
        headers: { 'content-type': 'application/json' },
        payload: { resourceType: 'Patient', firstName: 'No', lastName: 'Invite' },
      });
      expectForbidden(invite);
    });

    it('$export with a scope-limited token exports only the permitted types', async () => {
      const token = await tokenFor(client, rs, 'system/Patient.rs');
      const id = jobIdOf(await kickOff(t, token, '$export'));
      const job = await waitForJob(t, id, token);
      expect(job.status).toBe('completed');
      const out = await downloadOutput(t, job, token);
      expect(Object.keys(out)).toEqual(['Patient']);
      // A token of the same client whose scopes do not cover Patient cannot download the Patient file (BDT).
      const url = job.output?.parameter[0]?.part.find((x) => x.name === 'url')?.valueUri as string;
      const observations = await tokenFor(client, rs, 'system/Observation.rs');
      expectForbidden(await get(observations, url.replace(`http://cinder.test${t.fhir}/`, '')));
      // The same export with an unlimited token holds Observations too.
      const all = await tokenFor(client, rs);
      const allJob = await waitForJob(t, jobIdOf(await kickOff(t, all, '$export')), all);
      expect(Object.keys(await downloadOutput(t, allJob, all)).sort()).toEqual(
        expect.arrayContaining(['Observation', 'Patient']),
      );
    });
  });

  describe('discovery', () => {
    it('serves smart-configuration at the base and at the FHIR base, without a token', async () => {
      for (const url of ['/.well-known/smart-configuration', '/fhir/R4/.well-known/smart-configuration']) {
        const res = await t.request({ method: 'GET', url });
        expect(res.statusCode, url).toBe(200);
        expect(res.headers['content-type']).toMatch(/^application\/json/);
        const doc = res.json();
        expect(doc).toMatchObject({
          issuer: 'http://cinder.test/',
          jwks_uri: 'http://cinder.test/.well-known/jwks.json',
          token_endpoint: TOKEN_URL,
          code_challenge_methods_supported: ['S256'],
        });
        expect(doc.grant_types_supported).toContain('client_credentials');
        expect(doc.token_endpoint_auth_methods_supported).toEqual(
          expect.arrayContaining(['private_key_jwt', 'client_secret_basic', 'client_secret_post']),
        );
        expect(doc.token_endpoint_auth_signing_alg_values_supported).toEqual(
          expect.arrayContaining(['RS384', 'ES384']),
        );
        expect(doc.scopes_supported).toEqual(expect.arrayContaining(['system/*.read', 'system/*.rs']));
        expect(doc.capabilities).toEqual(
          expect.arrayContaining([
            'client-confidential-asymmetric',
            'client-confidential-symmetric',
            'permission-v1',
            'permission-v2',
          ]),
        );
      }
      const oidc = (await t.request({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
      expect(oidc.token_endpoint_auth_methods_supported).toContain('private_key_jwt');
      expect(oidc.token_endpoint_auth_signing_alg_values_supported).toEqual(
        expect.arrayContaining(['RS384', 'ES384']),
      );
    });

    it('names the token endpoint and the Bulk Data operations in the CapabilityStatement', async () => {
      const cs = (await t.request({ method: 'GET', url: `${t.fhir}/metadata` })).json();
      const rest = cs.rest[0];
      const oauth = rest.security.extension.find(
        (e: { url: string }) =>
          e.url === 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
      );
      expect(oauth.extension).toContainEqual({ url: 'token', valueUri: TOKEN_URL });
      expect(rest.security.service).toContainEqual({
        coding: [
          { system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR' },
        ],
      });
      const BULK = 'http://hl7.org/fhir/uv/bulkdata/OperationDefinition';
      expect(rest.operation).toContainEqual({ name: 'export', definition: `${BULK}/export` });
      const ops = (type: string) => rest.resource.find((r: { type: string }) => r.type === type).operation;
      expect(ops('Patient')).toContainEqual({ name: 'patient-export', definition: `${BULK}/patient-export` });
      expect(ops('Group')).toContainEqual({ name: 'group-export', definition: `${BULK}/group-export` });
    });
  });
  describe('the Bulk Data client flow', () => {
    // What the SMART bulk-data-client does, step by step through HTTP: discover the token endpoint, log in with a
    // signed assertion, kick off a Patient-level export, poll the status as an IG client, download every file, and
    // find as many resources per type as a search counts.
    it('discovers, logs in with private_key_jwt, exports, polls the manifest and downloads', async () => {
      const config = await t.request({
        method: 'GET',
        url: `${t.fhir}/.well-known/smart-configuration`,
        token: null,
      });
      const tokenUrl = config.json().token_endpoint as string;
      expect(config.json().token_endpoint_auth_methods_supported).toContain('private_key_jwt');
      const jwt = await new SignJWT({ iss: client, sub: client, aud: tokenUrl, jti: randomUUID() })
        .setProtectedHeader({ alg: 'ES384', kid: es.kid, typ: 'JWT' })
        .setExpirationTime(nowSeconds() + 300)
        .sign(es.privateKey);
      const login = await tokenRequest(t.app, {
        grant_type: 'client_credentials',
        client_assertion_type: ASSERTION_TYPE,
        client_assertion: jwt,
        scope: 'system/*.rs',
      });
      expect(login.statusCode, login.body).toBe(200);
      const token = login.json().access_token as string;
      const kicked = await t.request({
        method: 'GET',
        url: `${t.fhir}/Patient/$export`,
        token,
        headers: { accept: 'application/fhir+json', prefer: 'respond-async' },
      });
      const statusUrl = String(kicked.headers['content-location']).replace('http://cinder.test', '');
      expect(jobIdOf(kicked)).toBeTruthy();
      let manifest: { output: { type: string; url: string; count: number }[]; error: unknown[] } | undefined;
      for (let i = 0; i < 400 && !manifest; i++) {
        const res = await t.request({
          method: 'GET',
          url: statusUrl,
          token,
          headers: { accept: 'application/json' },
        });
        if (res.statusCode === 200) manifest = res.json();
        else {
          expect(res.statusCode).toBe(202);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      expect(manifest?.error).toEqual([]);
      const lines: Record<string, number> = {};
      for (const file of manifest?.output ?? []) {
        const res = await t.request({
          method: 'GET',
          url: file.url.replace('http://cinder.test', ''),
          token,
        });
        expect(res.statusCode).toBe(200);
        const n = res.body.trim().split('\n').length;
        expect(n).toBe(file.count);
        lines[file.type] = (lines[file.type] ?? 0) + n;
      }
      expect(Object.keys(lines).sort()).toEqual(['Observation', 'Patient']);
      for (const [type, n] of Object.entries(lines)) {
        const total = await t.request({
          method: 'GET',
          url: `${t.fhir}/${type}?_total=accurate&_count=0`,
          token: project.adminToken,
        });
        expect(total.json().total, type).toBe(n);
      }
    });
  });
});
