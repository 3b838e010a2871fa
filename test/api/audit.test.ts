// The audit trail through the HTTP API (API.md §10, issue 28): every interaction's AuditEvent as BALP shapes it, the
// patients a search's answer held, logins and their failures, who reads which AuditEvents, 405 on change, a client's
// own AuditEvents, X-Provenance, the log mirror, and hostile input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  auditEvents,
  created,
  inviteRequest,
  postBundle,
  scopedClientToken,
  setUserPassword,
  startTestApp,
  tokenRequest,
  ADMIN_CLIENT_ID,
  type TestApp,
} from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { smartLaunch } from '../support/smart-browser.js';

type Json = Record<string, unknown>;
const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://app.example/callback';
const REST = 'http://terminology.hl7.org/CodeSystem/audit-event-type';
const INTERACTION = 'http://hl7.org/fhir/restful-interaction';
const DCM = 'http://dicom.nema.org/resources/ontology/DCM';

const subtypeOf = (e: Json): string => ((e.subtype as { code: string }[])[0] as { code: string }).code;
const requestor = (e: Json): Json => (e.agent as Json[]).find((a) => a.requestor === true) as Json;
const whats = (e: Json): string[] =>
  ((e.entity as Json[] | undefined) ?? [])
    .map((x) => (x.what as { reference?: string } | undefined)?.reference)
    .filter((x): x is string => !!x);
const patientEntities = (e: Json): string[] =>
  ((e.entity as Json[] | undefined) ?? [])
    .filter((x) => (x.role as { code?: string } | undefined)?.code === '1')
    .map((x) => ((x.what as { reference: string }).reference ?? '').replace(/\/_history\/.*$/, ''));
const bySubtype = (events: Json[], code: string): Json[] => events.filter((e) => subtypeOf(e) === code);

