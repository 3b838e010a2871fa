// The write path of issue 12 (API.md §3): membership targets stay in the membership's project, conditional create is
// no read oracle, deep bodies and dot-segment ids are refused with a 4xx by every writer, and a super administrator's
// membership is stored in the project it names.
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_DEPTH } from '../../src/fhir/json/parse.js';
import { MAX_RESOURCE_DEPTH } from '../../src/fhir/validation/depth.js';
import { testDatabases } from '../support/db.js';
import {
  createEntry,
  inviteRequest,
  postBundle,
  postResource,
  useProjectApp,
  type TestApp,
} from '../support/app.js';

type Json = Record<string, unknown>;
type Project = Awaited<ReturnType<TestApp['newProject']>>;

/** The first issue of an OperationOutcome answer, as `<status> <code>` plus its text and expression. */
const issueOf = (res: LightMyRequestResponse | { status: string; outcome: Json }) => {
  const status = 'statusCode' in res ? res.statusCode : Number(res.status.split(' ')[0]);
  const body = ('statusCode' in res ? res.json() : res.outcome) as {
    resourceType: string;
    issue: { code: string; details?: { text?: string }; expression?: string[] }[];
  };
  expect(body.resourceType, JSON.stringify(body)).toBe('OperationOutcome');
  const first = body.issue[0];
  return {
    answer: `${status} ${first?.code ?? ''}`,
    text: first?.details?.text ?? '',
    expression: body.issue.flatMap((i) => i.expression ?? []),
  };
};

const entries = (res: LightMyRequestResponse) =>
  res.json().entry as { response: { status: string; outcome?: Json }; resource?: Json }[];
const statuses = (res: LightMyRequestResponse): string[] =>
  entries(res).map((e) => e.response.status.split(' ')[0] as string);

const membershipOf = (projectId: string, user: string, profile: string, extra: Json = {}): Json => ({
  resourceType: 'ProjectMembership',
  project: { reference: `Project/${projectId}` },
  user: { reference: user },
  profile: { reference: profile },
  ...extra,
});

/** A Patient exactly `depth` levels of JSON objects and arrays deep (the resource itself is level 1). */
function deepPatient(depth: number): Json {
  // Each nested extension adds two levels (its array and its object); an even depth ends in a CodeableConcept.
  let ext: Json =
    depth % 2 === 1
      ? { url: 'http://x', valueString: 'x' }
      : { url: 'http://x', valueCodeableConcept: { text: 'x' } };
  const pairs = depth % 2 === 1 ? (depth - 1) / 2 : (depth - 2) / 2;
  for (let i = 1; i < pairs; i++) ext = { url: 'http://x', extension: [ext] };
  return { resourceType: 'Patient', extension: [ext] };
}

/** A nested JSON text `levels` deep, without building the value (the test client could not serialise it). */
const deepText = (levels: number): string =>
  `{"resourceType":"Patient","extension":${'[{"url":"http://x","extension":'.repeat(levels)}[]${'}]'.repeat(levels)}}`;

