// Topic-based subscriptions as the Subscriptions R5 Backport IG (STU 1.1, R4) says, through the HTTP API (API.md §8):
// a rest-hook starts `requested`, is sent a handshake and becomes `active`; an update that takes an Encounter to
// `finished` (queryCriteria previous/current) is notified as the IG's history Bundle with the content asked for,
// within the subscription's filters; heartbeats, `$status` and `$events` answer as the IG's operations say.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postResource, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

const B = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const TOPIC = 'http://example.org/topics/encounter-finished';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Bundle {
  type: string;
  entry: {
    fullUrl?: string;
    resource?: Record<string, unknown>;
    request?: { method: string; url: string };
  }[];
}
interface Param {
  name: string;
  valueString?: string;
  valueCode?: string;
  valueCoding?: { code: string };
  valueReference?: { reference: string };
  part?: Param[];
}
const statusOf = (b: Bundle): Param[] => (b.entry[0]?.resource?.parameter as Param[]) ?? [];
const param = (ps: Param[], name: string): Param | undefined => ps.find((p) => p.name === name);

describe.each(testDatabases())('topic-based subscriptions on $name', (database) => {
  let t: TestApp;
  let rx: Receiver;
  let project: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };
  let patientId = '';

  beforeAll(async () => {
    rx = await startReceiver();
    t = await startTestApp(database, { allowedOutboundHosts: [rx.host] }, { deliver: { pollMs: 30 } });
    project = await t.newProject();
    other = await t.newProject();
    const topic = await postResource(t, project.adminToken, {
      resourceType: 'SubscriptionTopic',
      url: TOPIC,
      status: 'active',
      resourceTrigger: [
        {
          resource: 'Encounter',
          supportedInteraction: ['create', 'update'],
          queryCriteria: {
            previous: 'status:not=finished',
            resultForCreate: 'test-passes',
            current: 'status=finished',
            requireBoth: true,
          },
        },
      ],
      canFilterBy: [{ resource: 'Encounter', filterParameter: 'patient' }],
    });
    expect(topic.statusCode, topic.body).toBe(201);
    patientId = (await postResource(t, project.adminToken, { resourceType: 'Patient' })).json().id as string;
  });
  afterAll(async () => {
    await t?.close();
    await rx?.close();
  });

  const subscribe = (path: string, content: string, extra: Record<string, unknown> = {}) =>
    postResource(t, project.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'finished encounters',
      criteria: TOPIC,
      _criteria: {
        extension: [
          { url: `${B}/backport-filter-criteria`, valueString: `Encounter?patient=Patient/${patientId}` },
        ],
      },
      channel: {
        type: 'rest-hook',
        endpoint: `${rx.url}${path}`,
        payload: 'application/fhir+json',
        _payload: { extension: [{ url: `${B}/backport-payload-content`, valueCode: content }] },
        ...extra,
      },
    });

  const encounter = (status: string, patient = patientId): Record<string, unknown> => ({
    resourceType: 'Encounter',
    status,
    class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'AMB' },
    subject: { reference: `Patient/${patient}` },
  });

  it('handshakes, becomes active, and notifies a finished encounter of its patient with the resource', async () => {
    const sub = await subscribe('/full', 'full-resource');
    expect(sub.statusCode, sub.body).toBe(201);
    expect(sub.json().status).toBe('requested');
    const id = sub.json().id as string;
    const [handshake] = await rx.waitFor(1, { path: '/full' });
    const hs = JSON.parse(handshake?.body ?? '{}') as Bundle;
    expect(hs.type).toBe('history');
    expect(param(statusOf(hs), 'type')?.valueCode).toBe('handshake');
    let status = '';
    for (let i = 0; i < 50 && status !== 'active'; i++) {
      await sleep(50);
      status = (
        await t.request({ method: 'GET', url: `${t.fhir}/Subscription/${id}`, token: project.adminToken })
      ).json().status as string;
    }
    expect(status).toBe('active');

    const made = await postResource(t, project.adminToken, encounter('in-progress'));
    const otherPatient = (await postResource(t, project.adminToken, { resourceType: 'Patient' })).json()
      .id as string;
    await postResource(t, project.adminToken, encounter('finished', otherPatient));
    await sleep(300);
    expect(rx.received.filter((r) => r.path === '/full')).toHaveLength(1);
    const done = await t.request({
      method: 'PUT',
      url: `${t.fhir}/Encounter/${made.json().id as string}`,
      token: project.adminToken,
      payload: { ...(made.json() as object), status: 'finished' },
    });
    expect(done.statusCode).toBe(200);
    const got = await rx.waitFor(2, { path: '/full' });
    const n = JSON.parse(got[1]?.body ?? '{}') as Bundle;
    const ps = statusOf(n);
    expect(param(ps, 'type')?.valueCode).toBe('event-notification');
    expect(param(ps, 'events-since-subscription-start')?.valueString).toBe('1');
    const event = param(ps, 'notification-event');
    expect(param(event?.part ?? [], 'event-number')?.valueString).toBe('1');
    expect(param(event?.part ?? [], 'focus')?.valueReference?.reference).toContain(
      `Encounter/${made.json().id as string}`,
    );
    expect(n.entry[1]?.resource?.status).toBe('finished');
    expect(got[1]?.headers['x-cinder-event-number']).toBe('1');

    const statusRes = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}/$status`,
      token: project.adminToken,
    });
    expect(statusRes.statusCode).toBe(200);
    const sb = statusRes.json() as Bundle;
    expect(sb.type).toBe('searchset');
    const sp = (sb.entry[0]?.resource?.parameter as Param[]) ?? [];
    expect(param(sp, 'type')?.valueCode).toBe('query-status');
    expect(param(sp, 'status')?.valueCode).toBe('active');
    expect(param(sp, 'events-since-subscription-start')?.valueString).toBe('1');

    const events = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}/$events?eventsSinceNumber=1&content=id-only`,
      token: project.adminToken,
    });
    expect(events.statusCode).toBe(200);
    const eb = events.json() as Bundle;
    expect(param(statusOf(eb), 'type')?.valueCode).toBe('query-event');
    expect(eb.entry[1]?.resource).toBeUndefined();
    expect(eb.entry[1]?.fullUrl).toContain(`Encounter/${made.json().id as string}`);

    const foreign = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}/$events`,
      token: other.adminToken,
    });
    expect(foreign.statusCode).toBe(404);
    const foreignStatus = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}/$status`,
      token: other.adminToken,
    });
    expect(foreignStatus.statusCode).toBe(404);
  });

  it('sends id-only and empty notifications without the resource', async () => {
    await subscribe('/ids', 'id-only');
    await subscribe('/empty', 'empty');
    await rx.waitFor(1, { path: '/ids' });
    await rx.waitFor(1, { path: '/empty' });
    await sleep(200);
    await postResource(t, project.adminToken, encounter('finished'));
    const ids = JSON.parse((await rx.waitFor(2, { path: '/ids' }))[1]?.body ?? '{}') as Bundle;
    expect(ids.entry).toHaveLength(2);
    expect(ids.entry[1]?.resource).toBeUndefined();
    const empty = JSON.parse((await rx.waitFor(2, { path: '/empty' }))[1]?.body ?? '{}') as Bundle;
    expect(empty.entry).toHaveLength(1);
    const ev = param(statusOf(empty), 'notification-event');
    expect(param(ev?.part ?? [], 'focus')).toBeUndefined();
  });

  it('sends heartbeats when nothing happens', async () => {
    await subscribe('/beat', 'empty', {
      extension: [{ url: `${B}/backport-heartbeat-period`, valueUnsignedInt: 1 }],
    });
    const got = await rx.waitFor(2, { path: '/beat', timeoutMs: 8000 });
    expect(param(statusOf(JSON.parse(got[1]?.body ?? '{}') as Bundle), 'type')?.valueCode).toBe('heartbeat');
  });

  it('answers malformed $events and $status calls and hostile topics with a 4xx OperationOutcome', async () => {
    const sub = await subscribe('/hostile', 'id-only');
    const id = sub.json().id as string;
    for (const query of ['eventsSinceNumber=x', 'eventsUntilNumber=-1', 'content=everything']) {
      const res = await t.request({
        method: 'GET',
        url: `${t.fhir}/Subscription/${id}/$events?${query}`,
        token: project.adminToken,
      });
      expect(res.statusCode, query).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const missing = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/does-not-exist/$status`,
      token: project.adminToken,
    });
    expect(missing.statusCode).toBe(404);
    const hugeCriteria = await postResource(t, project.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'x',
      criteria: `Observation?code=${'a,'.repeat(50_000)}b`,
      channel: { type: 'rest-hook', endpoint: `${rx.url}/x` },
    });
    expect(hugeCriteria.statusCode).toBeGreaterThanOrEqual(400);
    expect(hugeCriteria.statusCode).toBeLessThan(500);
    const hugeFhirPath = await postResource(t, project.adminToken, {
      resourceType: 'SubscriptionTopic',
      url: 'http://example.org/topics/huge',
      status: 'active',
      resourceTrigger: [
        { resource: 'Encounter', fhirPathCriteria: `${'(true and '.repeat(2000)}true${')'.repeat(2000)}` },
      ],
    });
    // Stored (a topic is data), but a Subscription to it is refused: its FHIRPath is too long to run in a write.
    expect(hugeFhirPath.statusCode).toBeLessThan(500);
    const toHuge = await postResource(t, project.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'x',
      criteria: 'http://example.org/topics/huge',
      channel: { type: 'rest-hook', endpoint: `${rx.url}/x` },
    });
    expect(toHuge.statusCode).toBeGreaterThanOrEqual(400);
    expect(toHuge.statusCode).toBeLessThan(500);
    // The server is still answering.
    const ok = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}/$status`,
      token: project.adminToken,
    });
    expect(ok.statusCode).toBe(200);
  });

  it('refuses an unknown topic and a filter the topic does not allow', async () => {
    const unknown = await postResource(t, project.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'x',
      criteria: 'http://example.org/topics/none',
      channel: { type: 'rest-hook', endpoint: `${rx.url}/x` },
    });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.body).toContain('names no SubscriptionTopic of this project');
    // Another project's topic is not this project's.
    const foreign = await postResource(t, other.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'x',
      criteria: TOPIC,
      channel: { type: 'rest-hook', endpoint: `${rx.url}/x` },
    });
    expect(foreign.statusCode).toBe(400);
    const filter = await postResource(t, project.adminToken, {
      resourceType: 'Subscription',
      status: 'requested',
      reason: 'x',
      criteria: TOPIC,
      _criteria: {
        extension: [{ url: `${B}/backport-filter-criteria`, valueString: 'Encounter?status=finished' }],
      },
      channel: { type: 'rest-hook', endpoint: `${rx.url}/x` },
    });
    expect(filter.statusCode).toBe(400);
    expect(filter.body).toContain("does not allow filtering Encounter by 'status'");
  });
});
