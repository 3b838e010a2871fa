// Issue 25 points 2 and 3: every write checks the interaction it performs against the token's SMART scopes
// (https://hl7.org/fhir/smart-app-launch/scopes-and-launch-context.html): an update that creates (a new id, a
// conditional update that matches nothing) is a create and needs `c`, for `patient/`, `user/` and `system/` scopes, in
// every writer. Under `patient/` scopes every Patient a written resource's compartment parameters name must be the
// patient in context, and old versions are read under their own compartment. Each case here wrote or read what it
// must not before the fix.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteRequest, setUserPassword, startTestApp, tokenRequest, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { smartLaunch } from '../support/smart-browser.js';

const PASSWORD = 'a long and correct password';
const REDIRECT = 'https://app.example/callback';

type Json = Record<string, unknown>;

describe.each(testDatabases())('write scopes on $name', (database) => {
  let t: TestApp;
  let admin: string;
  let me: string; // the Patient user's own Patient
  let other: string; // another patient of the project
  let patientRus: string; // launch/patient patient/Observation.rus
  let patientAll: string; // launch/patient patient/*.cruds
  let userRus: string; // a Practitioner's user/Observation.rus
  let systemRus: string; // a client's system/Observation.rus
  let mine: string; // an Observation of mine

  const req = (tok: string, method: string, path: string, payload?: unknown, headers?: Json) =>
    t.request({
      method: method as 'GET',
      url: `${t.fhir}/${path}`,
      token: tok,
      ...(payload !== undefined ? { payload: payload as Json } : {}),
      ...(headers ? { headers: headers as Record<string, string> } : {}),
    });
  const obs = (subject: string, extra: Json = {}): Json => ({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'test' },
    subject: { reference: `Patient/${subject}` },
    ...extra,
  });
  const created = async (tok: string, resource: Json): Promise<string> => {
    const res = await req(tok, 'POST', resource.resourceType as string, resource);
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };
  const forbidden = (res: { statusCode: number; json(): Json; body: string }, code = 'forbidden') => {
    expect(res.statusCode, res.body).toBe(403);
    expect((res.json().issue as { code: string }[])[0]?.code).toBe(code);
  };
  const entries = (res: { json(): Json }) =>
    (res.json().entry as { response: { status: string; outcome?: Json } }[]).map((e) => e.response);
  const countOf = async (query: string): Promise<number> =>
    (await req(admin, 'GET', `Observation?${query}&_summary=count`)).json().total as number;

  beforeAll(async () => {
    t = await startTestApp(database);
    const p = await t.newProject('Write Scopes');
    admin = p.adminToken;
    const app = await req(admin, 'PUT', 'ClientApplication/scoped-app', {
      resourceType: 'ClientApplication',
      id: 'scoped-app',
      name: 'Scoped app',
      redirectUri: REDIRECT,
    });
    expect(app.statusCode, app.body).toBeLessThan(300);
    const invite = async (resourceType: string, email: string): Promise<string> => {
      const res = await inviteRequest(t, admin, p.projectId, {
        resourceType,
        firstName: 'Sam',
        lastName: resourceType,
        email,
      });
      expect(res.statusCode, res.body).toBe(200);
      const m = res.json() as { user: { reference: string }; profile: { reference: string } };
      await setUserPassword(t, m.user.reference.split('/')[1] as string, PASSWORD);
      return m.profile.reference.split('/')[1] as string;
    };
    me = await invite('Patient', 'pat@write-scopes.example');
    await invite('Practitioner', 'doc@write-scopes.example');
    other = await created(admin, { resourceType: 'Patient', name: [{ family: 'Other' }] });
    mine = await created(admin, obs(me));
    const launch = async (email: string, scope: string): Promise<string> => {
      const r = await smartLaunch(t.app, {
        clientId: 'scoped-app',
        redirectUri: REDIRECT,
        aud: 'http://cinder.test/fhir/R4',
        email,
        password: PASSWORD,
        scope,
      });
      expect(r.scope).toBe(scope);
      return r.access_token as string;
    };
    patientRus = await launch('pat@write-scopes.example', 'launch/patient patient/Observation.rus');
    patientAll = await launch('pat@write-scopes.example', 'launch/patient patient/*.cruds');
    userRus = await launch('doc@write-scopes.example', 'user/Observation.rus');
    // A confidential client of the project with a member's role, asking for system/Observation.rus.
    const secret = 'a-secret-of-the-system-client-0123';
    const client = await created(admin, { resourceType: 'ClientApplication', name: 'System', secret });
    const membership = await req(admin, 'POST', 'ProjectMembership', {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${p.projectId}` },
      user: { reference: `ClientApplication/${client}` },
      profile: { reference: `ClientApplication/${client}` },
    });
    expect(membership.statusCode, membership.body).toBe(201);
    const tok = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: client,
      client_secret: secret,
      scope: 'system/Observation.rus',
    });
    expect(tok.statusCode, tok.body).toBe(200);
    expect(tok.json().scope).toBe('system/Observation.rus');
    systemRus = tok.json().access_token as string;
  });
  afterAll(async () => t?.close());

  describe('a scope without c creates nothing', () => {
    const tokens = () => ({ 'patient/': patientRus, 'user/': userRus, 'system/': systemRus });

    it('POST, PUT to a new id, and a conditional update that matches nothing are creates', async () => {
      for (const [kind, tok] of Object.entries(tokens())) {
        const before = await countOf(`subject=Patient/${other}`);
        forbidden(await req(tok, 'POST', 'Observation', obs(other)));
        const id = `no-c-${kind.replace('/', '')}`;
        forbidden(await req(tok, 'PUT', `Observation/${id}`, { ...obs(other), id }));
        forbidden(await req(tok, 'PUT', `Observation?identifier=none-${id}`, obs(other)));
        forbidden(
          await req(tok, 'POST', 'Observation', obs(me), { 'if-none-exist': `identifier=none-${id}` }),
        );
        expect(await countOf(`subject=Patient/${other}`), kind).toBe(before);
        expect((await req(admin, 'GET', `Observation/${id}`)).statusCode, kind).toBe(404);
      }
    });

    it('nor in transaction and batch entries', async () => {
      for (const [kind, tok] of Object.entries(tokens())) {
        const before = await countOf(`subject=Patient/${other}`);
        const id = `no-c-tx-${kind.replace('/', '')}`;
        const tx = await req(tok, 'POST', '', {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [
            { resource: obs(other), request: { method: 'POST', url: 'Observation' } },
            { resource: { ...obs(other), id }, request: { method: 'PUT', url: `Observation/${id}` } },
          ],
        });
        forbidden(tx);
        const batch = await req(tok, 'POST', '', {
          resourceType: 'Bundle',
          type: 'batch',
          entry: [
            { resource: obs(other), request: { method: 'POST', url: 'Observation' } },
            { resource: { ...obs(other), id }, request: { method: 'PUT', url: `Observation/${id}` } },
          ],
        });
        expect(batch.statusCode, batch.body).toBe(200);
        expect(entries(batch).map((e) => e.status.split(' ')[0])).toEqual(['403', '403']);
        expect(await countOf(`subject=Patient/${other}`), kind).toBe(before);
      }
    });

    it('while u still updates what exists, and d is still needed to delete', async () => {
      const current = (await req(admin, 'GET', `Observation/${mine}`)).json();
      for (const tok of Object.values(tokens())) {
        const put = await req(tok, 'PUT', `Observation/${mine}`, { ...current, status: 'amended' });
        expect(put.statusCode, put.body).toBe(200);
        const patch = await req(
          tok,
          'PATCH',
          `Observation/${mine}`,
          [{ op: 'replace', path: '/status', value: 'final' }],
          { 'content-type': 'application/json-patch+json' },
        );
        expect(patch.statusCode, patch.body).toBe(200);
        forbidden(await req(tok, 'DELETE', `Observation/${mine}`));
      }
    });

    it('bringing a deleted resource back is a create', async () => {
      const gone = await created(admin, obs(me));
      const body = (await req(admin, 'GET', `Observation/${gone}`)).json();
      expect((await req(admin, 'DELETE', `Observation/${gone}`)).statusCode).toBe(200);
      forbidden(await req(userRus, 'PUT', `Observation/${gone}`, body));
      forbidden(await req(systemRus, 'PUT', `Observation/${gone}`, body));
      // A deleted resource is out of a patient token's reach altogether (it is in no compartment now).
      expect((await req(patientRus, 'PUT', `Observation/${gone}`, body)).statusCode).toBe(404);
      expect((await req(admin, 'GET', `Observation/${gone}`)).statusCode).toBe(410);
    });
  });

  describe('patient/ writes name no other patient', () => {
    it('refuses a resource whose compartment parameters name another patient, in every writer', async () => {
      const before = await countOf(`subject=Patient/${other}`);
      const intruding = obs(other, { performer: [{ reference: `Patient/${me}` }] });
      const alsoOther = obs(me, { performer: [{ reference: `Patient/${other}` }] });
      for (const body of [intruding, alsoOther]) {
        forbidden(await req(patientAll, 'POST', 'Observation', body));
        forbidden(await req(patientAll, 'PUT', 'Observation/intruder', { ...body, id: 'intruder' }));
        const tx = await req(patientAll, 'POST', '', {
          resourceType: 'Bundle',
          type: 'transaction',
          entry: [{ resource: body, request: { method: 'POST', url: 'Observation' } }],
        });
        forbidden(tx);
      }
      // A reference whose target cannot be told may name any patient.
      forbidden(
        await req(patientAll, 'POST', 'Observation', {
          ...obs(me),
          performer: [{ reference: 'Patient?identifier=x|y' }],
        }),
      );
      expect(await countOf(`subject=Patient/${other}`)).toBe(before);
      // Mine alone is fine, whatever else it names.
      const ok = await req(patientAll, 'POST', 'Observation', {
        ...obs(me),
        performer: [{ reference: `Patient/${me}` }],
      });
      expect(ok.statusCode, ok.body).toBe(201);
    });

    it('neither moves mine to another patient nor changes or deletes what also names another', async () => {
      const current = (await req(admin, 'GET', `Observation/${mine}`)).json();
      forbidden(
        await req(patientAll, 'PUT', `Observation/${mine}`, {
          ...current,
          performer: [{ reference: `Patient/${other}` }],
        }),
      );
      const patch = await req(
        patientAll,
        'PATCH',
        `Observation/${mine}`,
        [{ op: 'add', path: '/performer', value: [{ reference: `Patient/${other}` }] }],
        { 'content-type': 'application/json-patch+json' },
      );
      forbidden(patch);
      const shared = await created(admin, obs(me, { performer: [{ reference: `Patient/${other}` }] }));
      const body = (await req(admin, 'GET', `Observation/${shared}`)).json();
      forbidden(await req(patientAll, 'PUT', `Observation/${shared}`, { ...body, status: 'amended' }));
      forbidden(await req(patientAll, 'DELETE', `Observation/${shared}`));
      // My own Patient may not link to another patient (that would put it in their compartment).
      const self = (await req(admin, 'GET', `Patient/${me}`)).json();
      forbidden(
        await req(patientAll, 'PUT', `Patient/${me}`, {
          ...self,
          link: [{ other: { reference: `Patient/${other}` }, type: 'seealso' }],
        }),
      );
      expect((await req(admin, 'GET', `Observation/${shared}`)).json().status).toBe('final');
    });
  });

  describe('old versions follow their own compartment', () => {
    const versionsSeen = async (id: string): Promise<string[]> => {
      const res = await req(patientAll, 'GET', `Observation/${id}/_history`);
      if (res.statusCode !== 200) return [String(res.statusCode)];
      return (res.json().entry as { resource?: { meta: { versionId: string } } }[]).map(
        (e) => e.resource?.meta.versionId ?? 'deleted',
      );
    };

    it('a resource moved from me to another patient keeps my versions mine and hides theirs', async () => {
      const moved = await created(admin, obs(me));
      const v1 = (await req(admin, 'GET', `Observation/${moved}`)).json();
      const put = await req(admin, 'PUT', `Observation/${moved}`, {
        ...v1,
        subject: { reference: `Patient/${other}` },
      });
      expect(put.statusCode, put.body).toBe(200);
      expect((await req(patientAll, 'GET', `Observation/${moved}/_history/1`)).statusCode).toBe(200);
      expect((await req(patientAll, 'GET', `Observation/${moved}/_history/2`)).statusCode).toBe(404);
      expect((await req(patientAll, 'GET', `Observation/${moved}`)).statusCode).toBe(404);
      expect(await versionsSeen(moved)).toEqual(['1']);
    });

    it('a resource moved from another patient to me hides their versions', async () => {
      const moved = await created(admin, obs(other, { note: [{ text: 'their private note' }] }));
      const v1 = (await req(admin, 'GET', `Observation/${moved}`)).json();
      const put = await req(admin, 'PUT', `Observation/${moved}`, {
        ...v1,
        note: undefined,
        subject: { reference: `Patient/${me}` },
      });
      expect(put.statusCode, put.body).toBe(200);
      const old = await req(patientAll, 'GET', `Observation/${moved}/_history/1`);
      expect(old.statusCode).toBe(404);
      expect(old.body).not.toContain('their private note');
      expect((await req(patientAll, 'GET', `Observation/${moved}/_history/2`)).statusCode).toBe(200);
      expect(await versionsSeen(moved)).toEqual(['2']);
      const typeHistory = await req(patientAll, 'GET', `Observation/_history?_count=100`);
      expect(typeHistory.statusCode).toBe(200);
      expect(typeHistory.body).not.toContain('their private note');
      // Another patient's resource that was never mine: its history does not exist for me.
      const theirs = await created(admin, obs(other));
      expect(await versionsSeen(theirs)).toEqual(['404']);
    });
  });
});