describe.each(testDatabases())('security of writes on $name', (database) => {
  const ctx = useProjectApp(database);
  let t: TestApp;
  let a: Project;
  let b: Project;
  /** Resources of project B that a membership of project A must not name. */
  const bRes = {} as { patient: string; client: string; membership: string; userId: string };
  /** Resources of project A. */
  const aRes = {} as { practitioner: string; organization: string; client: string; userId: string };

  const as = (token: string, method: string, url: string, payload?: unknown, headers: Json = {}) =>
    t.request({
      method: method as 'GET',
      url: url.startsWith('/') ? url : `${t.fhir}/${url}`,
      token,
      ...(payload !== undefined ? { payload: payload as Json } : {}),
      headers: headers as Record<string, string>,
    });
  const created = async (token: string, resource: Json): Promise<Json> => {
    const res = await postResource(t, token, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as Json;
  };
  const invite = (token: string, projectId: string, body: Json) => inviteRequest(t, token, projectId, body);

  beforeAll(async () => {
    t = ctx.t;
    a = await t.newProject('Writes A');
    b = await t.newProject('Writes B');
    bRes.patient = (await created(b.adminToken, { resourceType: 'Patient' })).id as string;
    bRes.client = (await created(b.adminToken, { resourceType: 'ClientApplication', name: 'B client' }))
      .id as string;
    const invitedB = await invite(b.adminToken, b.projectId, {
      resourceType: 'Practitioner',
      firstName: 'Bee',
      lastName: 'Member',
      email: `bee-${randomUUID()}@example.org`,
    });
    expect(invitedB.statusCode, invitedB.body).toBe(200);
    bRes.membership = invitedB.json().id as string;
    bRes.userId = (invitedB.json().user.reference as string).split('/')[1] as string;
    aRes.practitioner = (await created(a.adminToken, { resourceType: 'Practitioner' })).id as string;
    aRes.organization = (await created(a.adminToken, { resourceType: 'Organization', name: 'Org' }))
      .id as string;
    aRes.client = (await created(a.adminToken, { resourceType: 'ClientApplication', name: 'A client' }))
      .id as string;
    const invitedA = await invite(a.adminToken, a.projectId, {
      resourceType: 'Practitioner',
      firstName: 'Ay',
      lastName: 'Member',
      email: `ay-${randomUUID()}@example.org`,
    });
    expect(invitedA.statusCode, invitedA.body).toBe(200);
    aRes.userId = (invitedA.json().user.reference as string).split('/')[1] as string;
  });

  describe('membership targets (API.md §3)', () => {
    /** Memberships of project A that name something they must not, and the element the answer must name. */
    const badTargets = (): [string, Json, string][] => [
      [
        "another project's Patient as profile",
        membershipOf(a.projectId, `User/${aRes.userId}`, `Patient/${bRes.patient}`),
        'ProjectMembership.profile',
      ],
      [
        "another project's ClientApplication as user and profile",
        membershipOf(a.projectId, `ClientApplication/${bRes.client}`, `ClientApplication/${bRes.client}`),
        'ProjectMembership.user',
      ],
      [
        "another project's ClientApplication as user",
        membershipOf(a.projectId, `ClientApplication/${bRes.client}`, `Practitioner/${aRes.practitioner}`),
        'ProjectMembership.user',
      ],
      [
        "another project's membership as profile",
        membershipOf(a.projectId, `User/${aRes.userId}`, `ProjectMembership/${bRes.membership}`),
        'ProjectMembership.profile',
      ],
      [
        'a ClientApplication that does not exist',
        membershipOf(
          a.projectId,
          `ClientApplication/missing-${randomUUID()}`,
          `Practitioner/${aRes.practitioner}`,
        ),
        'ProjectMembership.user',
      ],
      [
        'a profile that does not exist',
        membershipOf(a.projectId, `User/${aRes.userId}`, `Practitioner/missing-${randomUUID()}`),
        'ProjectMembership.profile',
      ],
      [
        'an Organization of the project as profile',
        membershipOf(a.projectId, `User/${aRes.userId}`, `Organization/${aRes.organization}`),
        'ProjectMembership.profile',
      ],
      [
        "a ClientApplication as another user's profile",
        membershipOf(a.projectId, `User/${aRes.userId}`, `ClientApplication/${aRes.client}`),
        'ProjectMembership.profile',
      ],
      [
        'an absolute URL as profile',
        membershipOf(
          a.projectId,
          `User/${aRes.userId}`,
          `http://cinder.test/fhir/R4/Patient/${bRes.patient}`,
        ),
        'ProjectMembership.profile',
      ],
      [
        'a Practitioner as user',
        membershipOf(a.projectId, `Practitioner/${aRes.practitioner}`, `Practitioner/${aRes.practitioner}`),
        'ProjectMembership.user',
      ],
    ];

    const expectRefused = (
      res: LightMyRequestResponse | { status: string; outcome: Json },
      element: string,
    ) => {
      const got = issueOf(res);
      expect(got.answer, got.text).toBe('400 invalid');
      expect(got.expression).toContain(element);
    };

    it('POST: a project admin and the super administrator are refused with 400 naming the element', async () => {
      for (const [what, membership, element] of badTargets()) {
        for (const [who, token, body] of [
          ['admin', a.adminToken, membership],
          ['super admin', t.adminToken, { ...membership, meta: { project: a.projectId } }],
        ] as const) {
          const res = await postResource(t, token, body);
          expect(res.statusCode, `${who}: ${what}: ${res.body}`).toBe(400);
          expectRefused(res, element);
        }
      }
    });

    it('PUT and PATCH cannot point an existing membership elsewhere, and change nothing', async () => {
      const m = await created(
        a.adminToken,
        membershipOf(a.projectId, `User/${aRes.userId}`, `Practitioner/${aRes.practitioner}`),
      );
      const before = (await as(a.adminToken, 'GET', `ProjectMembership/${m.id as string}`)).body;
      for (const [what, bad, element] of badTargets()) {
        const put = await as(a.adminToken, 'PUT', `ProjectMembership/${m.id as string}`, {
          ...bad,
          id: m.id,
        });
        expect(put.statusCode, `PUT ${what}: ${put.body}`).toBe(400);
        expectRefused(put, element);
        const field = element.split('.')[1] as string;
        const patch = await t.request({
          method: 'PATCH',
          url: `${t.fhir}/ProjectMembership/${m.id as string}`,
          token: a.adminToken,
          headers: { 'content-type': 'application/json-patch+json' },
          payload: JSON.stringify([{ op: 'replace', path: `/${field}`, value: bad[field] }]),
        });
        expect(patch.statusCode, `PATCH ${what}: ${patch.body}`).toBe(400);
        expectRefused(patch, element);
      }
      // Update-as-create of a new id follows the same rule.
      const fresh = `pm-${randomUUID()}`;
      const [, bad, element] = badTargets()[0] as [string, Json, string];
      const asCreate = await as(a.adminToken, 'PUT', `ProjectMembership/${fresh}`, { ...bad, id: fresh });
      expectRefused(asCreate, element);
      expect((await as(a.adminToken, 'GET', `ProjectMembership/${m.id as string}`)).body).toBe(before);
      expect((await as(a.adminToken, 'GET', `ProjectMembership/${fresh}`)).statusCode).toBe(404);
    });

    it('batch answers the bad entry alone; transaction keeps nothing', async () => {
      const family = `Batch${randomUUID().slice(0, 8)}`;
      for (const [what, bad, element] of badTargets()) {
        const batch = await postBundle(t, a.adminToken, 'batch', [
          createEntry(bad),
          createEntry({ resourceType: 'Patient', name: [{ family }] }),
        ]);
        expect(statuses(batch), what).toEqual(['400', '201']);
        expectRefused(entries(batch)[0]?.response as { status: string; outcome: Json }, element);
        const tx = await postBundle(t, a.adminToken, 'transaction', [
          createEntry({ resourceType: 'Patient', name: [{ family: `${family}tx` }] }),
          createEntry(bad),
        ]);
        expect(tx.statusCode, `${what}: ${tx.body}`).toBe(400);
        expectRefused(tx, element);
      }
      const kept = await as(a.adminToken, 'GET', `Patient?family=${family}tx`);
      expect(kept.json().entry ?? []).toEqual([]);
    });

    it('accepts a profile and membership created together, client memberships and Users of several projects', async () => {
      const urn = `urn:uuid:${randomUUID()}`;
      const tx = await postBundle(t, a.adminToken, 'transaction', [
        createEntry(membershipOf(a.projectId, `User/${aRes.userId}`, urn)),
        createEntry({ resourceType: 'Practitioner', name: [{ family: 'Together' }] }, urn),
      ]);
      expect(tx.statusCode, tx.body).toBe(200);
      const [m, p] = entries(tx).map((e) => e.resource as Json);
      expect((m?.profile as Json).reference).toBe(`Practitioner/${p?.id as string}`);
      // A client's own membership (as test/support/app.ts newProject makes them) and a User already in project B.
      for (const m of [
        membershipOf(a.projectId, `ClientApplication/${aRes.client}`, `ClientApplication/${aRes.client}`),
        membershipOf(a.projectId, `User/${bRes.userId}`, `Practitioner/${aRes.practitioner}`),
      ]) {
        const res = await postResource(t, a.adminToken, m);
        expect(res.statusCode, res.body).toBe(201);
        expect(res.json().meta.project).toBe(a.projectId);
      }
      // A User invited into a second project is linked, not copied.
      const email = `twice-${randomUUID()}@example.org`;
      const one = await invite(a.adminToken, a.projectId, {
        resourceType: 'Patient',
        firstName: 'T',
        lastName: 'W',
        email,
      });
      const two = await invite(b.adminToken, b.projectId, {
        resourceType: 'Patient',
        firstName: 'T',
        lastName: 'W',
        email,
      });
      expect([one.statusCode, two.statusCode]).toEqual([200, 200]);
      expect(two.json().user).toEqual(one.json().user);
    });
  });

  describe("a super administrator's membership lives in the project it names", () => {
    it('POST and PUT without meta.project are stored in the named project', async () => {
      const post = await postResource(
        t,
        t.adminToken,
        membershipOf(a.projectId, `User/${aRes.userId}`, `Practitioner/${aRes.practitioner}`),
      );
      expect(post.statusCode, post.body).toBe(201);
      expect(post.json().meta.project).toBe(a.projectId);
      const id = `pm-${randomUUID()}`;
      const put = await as(t.adminToken, 'PUT', `ProjectMembership/${id}`, {
        ...membershipOf(a.projectId, `User/${aRes.userId}`, `Practitioner/${aRes.practitioner}`),
        id,
      });
      expect(put.statusCode, put.body).toBe(201);
      expect(put.json().meta.project).toBe(a.projectId);
      // Project A's admin sees both as its own.
      for (const mid of [post.json().id as string, id]) {
        const read = await as(a.adminToken, 'GET', `ProjectMembership/${mid}`);
        expect(read.statusCode, read.body).toBe(200);
      }
    });

    it('a held externalId answers 409 through POST and batch', async () => {
      const externalId = `ext-${randomUUID()}`;
      const held = await invite(a.adminToken, a.projectId, {
        resourceType: 'Practitioner',
        firstName: 'Held',
        lastName: 'Ext',
        externalId,
      });
      expect(held.statusCode, held.body).toBe(200);
      const again = membershipOf(b.projectId, `User/${bRes.userId}`, `Patient/${bRes.patient}`, {
        externalId,
      });
      const post = await postResource(t, t.adminToken, again);
      expect(issueOf(post).answer, post.body).toBe('409 duplicate');
      const batch = await postBundle(t, t.adminToken, 'batch', [createEntry(again)]);
      expect(statuses(batch)).toEqual(['409']);
    });

    it('refuses a membership (or any resource) placed in a missing project, or naming another project than meta.project', async () => {
      const missing = membershipOf(
        `missing-${randomUUID()}`,
        `User/${aRes.userId}`,
        `Practitioner/${aRes.practitioner}`,
      );
      const res = await postResource(t, t.adminToken, missing);
      expect(issueOf(res).answer, res.body).toBe('400 invalid');
      expect(issueOf(res).expression).toContain('ProjectMembership.project');
      // Any resource a super administrator places in a project needs that project.
      const nowhere = await postResource(t, t.adminToken, {
        resourceType: 'Patient',
        meta: { project: `missing-${randomUUID()}` },
      });
      expect(issueOf(nowhere).answer, nowhere.body).toBe('400 invalid');
      expect(issueOf(nowhere).expression).toEqual(['Patient.meta.project']);
      const mixed = await postResource(t, t.adminToken, {
        ...membershipOf(a.projectId, `User/${aRes.userId}`, `Practitioner/${aRes.practitioner}`),
        meta: { project: b.projectId },
      });
      expect(issueOf(mixed).answer, mixed.body).toBe('400 invalid');
      // A project admin's membership is stored in its own project and must name it.
      const other = await postResource(
        t,
        b.adminToken,
        membershipOf(a.projectId, `User/${aRes.userId}`, `Practitioner/${aRes.practitioner}`),
      );
      expect(issueOf(other).answer, other.body).toBe('400 invalid');
    });
  });

  describe('conditional create is no read oracle', () => {
    it('checks write access before the If-None-Exist search, on every path', async () => {
      const job = await created(a.adminToken, {
        resourceType: 'AsyncJob',
        status: 'completed',
        requestTime: new Date().toISOString(),
        request: 'x',
      });
      const targets: [Json, string][] = [
        [{ resourceType: 'ClientApplication', name: 'probe' }, `_id=${aRes.client}`],
        [
          {
            resourceType: 'AsyncJob',
            status: 'accepted',
            requestTime: new Date().toISOString(),
            request: 'x',
          },
          `_id=${job.id as string}`,
        ],
      ];
      for (const [resource, condition] of targets) {
        const type = resource.resourceType as string;
        const header = await t.request({
          method: 'POST',
          url: `${t.fhir}/${type}`,
          token: a.memberToken,
          headers: { 'if-none-exist': condition },
          payload: resource,
        });
        expect(issueOf(header).answer, header.body).toBe('403 forbidden');
        const entry = { resource, request: { method: 'POST', url: type, ifNoneExist: condition } };
        const batch = await postBundle(t, a.memberToken, 'batch', [entry]);
        expect(statuses(batch), batch.body).toEqual(['403']);
        expect(batch.body).not.toContain(condition.split('=')[1] as string);
        const tx = await postBundle(t, a.memberToken, 'transaction', [entry]);
        expect(issueOf(tx).answer, tx.body).toBe('403 forbidden');
      }
      // Nothing of another project is found: B's admin creates instead of finding A's client.
      const other = await t.request({
        method: 'POST',
        url: `${t.fhir}/ClientApplication`,
        token: b.adminToken,
        headers: { 'if-none-exist': `_id=${aRes.client}` },
        payload: { resourceType: 'ClientApplication', name: 'probe' },
      });
      expect(other.statusCode).toBe(201);
    });

    it('runs the condition with read access: chained parameters into types the caller cannot read are refused', async () => {
      const condition = `user:ClientApplication.name=${encodeURIComponent('A client')}`;
      const search = await as(a.memberToken, 'GET', `ProjectMembership?${condition}`);
      expect(issueOf(search).answer, search.body).toBe('403 forbidden');
      // RequestGroup's instantiates-canonical names no target type, so a chain may go anywhere; members write it.
      const group = { resourceType: 'RequestGroup', status: 'draft', intent: 'proposal' };
      for (const probe of [
        `instantiates-canonical:ClientApplication.name=${encodeURIComponent('A client')}`,
        'instantiates-canonical:AsyncJob.status=completed',
      ]) {
        const header = await t.request({
          method: 'POST',
          url: `${t.fhir}/RequestGroup`,
          token: a.memberToken,
          headers: { 'if-none-exist': probe },
          payload: group,
        });
        expect(issueOf(header).answer, header.body).toBe('403 forbidden');
        const entry = {
          resource: group,
          request: { method: 'POST', url: 'RequestGroup', ifNoneExist: probe },
        };
        expect(statuses(await postBundle(t, a.memberToken, 'batch', [entry]))).toEqual(['403']);
        expect(issueOf(await postBundle(t, a.memberToken, 'transaction', [entry])).answer).toBe(
          '403 forbidden',
        );
        // The admin may read both types: the same condition works for it.
        const admin = await t.request({
          method: 'POST',
          url: `${t.fhir}/RequestGroup`,
          token: a.adminToken,
          headers: { 'if-none-exist': probe },
          payload: group,
        });
        expect(admin.statusCode, admin.body).toBe(201);
      }
    });

    it('refuses the same chains in $csv filters, which search like any search', async () => {
      const probe = 'instantiates-canonical:AsyncJob.status=completed';
      const member = await as(a.memberToken, 'GET', `RequestGroup/$csv?_fields=id&${probe}`);
      expect(issueOf(member).answer, member.body).toBe('403 forbidden');
      const admin = await as(a.adminToken, 'GET', `RequestGroup/$csv?_fields=id&${probe}`);
      expect(admin.statusCode, admin.body).toBe(200);
    });
  });

  describe('deep bodies', () => {
    const tooDeep = deepText(2500); // 5,002 levels
    const expectTooDeep = (res: LightMyRequestResponse | { status: string; outcome: Json }, what: string) => {
      const got = issueOf(res);
      expect(got.answer, `${what}: ${got.text}`).toMatch(/^4\d\d /);
      expect(got.text, what).toMatch(new RegExp(`${MAX_RESOURCE_DEPTH} levels`));
    };

    it('answers 4xx on POST, PUT, PATCH, batch and transaction', async () => {
      const raw = (
        method: 'POST' | 'PUT' | 'PATCH',
        url: string,
        payload: string,
        type = 'application/fhir+json',
      ) =>
        t.request({
          method,
          url: `${t.fhir}/${url}`,
          token: ctx.token,
          headers: { 'content-type': type },
          payload,
        });
      expectTooDeep(await raw('POST', 'Patient', tooDeep), 'POST');
      const id = `deep-${randomUUID()}`;
      expectTooDeep(await raw('PUT', `Patient/${id}`, tooDeep.replace('{', `{"id":"${id}",`)), 'PUT');
      const existing = await created(ctx.token, { resourceType: 'Patient' });
      const patch = `[{"op":"add","path":"/extension","value":${tooDeep.slice(tooDeep.indexOf('['), -1)}}]`;
      expectTooDeep(
        await raw('PATCH', `Patient/${existing.id as string}`, patch, 'application/json-patch+json'),
        'PATCH',
      );
      // A batch answers an entry deeper than a resource may be on its own; the others succeed. (Its body stays
      // within MAX_BODY_DEPTH; a deeper body is refused whole, below.)
      const deeperThanResource = deepText(80); // 162 levels
      const okEntry = JSON.stringify(createEntry({ resourceType: 'Patient' }));
      const deepEntry = `{"resource":${deeperThanResource},"request":{"method":"POST","url":"Patient"}}`;
      const deepPut = `{"resource":${deeperThanResource.replace('{', `{"id":"${id}",`)},"request":{"method":"PUT","url":"Patient/${id}"}}`;
      const patchBinary = {
        resource: {
          resourceType: 'Binary',
          contentType: 'application/json-patch+json',
          data: Buffer.from(patch).toString('base64'),
        },
        request: { method: 'PATCH', url: `Patient/${existing.id as string}` },
      };
      const bundle = (type: string, list: string[]) =>
        `{"resourceType":"Bundle","type":"${type}","entry":[${list.join(',')}]}`;
      const batch = await t.request({
        method: 'POST',
        url: t.fhir,
        token: ctx.token,
        headers: { 'content-type': 'application/fhir+json' },
        payload: bundle('batch', [deepEntry, okEntry, deepPut, JSON.stringify(patchBinary)]),
      });
      expect(statuses(batch), batch.body).toEqual(['400', '201', '400', '400']);
      const outcomes = entries(batch).map((e) => e.response);
      for (const i of [0, 2, 3])
        expectTooDeep(outcomes[i] as { status: string; outcome: Json }, `batch entry ${i}`);
      for (const list of [
        [okEntry, deepEntry],
        [okEntry, JSON.stringify(patchBinary)],
      ]) {
        const tx = await t.request({
          method: 'POST',
          url: t.fhir,
          token: ctx.token,
          headers: { 'content-type': 'application/fhir+json' },
          payload: bundle('transaction', list),
        });
        expectTooDeep(tx, 'transaction');
      }
      // A body nested deeper than MAX_BODY_DEPTH is refused whole when it is read, batch or not.
      const tooDeepBatch = await t.request({
        method: 'POST',
        url: t.fhir,
        token: ctx.token,
        headers: { 'content-type': 'application/fhir+json' },
        payload: bundle('batch', [
          okEntry,
          `{"resource":${tooDeep},"request":{"method":"POST","url":"Patient"}}`,
        ]),
      });
      expect(tooDeepBatch.statusCode, tooDeepBatch.body).toBe(400);
      expect(issueOf(tooDeepBatch).text).toBe(
        `The body nests deeper than ${MAX_BODY_DEPTH} levels of JSON objects and arrays (a resource may nest ${MAX_RESOURCE_DEPTH} levels)`,
      );
      // A whole body nested far deeper than any resource is a 4xx too.
      const huge = `${'['.repeat(200_000)}${']'.repeat(200_000)}`;
      const hugeRes = await raw('POST', 'Patient', `{"resourceType":"Patient","extension":${huge}}`);
      expect(hugeRes.statusCode).toBeGreaterThanOrEqual(400);
      expect(hugeRes.statusCode).toBeLessThan(500);
    });

    it(`accepts ${MAX_RESOURCE_DEPTH} levels on every writer and refuses one more`, async () => {
      const atLimit = deepPatient(MAX_RESOURCE_DEPTH);
      const overLimit = deepPatient(MAX_RESOURCE_DEPTH + 1);
      const post = await postResource(t, ctx.token, atLimit);
      expect(post.statusCode, post.body).toBe(201);
      expectTooDeep(await postResource(t, ctx.token, overLimit), 'POST over the limit');
      const id = post.json().id as string;
      const put = await as(ctx.token, 'PUT', `Patient/${id}`, { ...atLimit, id, gender: 'other' });
      expect(put.statusCode, put.body).toBe(200);
      expectTooDeep(await as(ctx.token, 'PUT', `Patient/${id}`, { ...overLimit, id }), 'PUT over the limit');
      const patch = (value: unknown) =>
        t.request({
          method: 'PATCH',
          url: `${t.fhir}/Patient/${id}`,
          token: ctx.token,
          headers: { 'content-type': 'application/json-patch+json' },
          payload: JSON.stringify([{ op: 'replace', path: '/extension', value }]),
        });
      expect((await patch(atLimit.extension)).statusCode).toBe(200);
      expectTooDeep(await patch(overLimit.extension), 'PATCH over the limit');
      // A small patch that deepens the stored resource past the limit is refused too.
      let path = '/extension/0';
      for (let level = 3; level < MAX_RESOURCE_DEPTH - 1; level += 2) path += '/extension/0';
      const deeper = await t.request({
        method: 'PATCH',
        url: `${t.fhir}/Patient/${id}`,
        token: ctx.token,
        headers: { 'content-type': 'application/json-patch+json' },
        payload: JSON.stringify([
          { op: 'add', path: `${path}/valueCodeableConcept/coding`, value: [{ code: 'x' }] },
        ]),
      });
      expectTooDeep(deeper, 'PATCH deepening the resource');
      const batch = await postBundle(t, ctx.token, 'batch', [createEntry(atLimit), createEntry(overLimit)]);
      expect(statuses(batch)).toEqual(['201', '400']);
      const tx = await postBundle(t, ctx.token, 'transaction', [createEntry(atLimit)]);
      expect(tx.statusCode, tx.body).toBe(200);
      const read = await as(ctx.token, 'GET', `Patient/${id}`);
      expect(read.json().extension).toEqual(atLimit.extension);
    });
  });

  describe('dot-segment ids', () => {
    /** A request sent over a socket with its path as written (app.inject would remove dot-segments first). */
    const raw = async (method: string, path: string, payload: unknown) => {
      const address = t.app.server.listening
        ? t.app.server.address()
        : (await t.app.listen({ port: 0, host: '127.0.0.1' }), t.app.server.address());
      const port = (address as AddressInfo).port;
      return new Promise<{ statusCode: number; body: string }>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port,
            method,
            path,
            headers: { authorization: `Bearer ${ctx.token}`, 'content-type': 'application/fhir+json' },
          },
          (res) => {
            let body = '';
            res.setEncoding('utf8');
            res.on('data', (c: string) => (body += c));
            res.on('end', () => resolve({ statusCode: res.statusCode ?? 0, body }));
          },
        );
        req.on('error', reject);
        req.end(JSON.stringify(payload));
      });
    };

    it('refuses . and .. with 400 on PUT, batch, transaction and for every type', async () => {
      for (const id of ['.', '..']) {
        const encoded = id.replace(/\./g, '%2E');
        for (const type of ['Patient', 'AsyncJob']) {
          const resource =
            type === 'Patient'
              ? { resourceType: 'Patient', id }
              : {
                  resourceType: 'AsyncJob',
                  id,
                  status: 'completed',
                  requestTime: new Date().toISOString(),
                  request: 'x',
                };
          for (const path of [`${t.fhir}/${type}/${encoded}`, `${t.fhir}/${type}/${id}`]) {
            const put = await raw('PUT', path, resource);
            expect(put.statusCode, `${path}: ${put.body}`).toBe(400);
            expect(JSON.parse(put.body).issue[0]).toMatchObject({
              code: 'invalid',
              details: { text: expect.stringMatching(/Invalid resource id/) },
            });
          }
          const entry = { resource, request: { method: 'PUT', url: `${type}/${id}` } };
          const batch = await postBundle(t, ctx.token, 'batch', [entry]);
          expect(statuses(batch), batch.body).toEqual(['400']);
          const tx = await postBundle(t, ctx.token, 'transaction', [entry]);
          expect(issueOf(tx).answer, tx.body).toBe('400 invalid');
          expect((await as(t.adminToken, 'GET', `${type}?_id=${encoded}`)).json().entry ?? []).toEqual([]);
        }
      }
      // Other ids with dots stay valid FHIR ids.
      const put = await as(ctx.token, 'PUT', 'Patient/a.b...c', { resourceType: 'Patient', id: 'a.b...c' });
      expect(put.statusCode, put.body).toBe(201);
    });
  });
});
