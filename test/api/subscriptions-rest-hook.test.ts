// Classic R4 rest-hook subscriptions through the HTTP API (API.md §8, https://hl7.org/fhir/R4/subscription.html):
// a real HTTP receiver gets every matching create and update once per event number, with the headers the
// contract names; a rolled-back transaction notifies nothing; failures are retried and end in `error`; `off` is
// honoured; endpoints follow the outbound rule; headers are write-only; projects and authors are walled off.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postResource, startTestApp, tokenRequest, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

const CODE = 'http://loinc.org|8867-4';
const observation = (code: string, value = 70): Record<string, unknown> => ({
  resourceType: 'Observation',
  status: 'final',
  code: { coding: [{ system: 'http://loinc.org', code }] },
  valueQuantity: { value, unit: '/min' },
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe.each(testDatabases())('classic rest-hook subscriptions on $name', (database) => {
  let t: TestApp;
  let rx: Receiver;
  let project: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };

  beforeAll(async () => {
    rx = await startReceiver();
    t = await startTestApp(
      database,
      { allowedOutboundHosts: [rx.host], maxSubscriptionsPerProject: 12 },
      { deliver: { pollMs: 30, retryBaseMs: 50, maxDelayMs: 100, retryWindowMs: 60_000 } },
    );
    project = await t.newProject();
    other = await t.newProject();
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  const subscribe = async (
    path: string,
    extra: Record<string, unknown> = {},
    token = project.adminToken,
  ): Promise<{ status: number; body: Record<string, unknown> }> => {
    const res = await postResource(t, token, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'test',
      criteria: `Observation?code=${CODE}`,
      channel: {
        type: 'rest-hook',
        endpoint: `${rx.url}${path}`,
        payload: 'application/fhir+json',
        header: ['Authorization: Bearer receiver-secret'],
      },
      ...extra,
    });
    return { status: res.statusCode, body: res.json() as Record<string, unknown> };
  };

  it('starts active, keeps its headers write-only, and delivers each matching version once with its number', async () => {
    const sub = await subscribe('/payload');
    expect(sub.status).toBe(201);
    expect(sub.body.status).toBe('active');
    expect(JSON.stringify(sub.body)).not.toContain('receiver-secret');
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${sub.body.id as string}`,
      token: project.adminToken,
    });
    expect((read.json() as { channel: { header?: unknown } }).channel.header).toBeUndefined();
    expect(read.body).not.toContain('receiver-secret');

    const made = await postResource(t, project.memberToken, observation('8867-4', 71));
    expect(made.statusCode).toBe(201);
    await postResource(t, project.memberToken, observation('1234-5'));
    const id = made.json().id as string;
    const updated = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Observation/${id}`,
      token: project.memberToken,
      payload: { ...(made.json() as object), valueQuantity: { value: 72, unit: '/min' } },
    });
    expect(updated.statusCode).toBe(200);
    const got = await rx.waitFor(2, { path: '/payload' });
    await sleep(200);
    const mine = rx.received.filter((r) => r.path === '/payload');
    expect(mine).toHaveLength(2);
    expect(mine.map((r) => r.headers['x-cinder-event-number'])).toEqual(['1', '2']);
    for (const r of got) {
      expect(r.headers['x-cinder-subscription']).toBe(sub.body.id);
      expect(r.headers.authorization).toBe('Bearer receiver-secret');
      expect(r.headers['content-type']).toBe('application/fhir+json');
    }
    const bodies = got.map((r) => JSON.parse(r.body) as Record<string, unknown>);
    expect(bodies.map((b) => [b.id, (b.meta as { versionId: string }).versionId])).toEqual([
      [id, '1'],
      [id, '2'],
    ]);
  });

  it('sends an empty body without a payload, and never notifies a delete', async () => {
    const sub = await subscribe('/empty', {
      channel: { type: 'rest-hook', endpoint: `${rx.url}/empty` },
    });
    expect(sub.status).toBe(201);
    const made = await postResource(t, project.adminToken, observation('8867-4'));
    const [r] = await rx.waitFor(1, { path: '/empty' });
    expect(r?.body).toBe('');
    expect(r?.headers['x-cinder-event-number']).toBe('1');
    const del = await t.request({
      method: 'DELETE',
      url: `${t.fhir}/Observation/${made.json().id as string}`,
      token: project.adminToken,
    });
    expect(del.statusCode).toBe(200);
    await sleep(300);
    expect(rx.received.filter((x) => x.path === '/empty')).toHaveLength(1);
  });

  it('records nothing for a transaction that is rolled back', async () => {
    const sub = await subscribe('/tx');
    const bundle = {
      resourceType: 'Bundle',
      type: 'transaction',
      entry: [
        { request: { method: 'POST', url: 'Observation' }, resource: observation('8867-4') },
        {
          request: { method: 'PUT', url: 'Observation/does-not-exist' },
          resource: { resourceType: 'Patient' },
        },
      ],
    };
    const res = await t.request({ method: 'POST', url: t.fhir, token: project.adminToken, payload: bundle });
    expect(res.statusCode).toBeGreaterThanOrEqual(400);
    expect(res.statusCode).toBeLessThan(500);
    const rows = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM subscription_events WHERE subscription_id = $1',
      [sub.body.id],
    );
    expect(rows.rows[0]?.n).toBe(0);
    const ok = await t.request({
      method: 'POST',
      url: t.fhir,
      token: project.adminToken,
      payload: { ...bundle, entry: [bundle.entry[0]] },
    });
    expect(ok.statusCode).toBe(200);
    const [r] = await rx.waitFor(1, { path: '/tx' });
    expect(r?.headers['x-cinder-event-number']).toBe('1');
  });

  it('retries a failing endpoint with the same event number until it answers 2xx', async () => {
    let failures = 0;
    const before = rx.answer;
    rx.answer = (r) => (r.path === '/flaky' && failures++ < 2 ? 503 : before(r));
    await subscribe('/flaky');
    await postResource(t, project.adminToken, observation('8867-4'));
    const got = await rx.waitFor(3, { path: '/flaky' });
    expect(got.map((r) => r.headers['x-cinder-event-number'])).toEqual(['1', '1', '1']);
    await sleep(300);
    expect(rx.received.filter((r) => r.path === '/flaky')).toHaveLength(3);
    rx.answer = before;
  });

  it('does not slow a write when the endpoint hangs', async () => {
    const before = rx.answer;
    rx.answer = (r) => (r.path === '/hang' ? 'hang' : before(r));
    await subscribe('/hang');
    await postResource(t, project.adminToken, observation('8867-4'));
    await rx.waitFor(1, { path: '/hang' });
    // The endpoint holds the first notification open; writes go on being answered meanwhile.
    for (let i = 0; i < 5; i++) {
      const res = await postResource(t, project.adminToken, observation('8867-4'));
      expect(res.statusCode).toBe(201);
    }
    expect(rx.received.filter((r) => r.path === '/hang')).toHaveLength(1);
    rx.answer = before;
  });

  it('honours off: nothing pending or later is delivered', async () => {
    const sub = await subscribe('/off');
    const id = sub.body.id as string;
    const off = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Subscription/${id}`,
      token: project.adminToken,
      payload: { ...sub.body, status: 'off' },
    });
    expect(off.statusCode).toBe(200);
    expect(off.json().status).toBe('off');
    await postResource(t, project.adminToken, observation('8867-4'));
    await sleep(400);
    expect(rx.received.filter((r) => r.path === '/off')).toHaveLength(0);
    const rows = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM subscription_events WHERE subscription_id = $1',
      [id],
    );
    expect(rows.rows[0]?.n).toBe(0);
  });

  it("never tells one project about another project's writes, nor shows it the subscription", async () => {
    const sub = await subscribe('/isolated');
    await postResource(t, other.adminToken, observation('8867-4'));
    await sleep(300);
    expect(rx.received.filter((r) => r.path === '/isolated')).toHaveLength(0);
    const id = sub.body.id as string;
    const read = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}`,
      token: other.adminToken,
    });
    expect(read.statusCode).toBe(404);
    const test = await t.request({
      method: 'POST',
      url: `${t.fhir}/Subscription/${id}/$test-notification`,
      token: other.adminToken,
    });
    expect(test.statusCode).toBe(404);
  });

  it('sends a test notification on request', async () => {
    const sub = await subscribe('/test');
    const res = await t.request({
      method: 'POST',
      url: `${t.fhir}/Subscription/${sub.body.id as string}/$test-notification`,
      token: project.adminToken,
    });
    expect(res.statusCode).toBe(202);
    const [r] = await rx.waitFor(1, { path: '/test' });
    expect(r?.headers['x-cinder-notification']).toBe('test');
    expect(r?.body).toBe('');
  });

  it('refuses endpoints and criteria it cannot serve with a 400 naming the element', async () => {
    const refused = 'loopback, private or link-local';
    const cases: [Record<string, unknown>, string][] = [
      [{ channel: { type: 'rest-hook', endpoint: 'http://169.254.169.254/latest' } }, refused],
      [{ channel: { type: 'rest-hook', endpoint: 'http://127.0.0.1:1/x' } }, refused],
      [{ channel: { type: 'rest-hook', endpoint: 'ftp://example.org/x' } }, 'must be an http or https URL'],
      [{ channel: { type: 'rest-hook' } }, 'is required for a rest-hook'],
      [
        { channel: { type: 'email', endpoint: 'mailto:a@example.org' } },
        'channel.type email is not supported',
      ],
      [
        { channel: { type: 'rest-hook', endpoint: `${rx.url}/x`, header: ['X-A: 1\r\nX-B: 2'] } },
        'Subscription.channel.header',
      ],
      [{ criteria: 'NotAType?x=1' }, 'Subscription.criteria must be a search'],
      [{ criteria: 'Observation?subject.name=x' }, 'subject.name'],
    ];
    for (const [extra, code] of cases) {
      const res = await subscribe('/never', extra);
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(JSON.stringify(res.body), JSON.stringify(extra)).toContain(code);
    }
  });

  it('bounds the subscriptions that are not off (maxSubscriptionsPerProject)', async () => {
    const fresh = await t.newProject();
    for (let i = 0; i < 12; i++) expect((await subscribe('/limit', {}, fresh.adminToken)).status).toBe(201);
    const more = await subscribe('/limit', {}, fresh.adminToken);
    expect(more.status).toBe(422);
    expect(JSON.stringify(more.body)).toContain('maxSubscriptionsPerProject');
    const off = await subscribe('/limit', { status: 'off' }, fresh.adminToken);
    expect(off.status).toBe(201);
  });

  it("tells a narrowly scoped author only about what its token's scopes let it read", async () => {
    const fresh = await t.newProject();
    const secret = 'a-secret-of-the-scoped-client-0123';
    const client = await postResource(t, fresh.adminToken, {
      resourceType: 'ClientApplication',
      name: 'Scoped',
      secret,
    });
    const id = client.json().id as string;
    const membership = await postResource(t, fresh.adminToken, {
      resourceType: 'ProjectMembership',
      project: { reference: `Project/${fresh.projectId}` },
      user: { reference: `ClientApplication/${id}` },
      profile: { reference: `ClientApplication/${id}` },
    });
    expect(membership.statusCode, membership.body).toBe(201);
    const tok = await tokenRequest(t.app, {
      grant_type: 'client_credentials',
      client_id: id,
      client_secret: secret,
      scope: 'system/Subscription.crs system/Observation.rs',
    });
    expect(tok.statusCode, tok.body).toBe(200);
    const scoped = tok.json().access_token as string;
    for (const criteria of ['Patient', 'Observation']) {
      const res = await postResource(t, scoped, {
        resourceType: 'Subscription',
        status: 'active',
        reason: 'scoped',
        criteria,
        channel: {
          type: 'rest-hook',
          endpoint: `${rx.url}/scoped-${criteria}`,
          payload: 'application/fhir+json',
        },
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    await postResource(t, fresh.adminToken, { resourceType: 'Patient', name: [{ family: 'Unseen' }] });
    await postResource(t, fresh.adminToken, observation('8867-4'));
    await rx.waitFor(1, { path: '/scoped-Observation' });
    await sleep(300);
    expect(rx.received.filter((r) => r.path === '/scoped-Patient')).toHaveLength(0);
  });

  it('stops when its author loses access: status error, nothing delivered', async () => {
    const fresh = await t.newProject();
    const sub = await subscribe('/revoked', {}, fresh.memberToken);
    expect(sub.status).toBe(201);
    // Deactivate the member's membership (the admin of the project does it).
    const memberships = await t.request({
      method: 'GET',
      url: `${t.fhir}/ProjectMembership?_count=100`,
      token: fresh.adminToken,
    });
    const member = (memberships.json().entry as { resource: Record<string, unknown> }[])
      .map((e) => e.resource)
      .find((m) => m.admin !== true);
    expect(member).toBeDefined();
    const off = await t.request({
      method: 'PUT',
      url: `${t.fhir}/ProjectMembership/${member?.id as string}`,
      token: fresh.adminToken,
      payload: { ...member, active: false },
    });
    expect(off.statusCode).toBe(200);
    await postResource(t, fresh.adminToken, observation('8867-4'));
    let status = '';
    for (let i = 0; i < 50 && status !== 'error'; i++) {
      await sleep(100);
      const r = await t.request({
        method: 'GET',
        url: `${t.fhir}/Subscription/${sub.body.id as string}`,
        token: fresh.adminToken,
      });
      status = r.json().status as string;
    }
    expect(status).toBe('error');
    expect(rx.received.filter((r) => r.path === '/revoked')).toHaveLength(0);
  });
});

describe.each(testDatabases())('a persistently failing rest-hook on $name', (database) => {
  let t: TestApp;
  let rx: Receiver;
  beforeAll(async () => {
    rx = await startReceiver();
    rx.answer = () => 500;
    t = await startTestApp(
      database,
      { allowedOutboundHosts: [rx.host] },
      { deliver: { pollMs: 30, retryBaseMs: 30, maxDelayMs: 60, retryWindowMs: 400 } },
    );
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  it('is set to error with the reason once the retry window has passed, and tried no more', async () => {
    const { adminToken } = await t.newProject();
    const res = await postResource(t, adminToken, {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'test',
      criteria: 'Observation',
      channel: { type: 'rest-hook', endpoint: `${rx.url}/down` },
    });
    const id = res.json().id as string;
    await postResource(t, adminToken, observation('8867-4'));
    let sub: Record<string, unknown> = {};
    for (let i = 0; i < 60 && sub.status !== 'error'; i++) {
      await sleep(100);
      sub = (
        await t.request({ method: 'GET', url: `${t.fhir}/Subscription/${id}`, token: adminToken })
      ).json();
    }
    expect(sub.status).toBe('error');
    expect(String(sub.error)).toContain('500');
    const tries = rx.received.length;
    expect(tries).toBeGreaterThan(1);
    await sleep(400);
    expect(rx.received.length).toBe(tries);
  });
});