describe.each(testDatabases())('audit trail on $name', (database) => {
  let t: TestApp;
  let a: { projectId: string; adminToken: string; memberToken: string };
  let b: { projectId: string; adminToken: string; memberToken: string };
  let patient: string;
  let obs: string;
  let mia: string; // a Patient user of project A
  let miaToken: string;
  let miaScoped: string; // launch/patient patient/AuditEvent.rs patient/*.rs
  const lines: string[] = [];

  const req = (token: string | null, method: string, path: string, payload?: unknown, headers = {}) =>
    t.request({
      method: method as 'GET',
      url: `${t.fhir}/${path}`,
      token,
      headers,
      ...(payload !== undefined ? { payload: payload as Json } : {}),
    });

  beforeAll(async () => {
    t = await startTestApp(database, { auditLog: 'stdout' }, { auditMirror: (l) => lines.push(l) });
    a = await t.newProject('Audit A');
    b = await t.newProject('Audit B');
    patient = (await created(t, a.adminToken, { resourceType: 'Patient', name: [{ family: 'Audited' }] }))
      .id as string;
    obs = (
      await created(t, a.adminToken, {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'pulse' },
        subject: { reference: `Patient/${patient}` },
      })
    ).id as string;
    const client = await req(a.adminToken, 'PUT', 'ClientApplication/audit-app', {
      resourceType: 'ClientApplication',
      id: 'audit-app',
      name: 'Audit app',
      redirectUri: REDIRECT,
    });
    expect(client.statusCode, client.body).toBeLessThan(300);
    const invited = await inviteRequest(t, a.adminToken, a.projectId, {
      resourceType: 'Patient',
      firstName: 'Mia',
      lastName: 'Audit',
      email: `mia-${database.name}@audit.example`,
    });
    expect(invited.statusCode, invited.body).toBe(200);
    const membership = invited.json() as { user: { reference: string }; profile: { reference: string } };
    mia = membership.profile.reference.split('/')[1] as string;
    await setUserPassword(t, membership.user.reference.split('/')[1] as string, PASSWORD);
    const launch = (scope: string) =>
      smartLaunch(t.app, {
        clientId: 'audit-app',
        redirectUri: REDIRECT,
        aud: 'http://cinder.test/fhir/R4',
        email: `mia-${database.name}@audit.example`,
        password: PASSWORD,
        scope,
      });
    miaToken = (await launch('openid')).access_token as string;
    miaScoped = (await launch('launch/patient patient/AuditEvent.rs patient/Observation.rs'))
      .access_token as string;
  });
  afterAll(async () => t?.close());

  it('records each REST interaction with its subtype, action, outcome, requester and versioned entity', async () => {
    const p = await created(t, a.adminToken, { resourceType: 'Patient', name: [{ family: 'Shape' }] });
    const id = p.id as string;
    expect((await req(a.adminToken, 'GET', `Patient/${id}`)).statusCode).toBe(200);
    expect((await req(a.adminToken, 'GET', `Patient/${id}/_history/1`)).statusCode).toBe(200);
    const put = await req(a.adminToken, 'PUT', `Patient/${id}`, { ...p, gender: 'female' });
    expect(put.statusCode).toBe(200);
    const patch = await req(
      a.adminToken,
      'PATCH',
      `Patient/${id}`,
      [{ op: 'add', path: '/active', value: true }],
      {
        'content-type': 'application/json-patch+json',
      },
    );
    expect(patch.statusCode, patch.body).toBe(200);
    expect((await req(a.adminToken, 'GET', `Patient/${id}/_history`)).statusCode).toBe(200);
    expect((await req(a.adminToken, 'DELETE', `Patient/${id}`)).statusCode).toBe(200);
    const events = await auditEvents(t, a.adminToken, `entity=Patient/${id}&_count=50`, (e) => e.length >= 7);
    const expected: [string, string, string][] = [
      ['create', 'C', '1'],
      ['read', 'R', '1'],
      ['vread', 'R', '1'],
      ['update', 'U', '2'],
      ['patch', 'U', '3'],
      ['history', 'R', ''],
      ['delete', 'D', '4'],
    ];
    for (const [code, action, version] of expected) {
      const [e] = bySubtype(events, code);
      expect(e, code).toBeDefined();
      const ev = e as Json;
      expect(ev.type).toMatchObject({ system: REST, code: 'rest' });
      expect((ev.subtype as Json[])[0]).toMatchObject({ system: INTERACTION, code });
      expect(ev.action).toBe(action);
      expect(ev.outcome).toBe('0');
      expect(typeof ev.recorded).toBe('string');
      expect(requestor(ev)).toMatchObject({
        requestor: true,
        who: { reference: expect.stringMatching(/^ClientApplication\//) },
        altId: expect.stringMatching(/^ProjectMembership\//),
        network: { address: expect.any(String) },
      });
      expect(ev.source).toMatchObject({ observer: { display: 'http://cinder.test/' } });
      if (version) expect(whats(ev)).toContain(`Patient/${id}/_history/${version}`);
      // The Patient itself is the patient entity (role 1).
      expect(patientEntities(ev)).toContain(`Patient/${id}`);
    }
    // Newest first.
    const recorded = events.map((e) => e.recorded as string);
    expect([...recorded].sort().reverse()).toEqual(recorded);
  });

  it('a search records its query (base64) and one patient entity per Patient whose data the answer held', async () => {
    const pats: string[] = [];
    for (let i = 0; i < 3; i++) {
      const p = (await created(t, a.adminToken, { resourceType: 'Patient', name: [{ family: `Many${i}` }] }))
        .id as string;
      pats.push(p);
      await created(t, a.adminToken, {
        resourceType: 'Observation',
        status: 'final',
        code: { text: 'search-audit' },
        subject: { reference: `Patient/${p}` },
      });
    }
    const res = await req(a.adminToken, 'GET', 'Observation?code:text=search-audit&_count=10');
    expect(res.statusCode).toBe(200);
    const events = await auditEvents(t, a.adminToken, `subtype=search&patient=${pats[0]}`);
    const e = events.find((x) => patientEntities(x).length === 3) as Json;
    expect(e).toBeDefined();
    expect(new Set(patientEntities(e))).toEqual(new Set(pats.map((p) => `Patient/${p}`)));
    const query = (e.entity as Json[]).find((x) => (x.role as Json).code === '24') as Json;
    expect(Buffer.from(query.query as string, 'base64').toString()).toBe('code:text=search-audit&_count=10');
    // Searchable by each of those patients, by the requester, by type, action and outcome.
    for (const p of pats)
      expect(
        (await auditEvents(t, a.adminToken, `patient=Patient/${p}&subtype=search`)).map((x) => x.id),
      ).toContain(e.id);
    const agent = (requestor(e).who as { reference: string }).reference;
    const found = await auditEvents(
      t,
      a.adminToken,
      `agent=${agent}&type=${REST}|rest&action=R&outcome=0&subtype=${INTERACTION}|search&_count=200`,
    );
    expect(found.map((x) => x.id)).toContain(e.id);
  });

  it('records batch, transaction and operations; a transaction names every version it wrote', async () => {
    const tx = await postBundle(t, a.adminToken, 'transaction', [
      {
        fullUrl: 'urn:uuid:1d3c0d1e-0000-4000-8000-000000000001',
        resource: { resourceType: 'Patient', name: [{ family: 'Tx' }] },
        request: { method: 'POST', url: 'Patient' },
      },
      {
        resource: {
          resourceType: 'Observation',
          status: 'final',
          code: { text: 'tx' },
          subject: { reference: 'urn:uuid:1d3c0d1e-0000-4000-8000-000000000001' },
        },
        request: { method: 'POST', url: 'Observation' },
      },
    ]);
    expect(tx.statusCode, tx.body).toBe(200);
    const locations = (tx.json().entry as { response: { location: string } }[]).map((e) =>
      e.response.location.replace(/^.*fhir\/R4\//, ''),
    );
    const txEvents = await auditEvents(
      t,
      a.adminToken,
      `subtype=transaction&entity=${locations[1]?.split('/_history')[0]}`,
    );
    expect(txEvents).toHaveLength(1);
    expect(new Set(whats(txEvents[0] as Json))).toEqual(new Set([...locations]));
    expect((txEvents[0] as Json).action).toBe('E');

    const batch = await postBundle(t, a.adminToken, 'batch', [
      { request: { method: 'GET', url: `Patient/${patient}` } },
      {
        resource: { resourceType: 'Practitioner', name: [{ family: 'Batch' }] },
        request: { method: 'POST', url: 'Practitioner' },
      },
    ]);
    expect(batch.statusCode).toBe(200);
    const batchEvents = await auditEvents(t, a.adminToken, `subtype=batch&patient=${patient}`);
    expect(batchEvents.length).toBeGreaterThan(0);
    const practitioner = (
      (batch.json().entry as { response: { location: string } }[])[1] as { response: { location: string } }
    ).response.location
      .replace(/^.*fhir\/R4\//, '')
      .split('/_history')[0] as string;
    const created1 = await auditEvents(t, a.adminToken, `entity=${practitioner}`);
    expect(bySubtype(created1, 'create')).toHaveLength(1);

    const everything = await req(a.adminToken, 'GET', `Patient/${patient}/$everything`);
    expect(everything.statusCode).toBe(200);
    const ops = await auditEvents(t, a.adminToken, `subtype=operation&entity=Patient/${patient}`);
    expect(ops.length).toBeGreaterThan(0);
    expect(patientEntities(ops[0] as Json)).toContain(`Patient/${patient}`);
  });

  it('records failures with outcome 4 and why, and requests without a login under no project', async () => {
    const missing = await req(a.adminToken, 'GET', 'Observation/does-not-exist');
    expect(missing.statusCode).toBe(404);
    const [e] = await auditEvents(t, a.adminToken, 'entity=Observation/does-not-exist&outcome=4');
    expect(e).toMatchObject({ outcome: '4', action: 'R', outcomeDesc: expect.stringMatching(/Not found/) });
    const anonymous = await req(null, 'GET', `Observation/${obs}`);
    expect(anonymous.statusCode).toBe(401);
    // Not the project's (there was no login): only a super administrator sees it.
    expect(
      await auditEvents(t, a.adminToken, `entity=Observation/${obs}&outcome=4`, () => false),
    ).toHaveLength(0);
    const seen = await auditEvents(t, t.adminToken, `entity=Observation/${obs}&outcome=4`);
    expect(seen.length).toBeGreaterThan(0);
    expect(requestor(seen[0] as Json).who).toBeUndefined();
  });

  it('records logins, failed logins (naming the user tried, never the secret) and logouts', async () => {
    const secret = 'the-audit-client-secret-0123456789';
    const app = await created(t, a.adminToken, {
      resourceType: 'ClientApplication',
      name: 'Login audit',
      secret,
    });
    await created(t, a.adminToken, {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${a.projectId}` },
      user: { reference: `ClientApplication/${app.id as string}` },
      profile: { reference: `ClientApplication/${app.id as string}` },
    });
    const ok = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: app.id as string,
      client_secret: secret,
    });
    expect(ok.statusCode).toBe(200);
    const bad = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: app.id as string,
      client_secret: 'wrong-secret-wrong-secret',
    });
    expect(bad.statusCode).toBe(401);
    const logins = await auditEvents(
      t,
      a.adminToken,
      `agent=ClientApplication/${app.id as string}&subtype=${DCM}|110122`,
    );
    expect(logins.length).toBeGreaterThan(0);
    expect(logins[0]).toMatchObject({
      type: { system: DCM, code: '110114' },
      subtype: [{ system: DCM, code: '110122' }],
      action: 'E',
      outcome: '0',
    });
    // The failure has no login, so no project: the super administrator reads it; it names the client tried.
    const failed = await auditEvents(t, t.adminToken, `subtype=110122&outcome=4&_count=100`, (e) =>
      e.some((x) => JSON.stringify(x).includes(app.id as string)),
    );
    const f = failed.find((x) => JSON.stringify(x).includes(app.id as string)) as Json;
    expect(requestor(f).who).toEqual({ identifier: { value: app.id } });
    expect(JSON.stringify(f)).not.toContain('wrong-secret');
    // Password sign-in failure names the email.
    const pw = await t.app.inject({
      method: 'POST',
      url: '/auth/login',
      headers: { 'content-type': 'application/json' },
      payload: {
        email: 'nobody@audit.example',
        password: 'not the password',
        codeChallenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        codeChallengeMethod: 'S256',
      },
    });
    expect(pw.statusCode).toBe(400);
    const pwFailed = await auditEvents(t, t.adminToken, 'subtype=110122&outcome=4&_count=100', (e) =>
      e.some((x) => JSON.stringify(x).includes('nobody@audit.example')),
    );
    expect(pwFailed.some((x) => JSON.stringify(x).includes('nobody@audit.example'))).toBe(true);
    expect(JSON.stringify(pwFailed)).not.toContain('not the password');
    // Logout (the token's login ends) is recorded under the project, with the requester.
    const token = ok.json().access_token as string;
    const out = await t.request({ method: 'POST', url: '/oauth2/logout', token });
    expect(out.statusCode).toBe(200);
    const logouts = await auditEvents(
      t,
      a.adminToken,
      `agent=ClientApplication/${app.id as string}&subtype=110123`,
    );
    expect(logouts[0]).toMatchObject({ subtype: [{ code: '110123' }], outcome: '0' });
  });

  it('records admin actions: an invite names the membership it made', async () => {
    const invited = await inviteRequest(t, a.adminToken, a.projectId, {
      resourceType: 'Practitioner',
      firstName: 'Ivy',
      lastName: 'Invited',
    });
    expect(invited.statusCode).toBe(200);
    const membership = (invited.json() as { id: string }).id;
    const events = await auditEvents(t, a.adminToken, `entity=ProjectMembership/${membership}`);
    expect(events).toHaveLength(1);
    const e = events[0] as Json;
    expect(e).toMatchObject({ action: 'E', outcome: '0', subtype: [{ code: 'operation' }] });
    expect(whats(e)).toEqual(
      expect.arrayContaining([`Project/${a.projectId}`, `ProjectMembership/${membership}`]),
    );
    const request = (e.entity as Json[]).find((x) => (x.role as Json).code === '24') as Json;
    expect(request.description).toBe(`POST /admin/projects/${a.projectId}/invite`);
  });

  it('lets only the right people read: admins their project, a patient their own, a super administrator all', async () => {
    await req(a.adminToken, 'GET', `Observation/${obs}`);
    await req(a.adminToken, 'GET', `Patient/${mia}`);
    const aEvents = await auditEvents(t, a.adminToken, `entity=Observation/${obs}&subtype=read`);
    const one = aEvents[0] as Json;
    // Another project's admin: nothing found, the id answers 404.
    expect(await auditEvents(t, b.adminToken, `entity=Observation/${obs}`, () => false)).toHaveLength(0);
    expect((await req(b.adminToken, 'GET', `AuditEvent/${one.id as string}`)).statusCode).toBe(404);
    // A member who is not an admin: 403.
    expect((await req(a.memberToken, 'GET', 'AuditEvent')).statusCode).toBe(403);
    expect((await req(a.memberToken, 'GET', `AuditEvent/${one.id as string}`)).statusCode).toBe(403);
    // A token without AuditEvent in its scopes: 403, admin or not.
    const narrow = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Patient.rs', {
      admin: true,
    });
    expect((await req(narrow, 'GET', 'AuditEvent')).statusCode).toBe(403);
    // The super administrator reads it.
    expect((await req(t.adminToken, 'GET', `AuditEvent/${one.id as string}`)).statusCode).toBe(200);
    // The Patient user reads the events about themselves only, with or without patient/ scopes.
    for (const token of [miaToken, miaScoped]) {
      const mine = await auditEvents(t, token, '_count=200');
      expect(mine.length).toBeGreaterThan(0);
      for (const e of mine) expect(patientEntities(e)).toContain(`Patient/${mia}`);
      expect((await req(token, 'GET', `AuditEvent/${one.id as string}`)).statusCode).toBe(404);
    }
  });

  it('never changes or deletes an AuditEvent (405), also conditionally and in a transaction', async () => {
    const [e] = await auditEvents(t, a.adminToken, '_count=1');
    const id = (e as Json).id as string;
    expect(
      (await req(a.adminToken, 'PUT', `AuditEvent/${id}`, { ...(e as Json), outcome: '8' })).statusCode,
    ).toBe(405);
    expect(
      (
        await req(
          a.adminToken,
          'PATCH',
          `AuditEvent/${id}`,
          [{ op: 'replace', path: '/outcome', value: '8' }],
          {
            'content-type': 'application/json-patch+json',
          },
        )
      ).statusCode,
    ).toBe(405);
    expect((await req(a.adminToken, 'DELETE', `AuditEvent/${id}`)).statusCode).toBe(405);
    expect((await req(t.adminToken, 'DELETE', `AuditEvent/${id}`)).statusCode).toBe(405);
    expect((await req(a.adminToken, 'DELETE', `AuditEvent?_id=${id}`)).statusCode).toBe(405);
    expect(
      (
        await req(a.adminToken, 'PUT', 'AuditEvent/brand-new-id', {
          resourceType: 'AuditEvent',
          id: 'brand-new-id',
        })
      ).statusCode,
    ).toBe(405);
    expect((await req(a.adminToken, 'GET', `AuditEvent/${id}/_history`)).statusCode).toBe(405);
    const tx = await postBundle(t, a.adminToken, 'transaction', [
      {
        resource: { resourceType: 'Patient', name: [{ family: 'NotKept' }] },
        request: { method: 'POST', url: 'Patient' },
      },
      { request: { method: 'DELETE', url: `AuditEvent/${id}` } },
    ]);
    expect(tx.statusCode).toBe(405);
    const still = await req(a.adminToken, 'GET', `AuditEvent/${id}`);
    expect(still.statusCode).toBe(200);
    expect(still.json()).toEqual(e);
  });

  it("stores a client's own AuditEvent in the trail, readable and searchable", async () => {
    const own = {
      resourceType: 'AuditEvent',
      type: { system: 'http://example.org/app-events', code: 'print' },
      action: 'R',
      recorded: '2026-01-02T03:04:05Z',
      outcome: '0',
      agent: [{ who: { reference: `Patient/${patient}` }, requestor: true }],
      source: { observer: { display: 'printer app' } },
      entity: [{ what: { reference: `Patient/${patient}` } }],
    };
    const res = await req(a.adminToken, 'POST', 'AuditEvent', own);
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    const read = await req(a.adminToken, 'GET', `AuditEvent/${id}`);
    expect(read.statusCode).toBe(200);
    expect(read.json()).toMatchObject({ type: own.type, recorded: own.recorded });
    const found = await auditEvents(
      t,
      a.adminToken,
      `type=http://example.org/app-events|print&date=2026-01-02`,
    );
    expect(found.map((x) => x.id)).toEqual([id]);
    expect(
      (await auditEvents(t, a.adminToken, 'date=lt2026-01-02', () => false)).map((x) => x.id),
    ).not.toContain(id);
    // The create itself is recorded too.
    expect(bySubtype(await auditEvents(t, a.adminToken, `entity=AuditEvent/${id}`), 'create')).toHaveLength(
      1,
    );
  });

  it('X-Provenance stores a Provenance whose target is every version the request wrote', async () => {
    const provenance = JSON.stringify({
      resourceType: 'Provenance',
      recorded: '2026-11-27T10:00:00Z',
      agent: [{ who: { display: 'Import job 7' } }],
      reason: [{ text: 'nightly import' }],
    });
    const res = await req(
      a.adminToken,
      'POST',
      'Patient',
      { resourceType: 'Patient', name: [{ family: 'Provenanced' }] },
      { 'x-provenance': provenance },
    );
    expect(res.statusCode, res.body).toBe(201);
    const id = res.json().id as string;
    const found = await req(a.adminToken, 'GET', `Provenance?target=Patient/${id}`);
    const prov = (found.json().entry as { resource: Json }[])[0]?.resource as Json;
    expect(prov.target).toEqual([{ reference: `Patient/${id}/_history/1` }]);
    expect(prov.reason).toEqual([{ text: 'nightly import' }]);
    // An update and a transaction too.
    const upd = await req(
      a.adminToken,
      'PUT',
      `Patient/${id}`,
      { ...(res.json() as Json), gender: 'other' },
      { 'x-provenance': provenance },
    );
    expect(upd.statusCode).toBe(200);
    const tx = await t.request({
      method: 'POST',
      url: t.fhir,
      token: a.adminToken,
      headers: { 'x-provenance': provenance },
      payload: {
        resourceType: 'Bundle',
        type: 'transaction',
        entry: [
          {
            resource: { resourceType: 'Patient', name: [{ family: 'P1' }] },
            request: { method: 'POST', url: 'Patient' },
          },
          {
            resource: { resourceType: 'Patient', name: [{ family: 'P2' }] },
            request: { method: 'POST', url: 'Patient' },
          },
        ],
      },
    });
    expect(tx.statusCode, tx.body).toBe(200);
    const written = (tx.json().entry as { response: { location: string } }[]).map((e) =>
      e.response.location.replace(/^.*fhir\/R4\//, ''),
    );
    const p1 = written[0]?.split('/_history')[0] as string;
    const txProv = (await req(a.adminToken, 'GET', `Provenance?target=${p1}`)).json().entry as {
      resource: Json;
    }[];
    expect(txProv).toHaveLength(1);
    expect(new Set((txProv[0]?.resource.target as { reference: string }[]).map((r) => r.reference))).toEqual(
      new Set(written),
    );
    const updProv = (await req(a.adminToken, 'GET', `Provenance?target=Patient/${id}`)).json()
      .entry as unknown[];
    expect(updProv).toHaveLength(2);
  });

  it('refuses a malformed X-Provenance with 400 and writes nothing', async () => {
    const before = (await req(a.adminToken, 'GET', 'Patient?family=NeverStored')).json().entry;
    expect(before).toBeUndefined();
    const bad = [
      'not json',
      '[]',
      JSON.stringify({ resourceType: 'Patient' }),
      JSON.stringify({ resourceType: 'Provenance', target: [{ reference: 'Patient/x' }] }),
      JSON.stringify({
        resourceType: 'Provenance',
        recorded: 'yesterday',
        agent: [{ who: { display: 'x' } }],
      }),
      `${'{"a":'.repeat(3000)}1${'}'.repeat(3000)}`,
    ];
    for (const header of bad) {
      const res = await req(
        a.adminToken,
        'POST',
        'Patient',
        { resourceType: 'Patient', name: [{ family: 'NeverStored' }] },
        { 'x-provenance': header },
      );
      expect(res.statusCode, header.slice(0, 40)).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, header.slice(0, 40)).toBeLessThan(500);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    expect((await req(a.adminToken, 'GET', 'Patient?family=NeverStored')).json().entry).toBeUndefined();
  });

  it('X-Provenance needs the right to create Provenance: a token scoped without it writes nothing (403)', async () => {
    const narrow = await scopedClientToken(t, a.adminToken, a.projectId, 'system/Patient.cruds');
    const res = await req(
      narrow,
      'POST',
      'Patient',
      { resourceType: 'Patient', name: [{ family: 'NarrowProvenance' }] },
      { 'x-provenance': JSON.stringify({ resourceType: 'Provenance', agent: [{ who: { display: 'x' } }] }) },
    );
    expect(res.statusCode).toBe(403);
    expect((await req(a.adminToken, 'GET', 'Patient?family=NarrowProvenance')).json().entry).toBeUndefined();
    // Without the header the same token writes.
    const plain = await req(narrow, 'POST', 'Patient', {
      resourceType: 'Patient',
      name: [{ family: 'NarrowPlain' }],
    });
    expect(plain.statusCode).toBe(201);
  });

  it('answers bad AuditEvent searches with 400, never 5xx', async () => {
    for (const q of [
      'date=yesterday',
      'agent=not a reference',
      '_count=-1',
      '_count=abc',
      'unknown-param=1',
      '_cursor=x',
      '_sort=outcome',
      'patient=%00',
      `agent=${'a'.repeat(5000)}`,
    ]) {
      const res = await req(a.adminToken, 'GET', `AuditEvent?${q}`);
      expect(res.statusCode, q).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const big = await req(a.adminToken, 'GET', 'AuditEvent?_count=100000');
    expect(big.statusCode).toBe(200);
    // Each refusal is recorded, the one whose error quotes a NUL character too (stored as U+FFFD, never blocking the
    // rows batched with it).
    const refused = await auditEvents(t, a.adminToken, 'subtype=search&outcome=4&_count=200', (e) =>
      e.some((x) => String(x.outcomeDesc).includes('patient: \uFFFD')),
    );
    expect(refused.some((x) => String(x.outcomeDesc).includes('patient: \uFFFD'))).toBe(true);
    expect(refused.some((x) => String(x.outcomeDesc).includes('Unknown search parameter'))).toBe(true);
  });

  it('pages newest first with next links', async () => {
    const first = await req(a.adminToken, 'GET', 'AuditEvent?_count=3');
    const body = first.json() as { entry: { resource: Json }[]; link: { relation: string; url: string }[] };
    expect(body.entry).toHaveLength(3);
    const next = body.link.find((l) => l.relation === 'next')?.url as string;
    expect(next).toBeDefined();
    const second = await t.request({
      method: 'GET',
      url: next.replace('http://cinder.test', ''),
      token: a.adminToken,
    });
    const ids2 = (second.json().entry as { resource: Json }[]).map((e) => e.resource.id);
    expect(ids2).toHaveLength(3);
    for (const id of ids2) expect(body.entry.map((e) => e.resource.id)).not.toContain(id);
  });

  it('chains the recorded AuditEvents: $verify-chain passes, then names an AuditEvent changed in the database', async () => {
    const c = await t.newProject('Audit chain');
    const pat = await created(t, c.adminToken, { resourceType: 'Patient', name: [{ family: 'Chained' }] });
    for (let i = 0; i < 5; i++) await req(c.adminToken, 'GET', `Patient/${pat.id as string}?i=${i}`);
    const events = await auditEvents(
      t,
      c.adminToken,
      `patient=${pat.id as string}&_count=50`,
      (e) => e.length >= 6,
    );
    const verify = async () => {
      const res = await req(c.adminToken, 'GET', 'AuditEvent/$verify-chain');
      expect(res.statusCode, res.body).toBe(200);
      const params = (res.json() as { parameter: Json[] }).parameter;
      return Object.fromEntries(
        params.map((p) => [p.name, Object.entries(p).find(([k]) => k.startsWith('value'))?.[1]]),
      );
    };
    const ok = await verify();
    expect(ok.valid).toBe(true);
    expect(ok.checked as number).toBeGreaterThanOrEqual(events.length);
    // Someone with database access turns a read into a create of nothing.
    const victim = events[2] as Json;
    await t.db.query(
      `UPDATE audit_events SET content = replace(content, '"outcome":"0"', '"outcome":"4"') WHERE id = $1`,
      [victim.id],
    );
    const broken = await verify();
    expect(broken.valid).toBe(false);
    expect(broken.brokenAt).toEqual({ reference: `AuditEvent/${victim.id as string}` });
    expect(String(broken.reason)).toMatch(/content/);
    // Put it back, then take the oldest event out of the chain (its link deleted, the row kept): retention never
    // leaves such a row, so the verification names it.
    await t.db.query(
      `UPDATE audit_events SET content = replace(content, '"outcome":"4"', '"outcome":"0"') WHERE id = $1`,
      [victim.id],
    );
    expect((await verify()).valid).toBe(true);
    // The project's first link (its admin client's sign-in or the Patient's create, whichever was stored first).
    const first = await t.db.query<{ id: string }>(
      `SELECT a.id FROM audit_chain c JOIN audit_events a ON a.seq = c.seq WHERE c.project_id = $1
       ORDER BY c.chain_no LIMIT 1`,
      [c.projectId],
    );
    const oldest = { id: first.rows[0]?.id };
    await t.db.query('DELETE FROM audit_chain WHERE seq = (SELECT seq FROM audit_events WHERE id = $1)', [
      oldest.id,
    ]);
    const unlinked = await verify();
    expect(unlinked.valid).toBe(false);
    expect(unlinked.brokenAt).toEqual({ reference: `AuditEvent/${oldest.id as string}` });
    expect(String(unlinked.reason)).toMatch(/no link/);
  });

  it('mirrors every stored AuditEvent as one JSON line (auditLog: stdout)', async () => {
    await req(a.adminToken, 'GET', `Observation/${obs}?mirror=1`);
    const events = await auditEvents(t, a.adminToken, `entity=Observation/${obs}&subtype=read&_count=1`);
    const id = (events[0] as Json).id as string;
    const line = lines.find((l) => l.includes(id));
    expect(line).toBeDefined();
    expect(JSON.parse(line as string)).toEqual(events[0]);
  });

  it("a heavy audit search in one project does not stall another project's reads", async () => {
    const heavy = Array.from({ length: 4 }, () => req(a.adminToken, 'GET', 'AuditEvent?_count=1000'));
    const reads = Array.from({ length: 20 }, () => req(b.adminToken, 'GET', 'Patient?_count=1'));
    const [h, r] = await Promise.all([Promise.all(heavy), Promise.all(reads)]);
    for (const x of h) expect(x.statusCode).toBe(200);
    for (const x of r) expect(x.statusCode).toBe(200);
  });
});

describe('auditing switched off (the benchmark baseline)', () => {
  const [database] = testDatabases();
  it('records nothing', async () => {
    const t = await startTestApp(database as NonNullable<typeof database>, { audit: false });
    try {
      const p = await t.newProject();
      await created(t, p.adminToken, { resourceType: 'Patient' });
      const n = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM audit_events');
      expect(n.rows[0]?.n).toBe(0);
      expect(ADMIN_CLIENT_ID).toBeTruthy();
    } finally {
      await t.close();
    }
  });
});
