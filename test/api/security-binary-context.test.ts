// Binary.securityContext fails closed (issue 25, point 4; https://hl7.org/fhir/R4/binary.html#security): every writer
// takes only a reference `Type/id` to a known resource type (an absolute URL of this server becomes `Type/id`), and a
// stored securityContext that does not resolve so (data written before the check) is read by administrators only.
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testDatabases } from '../support/db.js';
import { createEntry, postBundle, tokenRequest, type TestApp } from '../support/app.js';
import { issueOf, PNG, startBinaryApp, type BinaryApp } from '../support/binary.js';

type Json = Record<string, unknown>;

/** Forms that name a ClientApplication to a human but are not a reference `Type/id` (or name no known type). */
const BAD = (client: string): Json[] => [
  { reference: `ClientApplication?_id=${client}` },
  { type: 'ClientApplication', identifier: { value: client } },
  { type: 'ClientApplication' },
  { display: `ClientApplication/${client}` },
  { reference: `ClientApplication/${client}/` },
  { reference: `ClientApplication/${client}#frag` },
  { reference: `ClientApplication/${client}?x=1` },
  { reference: `clientApplication/${client}` },
  { reference: `ClientApplication/${client}/_history/1` },
  { reference: '#contained' },
  { reference: `Nonsense/${client}` },
  { reference: `https://elsewhere.example/fhir/ClientApplication/${client}` },
  { reference: `http://cinder.test/fhir/R4/ClientApplication/${client}#/Patient/1` },
  { reference: `ClientApplication/${client}`, type: 'Patient' },
];

const REFUSED =
  'Binary.securityContext must be a reference <Type>/<id> to a resource of this server (a known resource type and a valid id, with no search, fragment, version or trailing slash)';

