// Who may do what (API.md §2–§5), as one table: every role × every endpoint → the expected answer. Targets belong to
// project A; "other admin" is the admin of project B. A resource of another project answers 404 with exactly the body
// a missing id gets, and a refused write changes nothing. The policy itself lives in src/fhir/access.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenIssuer } from '../../src/auth/access-token.js';
import { loadKeyRing } from '../../src/auth/keys.js';
import { testDatabases } from '../support/db.js';
import { startMockIdp, type MockIdp } from '../support/mock-idp.js';
import { startTestApp, type TestApp } from '../support/app.js';
import { ASYNC, startExport, waitForJob } from '../support/jobs.js';

const ROLES = [
  'anonymous',
  'bad token',
  'expired token',
  'member',
  'project admin',
  'other admin',
  'super admin',
  'external token',
] as const;
type Role = (typeof ROLES)[number];

/**
 * An answer: the HTTP status, or for Bundles a short text — `200 n=<entries>` for searches whose count shows what
 * the caller sees, `200 [<entry statuses>]` for batches.
 */
type Answer = number | string;
type Row = [Answer, Answer, Answer, Answer, Answer, Answer, Answer, Answer];
const UNAUTH = [401, 401, 401] as const;

// prettier-ignore
const POLICY = {
  //                                    anonymous, bad, expired,    member, admin A, admin B,   super, external (member of A)
  'GET Patient/:id':                   [...UNAUTH,                  200,    200,     404,       200,   200],
  'GET Patient/:id/_history/1':        [...UNAUTH,                  200,    200,     404,       200,   200],
  'GET Patient?_id=:id':               [...UNAUTH,                  '200 n=1', '200 n=1', '200 n=0', '200 n=1', '200 n=1'],
  'POST Patient':                      [...UNAUTH,                  201,    201,     201,       201,   201],
  'PUT Patient/:id':                   [...UNAUTH,                  200,    200,     404,       200,   200],
  'PATCH Patient/:id':                 [...UNAUTH,                  200,    200,     404,       200,   200],
  'DELETE Patient/:id':                [...UNAUTH,                  200,    200,     404,       200,   200],
  'GET Patient/:id/_history':          [...UNAUTH,                  '200 n=1', '200 n=1', 404,  '200 n=1', '200 n=1'],
  'GET Basic/_history':                [...UNAUTH,                  '200 n=1', '200 n=1', '200 n=0', '200 n=1', '200 n=1'],
  'POST / batch (create, read A)':     [...UNAUTH,                  '200 [201 200]', '200 [201 200]', '200 [201 404]', '200 [201 200]', '200 [201 200]'],
  'POST / transaction (create, PUT A)':[...UNAUTH,                  200,    200,     404,       200,   200],
  'GET $export':                       [...UNAUTH,                  202,    202,     202,       202,   202],
  // The export job below was started by the member: its starter, A's admin and the super admin see it.
  'GET AsyncJob/:id':                  [...UNAUTH,                  200,    200,     404,       200,   404],
  'GET AsyncJob/:id/output/:file':     [...UNAUTH,                  200,    200,     404,       200,   404],
  // A job started by A's admin: the member did not start it.
  'POST AsyncJob/:id/$cancel':         [...UNAUTH,                  404,    200,     404,       200,   404],
  'DELETE AsyncJob/:id':               [...UNAUTH,                  404,    202,     404,       202,   404],
  // Searches find only the jobs the caller may read: the member's own, every job of the project for its admin.
  'GET AsyncJob?_id=:memberJob':       [...UNAUTH,                  '200 n=1', '200 n=1', '200 n=0', '200 n=1', '200 n=0'],
  'GET AsyncJob?_id=:adminJob':        [...UNAUTH,                  '200 n=0', '200 n=1', '200 n=0', '200 n=1', '200 n=0'],
  // The ordinary REST interface on AsyncJob (history, create) is for admins (API.md §5).
  'GET AsyncJob/:id/_history':         [...UNAUTH,                  403,    200,     404,       200,   403],
  'POST AsyncJob':                     [...UNAUTH,                  403,    201,     201,       201,   403],
  'POST $reindex':                     [...UNAUTH,                  403,    403,     403,       202,   403],
  'POST Project/:id/$expunge':         [...UNAUTH,                  403,    403,     403,       202,   403],
  'POST Project':                      [...UNAUTH,                  403,    403,     403,       201,   403],
  'POST /admin/projects/:A/invite':    [...UNAUTH,                  403,    200,     403,       200,   403],
  'POST /admin/users/:id/password':    [...UNAUTH,                  403,    403,     403,       200,   403],
  'GET ClientApplication/:id':         [...UNAUTH,                  403,    200,     404,       200,   403],
  'GET ClientApplication?_id=:id':     [...UNAUTH,                  403,    '200 n=1', '200 n=0', '200 n=1', 403],
  'POST ClientApplication':            [...UNAUTH,                  403,    201,     201,       201,   403],
  // Conditional create: write access first, then a search with the caller's read access (found: 200).
  'POST ClientApplication If-None-Exist':[...UNAUTH,                403,    200,     201,       200,   403],
  'PUT ClientApplication/:id':         [...UNAUTH,                  403,    200,     404,       200,   403],
  'DELETE ClientApplication/:id':      [...UNAUTH,                  403,    200,     404,       200,   403],
  // The member's own membership: another member (the external token's user) may not read it (403, before any lookup).
  'GET ProjectMembership/:id':         [...UNAUTH,                  200,    200,     404,       200,   403],
  // A membership of project A (meta.project A): only A's admins and the super admin may make one; a membership
  // stored in another admin's own project must not name project A (400). A super admin's membership without
  // meta.project is stored in the project it names (API.md §3).
  'POST ProjectMembership (in A)':     [...UNAUTH,                  403,    201,     403,       201,   403],
  'POST ProjectMembership naming A':   [...UNAUTH,                  403,    201,     400,       201,   403],
  // Its profile must be a resource of A (API.md §3), for every caller.
  'POST ProjectMembership (B profile)':[...UNAUTH,                  403,    400,     400,       400,   403],
  'PUT ProjectMembership/:id (admin)': [...UNAUTH,                  403,    200,     404,       200,   403],
  'PATCH ProjectMembership/:id':       [...UNAUTH,                  403,    200,     404,       200,   403],
  // A User (email, names) is for admins: a member reads neither its own nor another's (docs/security.md).
  'GET User/:id':                      [...UNAUTH,                  403,    200,     404,       200,   403],
  'PUT User/:id':                      [...UNAUTH,                  403,    403,     403,       200,   403],
  'GET Login':                         [...UNAUTH,                  403,    200,     200,       200,   403],
  'GET /auth/me':                      [...UNAUTH,                  200,    200,     200,       200,   200],
  'GET /oauth2/userinfo':              [...UNAUTH,                  200,    200,     200,       200,   200],
  'GET Patient/$csv?_id=:id':          [...UNAUTH,                  '200 rows=1', '200 rows=1', '200 rows=0', '200 rows=1', '200 rows=1'],
  'GET AsyncJob/$csv?_id=:adminJob':   [...UNAUTH,                  '200 rows=0', '200 rows=1', '200 rows=0', '200 rows=1', '200 rows=0'],
  'GET ClientApplication/$csv':        [...UNAUTH,                  400,    400,     400,       400,   400],
  // Further operations add one line here and one request in REQUESTS below.
} satisfies Record<string, Row>;
type Endpoint = keyof typeof POLICY;

