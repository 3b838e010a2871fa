// Who may read a Binary's content (project scoping, securityContext and scopes), what deletion and $expunge do to it,
// and Attachment.url `Binary/<id>` followed from a DocumentReference and a Media.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { binaryKey } from '../../src/fhir/repository/binary-content.js';
import { testDatabases } from '../support/db.js';
import { tokenRequest, type TestApp } from '../support/app.js';
import { ASYNC, jobIdOf, waitForJob } from '../support/jobs.js';
import { issueOf, PNG, startBinaryApp, type BinaryApp, binaryRequests } from '../support/binary.js';

describe.each(testDatabases())('Binary access on $name', (database) => {
  let s: BinaryApp;
  let t: TestApp;
  let token: string;
  let member: string;
  let projectId: string;
  let other: string;
  const { upload, get } = binaryRequests(
    () => t,
    () => token,
  );

  beforeAll(async () => {
    s = await startBinaryApp(database, { jobs: true });
    t = s.t;
    ({ adminToken: token, memberToken: member, projectId } = await t.newProject());
    other = (await t.newProject()).adminToken;
  });
  afterAll(async () => s?.close());

  it('sets securityContext from X-Security-Context, refusing what is not a reference', async () => {
    const patient = (
      await t.request({
        method: 'POST',
        url: `${t.fhir}/Patient`,
        token,
        payload: { resourceType: 'Patient' },
      })
    ).json().id as string;
    const created = await upload(PNG, {
      'content-type': 'image/png',
      'x-security-context': `Patient/${patient}`,
    });
    expect(created.json().securityContext).toEqual({ reference: `Patient/${patient}` });
    const put = await upload(
      'v2',
      { 'content-type': 'text/plain', 'x-security-context': `Patient/${patient}` },
      `Binary/${created.json().id as string}`,
      'PUT',
    );
    expect(put.json().securityContext).toEqual({ reference: `Patient/${patient}` });
    for (const bad of ['not a reference', 'Nonsense/1', 'Patient/', 'Patient/a/b', 'http://x/Patient/1']) {
      const res = await upload(PNG, { 'content-type': 'image/png', 'x-security-context': bad });
      expect(res.statusCode, bad).toBe(400);
      expect(issueOf(res.body)).toMatchObject({ code: 'invalid' });
      expect(issueOf(res.body).details?.text).toMatch(/^X-Security-Context must be a reference/);
    }
  });

  it('keeps Binaries to their project: another project gets 404 for read, vread, JSON, update and delete', async () => {
    const id = (await upload(PNG, { 'content-type': 'image/png' })).json().id as string;
    for (const [url, headers] of [
      [`Binary/${id}`, {}],
      [`Binary/${id}`, { accept: 'application/fhir+json' }],
      [`Binary/${id}/_history/1`, {}],
      [`Binary/${id}/_history`, {}],
    ] as const) {
      const res = await get(url, headers, other);
      expect(res.statusCode, url).toBe(404);
      expect(issueOf(res.body)).toMatchObject({ severity: 'error', code: 'not-found' });
    }
    const put = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Binary/${id}`,
      token: other,
      headers: { 'content-type': 'text/plain' },
      payload: 'mine',
    });
    expect(put.statusCode).toBe(404);
    expect(issueOf(put.body).code).toBe('not-found');
    const del = await t.request({ method: 'DELETE', url: `${t.fhir}/Binary/${id}`, token: other });
    expect(del.statusCode).toBe(404);
    expect((await get(`Binary/${id}`)).rawPayload.equals(PNG)).toBe(true);
  });

  it('a deleted Binary answers 410 to raw and JSON reads', async () => {
    const id = (await upload(PNG, { 'content-type': 'image/png' })).json().id as string;
    expect((await t.request({ method: 'DELETE', url: `${t.fhir}/Binary/${id}`, token })).statusCode).toBe(
      200,
    );
    for (const headers of [{}, { accept: 'application/fhir+json' }] as Record<string, string>[]) {
      const res = await get(`Binary/${id}`, headers);
      expect(res.statusCode).toBe(410);
      expect(issueOf(res.body)).toMatchObject({ severity: 'error', code: 'deleted' });
    }
    const gone = await get(`Binary/${id}/_history/2`);
    expect(gone.statusCode).toBe(410);
  });

  it('says what Binary does in the CapabilityStatement', async () => {
    const cs = (await t.request({ method: 'GET', url: `${t.fhir}/metadata` })).json() as {
      rest: { resource: { type: string; documentation?: string; interaction: { code: string }[] }[] }[];
    };
    const binary = cs.rest[0]?.resource.find((r) => r.type === 'Binary');
    expect(binary?.documentation).toMatch(/X-Security-Context/);
    expect(binary?.interaction.map((i) => i.code)).toEqual(
      expect.arrayContaining(['create', 'read', 'vread', 'update', 'delete', 'history-instance']),
    );
  });

  /** A token of a new member client of the project, asking for `scope`. */
  async function scoped(scope: string): Promise<string> {
    const post = async (resource: Record<string, unknown>): Promise<string> => {
      const res = await t.request({
        method: 'POST',
        url: `${t.fhir}/${resource.resourceType as string}`,
        token: t.adminToken,
        payload: { ...resource, meta: { project: projectId } },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().id as string;
    };
    const secret = `secret-${scope.length}-0123456789abcdef`;
    const client = await post({ resourceType: 'ClientApplication', name: scope, secret });
    await post({
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${projectId}` },
      user: { reference: `ClientApplication/${client}` },
      profile: { reference: `ClientApplication/${client}` },
    });
    const res = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: client,
      client_secret: secret,
      scope,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json().access_token as string;
  }

  it('reads content under its securityContext: the caller needs read access to the type it names', async () => {
    const patient = (
      await t.request({
        method: 'POST',
        url: `${t.fhir}/Patient`,
        token,
        payload: { resourceType: 'Patient' },
      })
    ).json().id as string;
    const ofPatient = (
      await upload(PNG, { 'content-type': 'image/png', 'x-security-context': `Patient/${patient}` })
    ).json().id as string;
    const plain = (await upload(PNG, { 'content-type': 'image/png' })).json().id as string;
    const client = (await get('ClientApplication?_count=1', { accept: 'application/fhir+json' })).json()
      .entry[0].resource.id as string;
    const ofClient = (
      await upload(PNG, { 'content-type': 'image/png', 'x-security-context': `ClientApplication/${client}` })
    ).json().id as string;

    const binaryOnly = await scoped('system/Binary.rs');
    const both = await scoped('system/Binary.rs system/Patient.r');
    const forbidden = [
      [binaryOnly, ofPatient, 'Patient'],
      [member, ofClient, 'ClientApplication'],
    ] as const;
    for (const [who, id, type] of forbidden) {
      for (const url of [`Binary/${id}`, `Binary/${id}/_history/1`]) {
        for (const headers of [{}, { accept: 'application/fhir+json' }] as Record<string, string>[]) {
          const res = await get(url, headers, who);
          expect(res.statusCode, url).toBe(403);
          expect(issueOf(res.body)).toMatchObject({
            severity: 'error',
            code: 'forbidden',
            details: { text: `Forbidden: this Binary's securityContext needs read access to ${type}` },
          });
        }
      }
    }
    for (const [who, id] of [
      [binaryOnly, plain],
      [both, ofPatient],
      [member, ofPatient],
      [token, ofClient],
    ] as const) {
      const res = await get(`Binary/${id}`, {}, who);
      expect(res.statusCode).toBe(200);
      expect(res.rawPayload.equals(PNG)).toBe(true);
    }
    // Without Binary in its scopes a token reads no Binary at all.
    const patientOnly = await scoped('system/Patient.rs');
    const res = await get(`Binary/${plain}`, {}, patientOnly);
    expect(res.statusCode).toBe(403);
    expect(issueOf(res.body).code).toBe('forbidden');
  });

  it('follows Attachment.url Binary/<id> from a DocumentReference and a Media to the same bytes', async () => {
    const pdf = Buffer.concat([Buffer.from('%PDF-1.4\n'), PNG]);
    const binary = (await upload(pdf, { 'content-type': 'application/pdf' })).json().id as string;
    const attachment = { contentType: 'application/pdf', url: `Binary/${binary}`, size: pdf.length };
    const docRef = await t.request({
      method: 'POST',
      url: `${t.fhir}/DocumentReference`,
      token,
      payload: { resourceType: 'DocumentReference', status: 'current', content: [{ attachment }] },
    });
    expect(docRef.statusCode, docRef.body).toBe(201);
    const media = await t.request({
      method: 'POST',
      url: `${t.fhir}/Media`,
      token,
      payload: { resourceType: 'Media', status: 'completed', content: attachment },
    });
    expect(media.statusCode, media.body).toBe(201);
    const base = `http://cinder.test${t.fhir}/`;
    const urls = [
      (await get(`DocumentReference/${docRef.json().id as string}`)).json().content[0].attachment,
      (await get(`Media/${media.json().id as string}`)).json().content,
    ] as { url: string; contentType: string }[];
    for (const a of urls) {
      const target = new URL(a.url, base);
      expect(target.href).toBe(`${base}Binary/${binary}`);
      const res = await t.request({ method: 'GET', url: target.pathname, token });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe(a.contentType);
      expect(res.rawPayload.equals(pdf)).toBe(true);
    }
  });

  it('$expunge of a project deletes the contents of its Binaries, and only those', async () => {
    const doomed = await t.newProject();
    const gone = (
      await t.request({
        method: 'POST',
        url: `${t.fhir}/Binary`,
        token: doomed.adminToken,
        headers: { 'content-type': 'image/png' },
        payload: PNG,
      })
    ).json().id as string;
    const kept = (await upload(PNG, { 'content-type': 'image/png' })).json().id as string;
    expect(await s.files.read(binaryKey(gone, 1))).toBeDefined();
    const kickOff = await t.request({
      method: 'POST',
      url: `${t.fhir}/Project/${doomed.projectId}/$expunge?everything=true`,
      token: t.adminToken,
      headers: ASYNC,
    });
    const job = await waitForJob(t, jobIdOf(kickOff), t.adminToken);
    expect(job.status).toBe('completed');
    expect(await s.files.read(binaryKey(gone, 1))).toBeUndefined();
    expect((await get(`Binary/${gone}`, {}, t.adminToken)).statusCode).toBe(404);
    expect((await get(`Binary/${kept}`)).rawPayload.equals(PNG)).toBe(true);
  });
});