describe.each(testDatabases())('Binary.securityContext fails closed on $name', (database) => {
  let s: BinaryApp;
  let t: TestApp;
  let admin: string;
  let member: string;
  let projectId: string;
  let client: string;
  let patient: string;

  const as = (token: string, req: Parameters<TestApp['request']>[0]) => t.request({ ...req, token });
  const binary = (securityContext?: Json): Json => ({
    resourceType: 'Binary',
    contentType: 'image/png',
    data: PNG.toString('base64'),
    ...(securityContext ? { securityContext } : {}),
  });
  const refused = (
    res: LightMyRequestResponse | { status: string; outcome: Json },
    what: string,
    prefix = '',
    conditional?: string,
  ) => {
    const status = 'statusCode' in res ? res.statusCode : Number(res.status.split(' ')[0]);
    const body = 'statusCode' in res ? res.body : JSON.stringify(res.outcome);
    expect(status, `${what}: ${body}`).toBe(400);
    expect(issueOf(body), what).toMatchObject({
      severity: 'error',
      code: 'invalid',
      details: {
        text: conditional ? expect.stringContaining(`${prefix}${conditional}`) : `${prefix}${REFUSED}`,
      },
      expression: ['Binary.securityContext'],
    });
  };

  beforeAll(async () => {
    s = await startBinaryApp(database);
    t = s.t;
    ({ adminToken: admin, memberToken: member, projectId } = await t.newProject());
    const search = await as(admin, { method: 'GET', url: `${t.fhir}/ClientApplication?_count=1` });
    client = search.json().entry[0].resource.id as string;
    const p = await as(admin, {
      method: 'POST',
      url: `${t.fhir}/Patient`,
      payload: { resourceType: 'Patient' },
    });
    patient = p.json().id as string;
  });
  afterAll(async () => s?.close());

  it('refuses every securityContext that is not a reference Type/id, from every writer', async () => {
    const plain = (await as(admin, { method: 'POST', url: `${t.fhir}/Binary`, payload: binary() })).json()
      .id as string;
    for (const bad of BAD(client)) {
      const what = JSON.stringify(bad);
      refused(
        await as(admin, { method: 'POST', url: `${t.fhir}/Binary`, payload: binary(bad) }),
        `POST ${what}`,
      );
      refused(
        await as(admin, {
          method: 'PUT',
          url: `${t.fhir}/Binary/${plain}`,
          payload: { ...binary(bad), id: plain },
        }),
        `PUT ${what}`,
      );
      refused(
        await as(admin, {
          method: 'PATCH',
          url: `${t.fhir}/Binary/${plain}`,
          headers: { 'content-type': 'application/json-patch+json' },
          payload: JSON.stringify([{ op: 'add', path: '/securityContext', value: bad }]),
        }),
        `PATCH ${what}`,
      );
      const batch = await postBundle(t, admin, 'batch', [createEntry(binary(bad))]);
      expect(batch.statusCode, batch.body).toBe(200);
      const transaction = await postBundle(t, admin, 'transaction', [createEntry(binary(bad))]);
      if (bad.reference === `ClientApplication?_id=${client}`) {
        // In a Bundle a search is a conditional reference (API.md §11): it is stored as the one match's Type/id.
        for (const location of [
          batch.json().entry[0].response.location as string,
          transaction.json().entry[0].response.location as string,
        ]) {
          const stored = await as(admin, {
            method: 'GET',
            url: `${t.fhir}/${location.split('/_history/')[0]}`,
            headers: { accept: 'application/fhir+json' },
          });
          expect(stored.json().securityContext).toEqual({ reference: `ClientApplication/${client}` });
        }
        continue;
      }
      // A reference with a query is read as a (malformed) conditional reference in a Bundle: refused all the same.
      const bundlePrefix = bad.reference?.toString().includes('?') ? 'Conditional reference ' : undefined;
      refused(batch.json().entry[0].response, `batch ${what}`, '', bundlePrefix);
      refused(transaction, `transaction ${what}`, 'Bundle.entry[0]: ', bundlePrefix);
    }
    // A search that matches nothing is no reference at all: the transaction is refused whole.
    const none = await postBundle(t, admin, 'transaction', [
      createEntry(binary({ reference: 'ClientApplication?_id=no-such-client' })),
    ]);
    expect(none.statusCode, none.body).toBe(412);
    // Nothing was changed: the Binary is still version 1, without a securityContext.
    const now = (
      await as(admin, {
        method: 'GET',
        url: `${t.fhir}/Binary/${plain}`,
        headers: { accept: 'application/fhir+json' },
      })
    ).json();
    expect(now.meta.versionId).toBe('1');
    expect(now.securityContext).toBeUndefined();
  });

  it('stores an absolute reference to this server as Type/id, and a transaction placeholder as the id it names', async () => {
    const absolute = await as(admin, {
      method: 'POST',
      url: `${t.fhir}/Binary`,
      payload: binary({ reference: `http://cinder.test/fhir/R4/ClientApplication/${client}`, display: 'x' }),
    });
    expect(absolute.statusCode, absolute.body).toBe(201);
    expect(absolute.json().securityContext).toEqual({
      reference: `ClientApplication/${client}`,
      display: 'x',
    });
    const denied = await as(member, {
      method: 'GET',
      url: `${t.fhir}/Binary/${absolute.json().id as string}`,
    });
    expect(denied.statusCode).toBe(403);
    expect(issueOf(denied.body).details?.text).toBe(
      "Forbidden: this Binary's securityContext needs read access to ClientApplication",
    );
    const typed = await as(admin, {
      method: 'POST',
      url: `${t.fhir}/Binary`,
      payload: binary({ reference: `Patient/${patient}`, type: 'Patient' }),
    });
    expect(typed.statusCode, typed.body).toBe(201);
    const placeholder = 'urn:uuid:0f3c2b1a-9d8e-4c7b-a6f5-e4d3c2b1a090';
    const tx = await postBundle(t, admin, 'transaction', [
      createEntry({ resourceType: 'Patient' }, placeholder),
      createEntry(binary({ reference: placeholder })),
    ]);
    expect(tx.statusCode, tx.body).toBe(200);
    const [made, bin] = (tx.json().entry as { response: { location: string } }[]).map(
      (e) => e.response.location,
    );
    const stored = await as(admin, {
      method: 'GET',
      url: `${t.fhir}/${(bin as string).split('/_history')[0] as string}`,
      headers: { accept: 'application/fhir+json' },
    });
    expect(stored.json().securityContext).toEqual({ reference: (made as string).split('/_history')[0] });
  });

  /** A project admin client of the project whose token asks for `scope`. */
  async function scopedAdmin(scope: string): Promise<string> {
    const post = async (resource: Json): Promise<string> => {
      const res = await as(t.adminToken, {
        method: 'POST',
        url: `${t.fhir}/${resource.resourceType as string}`,
        payload: { ...resource, meta: { project: projectId } },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    };
    const secret = 'scoped-admin-secret-0123456789';
    const id = await post({ resourceType: 'ClientApplication', name: 'scoped admin', secret });
    await post({
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${projectId}` },
      user: { reference: `ClientApplication/${id}` },
      profile: { reference: `ClientApplication/${id}` },
      admin: true,
    });
    const res = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: id,
      client_secret: secret,
      scope,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token as string;
  }

  it('denies content whose stored securityContext cannot be resolved to all but administrators reading everything', async () => {
    const binaryOnlyAdmin = await scopedAdmin('system/Binary.rs');
    for (const bad of BAD(client)) {
      const what = JSON.stringify(bad);
      const made = await as(admin, {
        method: 'POST',
        url: `${t.fhir}/Binary`,
        payload: binary({ reference: `Patient/${patient}` }),
      });
      const id = made.json().id as string;
      // As data written before the check holds it, in the current row and in history.
      for (const table of ['resources', 'resource_history'])
        await s.db.query(
          `UPDATE ${table} SET content = (content::jsonb || jsonb_build_object('securityContext', $2::jsonb))::json
           WHERE resource_type = 'Binary' AND id = $1`,
          [id, JSON.stringify(bad)],
        );
      for (const url of [`Binary/${id}`, `Binary/${id}/_history/1`]) {
        for (const headers of [{}, { accept: 'application/fhir+json' }]) {
          for (const who of [member, binaryOnlyAdmin]) {
            const res = await as(who, { method: 'GET', url: `${t.fhir}/${url}`, headers });
            expect(res.statusCode, `${what} ${url}`).toBe(403);
            expect(issueOf(res.body)).toMatchObject({
              severity: 'error',
              code: 'forbidden',
              details: {
                text: "Forbidden: this Binary's securityContext does not name a resource as Type/id; only an administrator with read access to every type may read it",
              },
            });
          }
          for (const who of [admin, t.adminToken]) {
            const res = await as(who, { method: 'GET', url: `${t.fhir}/${url}`, headers });
            expect(res.statusCode, `${what} ${url}`).toBe(200);
          }
        }
      }
    }
  });
});