/** What a test request needs: the request, and the resource it targets (its id is swapped for a missing one). */
interface Req extends InjectOptions {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  target?: { type: string; id: string };
  /** Whether the answer is summarised as `200 n=<entries>` (searches), `200 [<statuses>]` (batches) or `200 rows=<n>` (CSV). */
  answer?: 'count' | 'entries' | 'rows';
  /** false: no missing-id twin (a PUT of a missing id creates it). */
  twin?: false;
}

interface Fixtures {
  a: { projectId: string; adminToken: string; memberToken: string };
  patient: string;
  memberClient: string;
  memberMembership: string;
  userId: string;
  memberJob: string;
  adminJob: string;
  expungeProject: string;
  /** A Patient of project B. */
  bPatient: string;
}

describe('access matrix', () => {
  const database = testDatabases()[0] as NonNullable<ReturnType<typeof testDatabases>[0]>;
  let t: TestApp;
  let idp: MockIdp;
  let dir: string;
  let f: Fixtures;
  const tokens = {} as Record<Role, string | null>;

  const as = async (
    token: string,
    req: Omit<Req, 'url'> & { url: string },
  ): Promise<LightMyRequestResponse> =>
    t.request({ ...req, url: req.url.startsWith('/') ? req.url : `${t.fhir}/${req.url}`, token });
  const created = async (token: string, resource: Record<string, unknown>): Promise<string> => {
    const res = await as(token, { method: 'POST', url: resource.resourceType as string, payload: resource });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  /** A fresh resource of project A (made by A's admin), for a request that changes or deletes it. */
  const fresh = (resource: Record<string, unknown>): Promise<string> => created(f.a.adminToken, resource);
  const handMadeJob = (): Promise<string> =>
    fresh({
      resourceType: 'AsyncJob',
      status: 'accepted',
      requestTime: new Date().toISOString(),
      request: 'x',
    });

  const REQUESTS: Record<Endpoint, () => Req | Promise<Req>> = {
    'GET Patient/:id': () => ({ method: 'GET', url: `Patient/${f.patient}`, target: pat(f.patient) }),
    'GET Patient/:id/_history/1': () => ({
      method: 'GET',
      url: `Patient/${f.patient}/_history/1`,
      target: pat(f.patient),
    }),
    'GET Patient?_id=:id': () => ({ method: 'GET', url: `Patient?_id=${f.patient}`, answer: 'count' }),
    'POST Patient': () => ({ method: 'POST', url: 'Patient', payload: { resourceType: 'Patient' } }),
    'PUT Patient/:id': async () => {
      const id = await fresh({ resourceType: 'Patient' });
      return {
        method: 'PUT',
        url: `Patient/${id}`,
        payload: { resourceType: 'Patient', id, gender: 'other' },
        target: pat(id),
      };
    },
    'PATCH Patient/:id': async () => {
      const id = await fresh({ resourceType: 'Patient' });
      return {
        method: 'PATCH',
        url: `Patient/${id}`,
        headers: { 'content-type': 'application/json-patch+json' },
        payload: JSON.stringify([{ op: 'add', path: '/gender', value: 'other' }]),
        target: pat(id),
      };
    },
    'DELETE Patient/:id': async () => {
      const id = await fresh({ resourceType: 'Patient' });
      return { method: 'DELETE', url: `Patient/${id}`, target: pat(id) };
    },
    'GET Patient/:id/_history': () => ({
      method: 'GET',
      url: `Patient/${f.patient}/_history`,
      target: pat(f.patient),
      answer: 'count',
    }),
    'GET Basic/_history': () => ({ method: 'GET', url: 'Basic/_history', answer: 'count' }),
    'POST / batch (create, read A)': () => ({
      method: 'POST',
      url: '/fhir/R4',
      payload: bundle('batch', [
        { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
        { request: { method: 'GET', url: `Patient/${f.patient}` } },
      ]),
      answer: 'entries',
    }),
    'POST / transaction (create, PUT A)': async () => {
      const id = await fresh({ resourceType: 'Patient' });
      return {
        method: 'POST',
        url: '/fhir/R4',
        payload: bundle('transaction', [
          { resource: { resourceType: 'Patient' }, request: { method: 'POST', url: 'Patient' } },
          {
            resource: { resourceType: 'Patient', id, gender: 'other' },
            request: { method: 'PUT', url: `Patient/${id}` },
          },
        ]),
        target: pat(id),
        twin: false,
      };
    },
    'GET $export': () => ({ method: 'GET', url: '$export?_type=Patient', headers: ASYNC }),
    'GET AsyncJob/:id': () => ({ method: 'GET', url: `AsyncJob/${f.memberJob}`, target: job(f.memberJob) }),
    'GET AsyncJob/:id/output/:file': () => ({
      method: 'GET',
      url: `AsyncJob/${f.memberJob}/output/Patient.ndjson`,
      target: job(f.memberJob),
    }),
    'POST AsyncJob/:id/$cancel': async () => {
      const id = await handMadeJob();
      return { method: 'POST', url: `AsyncJob/${id}/$cancel`, target: job(id) };
    },
    'DELETE AsyncJob/:id': async () => {
      const id = await handMadeJob();
      return { method: 'DELETE', url: `AsyncJob/${id}`, target: job(id) };
    },
    'GET AsyncJob?_id=:memberJob': () => ({
      method: 'GET',
      url: `AsyncJob?_id=${f.memberJob}`,
      answer: 'count',
    }),
    'GET AsyncJob?_id=:adminJob': () => ({
      method: 'GET',
      url: `AsyncJob?_id=${f.adminJob}`,
      answer: 'count',
    }),
    'GET AsyncJob/:id/_history': () => ({
      method: 'GET',
      url: `AsyncJob/${f.memberJob}/_history`,
      target: job(f.memberJob),
    }),
    'POST AsyncJob': () => ({
      method: 'POST',
      url: 'AsyncJob',
      payload: {
        resourceType: 'AsyncJob',
        status: 'completed',
        requestTime: new Date().toISOString(),
        request: 'x',
      },
    }),
    'POST $reindex': () => ({ method: 'POST', url: '$reindex?_type=Basic', headers: ASYNC }),
    'POST Project/:id/$expunge': () => ({
      method: 'POST',
      url: `Project/${f.expungeProject}/$expunge?everything=true`,
      headers: ASYNC,
    }),
    'POST Project': () => ({
      method: 'POST',
      url: 'Project',
      payload: { resourceType: 'Project', name: 'New' },
    }),
    'POST /admin/projects/:A/invite': () => ({
      method: 'POST',
      url: `/admin/projects/${f.a.projectId}/invite`,
      headers: { 'content-type': 'application/json' },
      payload: { resourceType: 'Practitioner', firstName: 'In', lastName: 'Vited' },
    }),
    'POST /admin/users/:id/password': () => ({
      method: 'POST',
      url: `/admin/users/${f.userId}/password`,
      headers: { 'content-type': 'application/json' },
      payload: { password: `pw-${randomUUID()}` },
    }),
    'GET Patient/$csv?_id=:id': () => ({
      method: 'GET',
      url: `Patient/$csv?_id=${f.patient}&_fields=id,name`,
      answer: 'rows',
    }),
    'GET AsyncJob/$csv?_id=:adminJob': () => ({
      method: 'GET',
      url: `AsyncJob/$csv?_id=${f.adminJob}&_fields=id,status`,
      answer: 'rows',
    }),
    'GET ClientApplication/$csv': () => ({ method: 'GET', url: 'ClientApplication/$csv?_fields=id,secret' }),
    'GET ClientApplication/:id': () => ({
      method: 'GET',
      url: `ClientApplication/${f.memberClient}`,
      target: { type: 'ClientApplication', id: f.memberClient },
    }),
    'GET ClientApplication?_id=:id': () => ({
      method: 'GET',
      url: `ClientApplication?_id=${f.memberClient}`,
      answer: 'count',
    }),
    'POST ClientApplication': () => ({
      method: 'POST',
      url: 'ClientApplication',
      payload: { resourceType: 'ClientApplication', name: 'new' },
    }),
    'POST ClientApplication If-None-Exist': () => ({
      method: 'POST',
      url: 'ClientApplication',
      headers: { 'if-none-exist': `_id=${f.memberClient}` },
      payload: { resourceType: 'ClientApplication', name: 'new' },
    }),
    'PUT ClientApplication/:id': async () => {
      const id = await fresh({ resourceType: 'ClientApplication', name: 'c' });
      return {
        method: 'PUT',
        url: `ClientApplication/${id}`,
        payload: { resourceType: 'ClientApplication', id, name: 'changed', secret: 'chosen-secret' },
        target: { type: 'ClientApplication', id },
      };
    },
    'DELETE ClientApplication/:id': async () => {
      const id = await fresh({ resourceType: 'ClientApplication', name: 'c' });
      return { method: 'DELETE', url: `ClientApplication/${id}`, target: { type: 'ClientApplication', id } };
    },
    'GET ProjectMembership/:id': () => ({
      method: 'GET',
      url: `ProjectMembership/${f.memberMembership}`,
      target: { type: 'ProjectMembership', id: f.memberMembership },
    }),
    'POST ProjectMembership (in A)': async () => ({
      method: 'POST',
      url: 'ProjectMembership',
      payload: {
        ...membership(f.a.projectId, await fresh({ resourceType: 'Practitioner' }), f.userId),
        meta: { project: f.a.projectId },
      },
    }),
    'POST ProjectMembership naming A': async () => ({
      method: 'POST',
      url: 'ProjectMembership',
      payload: membership(f.a.projectId, await fresh({ resourceType: 'Practitioner' }), f.userId),
    }),
    'POST ProjectMembership (B profile)': () => ({
      method: 'POST',
      url: 'ProjectMembership',
      payload: membership(f.a.projectId, f.bPatient, f.userId, 'Patient'),
    }),
    // The member's own membership, made admin: the escalation the policy must refuse.
    'PUT ProjectMembership/:id (admin)': async () => {
      const id = await fresh(
        membership(f.a.projectId, await fresh({ resourceType: 'Practitioner' }), f.userId),
      );
      const current = (await as(f.a.adminToken, { method: 'GET', url: `ProjectMembership/${id}` })).json();
      return {
        method: 'PUT',
        url: `ProjectMembership/${id}`,
        payload: { ...current, meta: undefined, admin: true },
        target: { type: 'ProjectMembership', id },
      };
    },
    'PATCH ProjectMembership/:id': async () => {
      const id = await fresh(
        membership(f.a.projectId, await fresh({ resourceType: 'Practitioner' }), f.userId),
      );
      return {
        method: 'PATCH',
        url: `ProjectMembership/${id}`,
        headers: { 'content-type': 'application/json-patch+json' },
        payload: JSON.stringify([{ op: 'add', path: '/admin', value: true }]),
        target: { type: 'ProjectMembership', id },
      };
    },
    'GET User/:id': () => ({
      method: 'GET',
      url: `User/${f.userId}`,
      target: { type: 'User', id: f.userId },
    }),
    'PUT User/:id': () => ({
      method: 'PUT',
      url: `User/${f.userId}`,
      payload: {
        resourceType: 'User',
        id: f.userId,
        email: 'matrix@example.org',
        firstName: 'X',
        lastName: 'Y',
      },
      target: { type: 'User', id: f.userId },
    }),
    'GET Login': () => ({ method: 'GET', url: 'Login?_count=1' }),
    'GET /auth/me': () => ({ method: 'GET', url: '/auth/me' }),
    'GET /oauth2/userinfo': () => ({ method: 'GET', url: '/oauth2/userinfo' }),
  };

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-matrix-'));
    idp = await startMockIdp();
    t = await startTestApp(
      database,
      { dataDir: dir, externalAuthProviders: [{ issuer: idp.issuer, userInfoUrl: idp.userInfoUrl }] },
      { jobs: { pollMs: 50 } },
    );
    const a = await t.newProject('Matrix A');
    const b = await t.newProject('Matrix B');
    await created(a.adminToken, { resourceType: 'Basic', code: { text: 'matrix' } });
    const patient = await created(a.adminToken, { resourceType: 'Patient', name: [{ family: 'Matrix' }] });
    const memberClient = (decodeJwt(a.memberToken).client_id as string) ?? '';
    const me = (await t.request({ method: 'GET', url: '/auth/me', token: a.memberToken })).json();
    const invited = await t.request({
      method: 'POST',
      url: `/admin/projects/${a.projectId}/invite`,
      token: a.adminToken,
      headers: { 'content-type': 'application/json' },
      payload: {
        resourceType: 'Practitioner',
        firstName: 'Exa',
        lastName: 'Ternal',
        email: 'external@matrix.example',
        externalId: 'matrix|external',
      },
    });
    expect(invited.statusCode, invited.body).toBe(200);
    const userId = (invited.json().user.reference as string).split('/')[1] as string;
    const memberJob = await startExport(t, a.memberToken, '_type=Patient');
    expect((await waitForJob(t, memberJob, a.memberToken)).status).toBe('completed');
    const expungeProject = await created(t.adminToken, { resourceType: 'Project', name: 'Matrix expunge' });
    f = {
      a,
      patient,
      memberClient,
      memberMembership: me.membership.id as string,
      userId,
      memberJob,
      adminJob: await created(a.adminToken, {
        resourceType: 'AsyncJob',
        status: 'completed',
        requestTime: new Date().toISOString(),
        request: 'x',
      }),
      expungeProject,
      bPatient: await created(b.adminToken, { resourceType: 'Patient' }),
    };
    // An expired token that is otherwise the member's: same key, same login, exp in the past.
    const issuer = createTokenIssuer(await loadKeyRing(t.db), 'http://cinder.test/');
    const claims = decodeJwt(a.memberToken) as unknown as Parameters<typeof issuer.sign>[0];
    const past = Math.floor(Date.now() / 1000) - 7200;
    Object.assign(tokens, {
      anonymous: null,
      'bad token': 'not.a.jwt',
      'expired token': await issuer.sign(
        { sub: claims.sub, login_id: claims.login_id, profile: claims.profile, scope: claims.scope },
        60,
        past,
      ),
      member: a.memberToken,
      'project admin': a.adminToken,
      'other admin': b.adminToken,
      'super admin': t.adminToken,
      'external token': await idp.token({ sub: 'matrix|external' }),
    } satisfies Record<Role, string | null>);
  });
  afterAll(async () => {
    await t?.close();
    await idp?.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** The answer as the table writes it. */
  const answerOf = (req: Req, res: LightMyRequestResponse): Answer => {
    if (res.statusCode !== 200 || !req.answer) return res.statusCode;
    if (req.answer === 'rows') return `200 rows=${res.body.split('\r\n').filter(Boolean).length - 1}`;
    const entries = (res.json().entry ?? []) as { response?: { status: string } }[];
    if (req.answer === 'count') return `200 n=${entries.length}`;
    return `200 [${entries.map((e) => e.response?.status.split(' ')[0]).join(' ')}]`;
  };
  /** The target as the super administrator sees it (to show that a refused request changed nothing). */
  const snapshot = async (target: Req['target']): Promise<string | undefined> =>
    target
      ? (
          await t.request({
            method: 'GET',
            url: `${t.fhir}/${target.type}/${target.id}`,
            token: t.adminToken,
          })
        ).body
      : undefined;
  const withoutId = (text: string, id: string): string => text.split(id).join(':id');

  it.each(Object.keys(POLICY) as Endpoint[])('%s', async (endpoint) => {
    const expected = POLICY[endpoint] as Row;
    const seen: Answer[] = [];
    const problems: string[] = [];
    for (const role of ROLES) {
      const req = await REQUESTS[endpoint]();
      const before = await snapshot(req.target);
      const token = tokens[role];
      const res = await t.request({
        ...req,
        url: req.url.startsWith('/') ? req.url : `${t.fhir}/${req.url}`,
        token,
      });
      const answer = answerOf(req, res);
      seen.push(answer);
      if (res.statusCode >= 500) problems.push(`${role}: ${res.statusCode} ${res.body}`);
      if (res.statusCode === 401 && !/^Bearer/.test(String(res.headers['www-authenticate'])))
        problems.push(`${role}: 401 without WWW-Authenticate`);
      if (res.statusCode >= 400) {
        expect(res.json().resourceType, `${role}: ${res.body}`).toBe('OperationOutcome');
        const after = await snapshot(req.target);
        if (after !== before) problems.push(`${role}: a refused request changed ${req.target?.type}`);
      }
      // Another project's resource answers exactly as a missing one (PUT of a missing id would create it).
      if (res.statusCode === 404 && req.target && req.method !== 'PUT' && req.twin !== false) {
        const missing = `missing-${randomUUID()}`;
        const twin = await t.request({
          ...req,
          url: (req.url.startsWith('/') ? req.url : `${t.fhir}/${req.url}`)
            .split(req.target.id)
            .join(missing),
          token,
        });
        expect(
          `${twin.statusCode} ${withoutId(twin.body, missing)}`,
          `${role}: cross-project vs missing`,
        ).toBe(`${res.statusCode} ${withoutId(res.body, req.target.id)}`);
      }
    }
    expect(problems).toEqual([]);
    expect(Object.fromEntries(ROLES.map((r, i) => [r, seen[i]]))).toEqual(
      Object.fromEntries(ROLES.map((r, i) => [r, expected[i]])),
    );
  });
});

const pat = (id: string) => ({ type: 'Patient', id });
const job = (id: string) => ({ type: 'AsyncJob', id });
const bundle = (type: string, entry: unknown[]) => ({ resourceType: 'Bundle', type, entry });
const membership = (projectId: string, profile: string, userId: string, profileType = 'Practitioner') => ({
  resourceType: 'ProjectMembership',
  project: { reference: `Project/${projectId}` },
  user: { reference: `User/${userId}` },
  profile: { reference: `${profileType}/${profile}` },
});
