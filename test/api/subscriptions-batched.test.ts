// Batched subscription delivery through the HTTP API (API.md §8 "Delivery"; the Backport IG's notification Bundle,
// https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/notifications.html, and backport-max-count): a burst of
// writes reaches a topic-based rest-hook in fewer POSTs than events, every event exactly once and in event-number
// order, never more events in one Bundle than backport-max-count; a classic rest-hook still gets one POST per event,
// each the version that matched; one project's hanging endpoints do not hold up another project's subscription;
// another project's member and a narrowly scoped token can neither see nor change a subscription; a malformed
// backport-max-count is a 400.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postBundle, postResource, scopedClientToken, startTestApp, type TestApp } from '../support/app.js';
import { testDatabases } from '../support/db.js';
import { startReceiver, type Received, type Receiver } from '../support/receiver.js';

const B = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const TOPIC = 'http://example.org/topics/patient-created';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Param {
  name: string;
  valueString?: string;
  valueCode?: string;
  valueReference?: { reference: string };
  part?: Param[];
}
interface Bundle {
  type: string;
  entry: { fullUrl?: string; resource?: Record<string, unknown> }[];
}

/** What one notification Bundle tells: its type, its count, and per event its number and focus id. */
function readNotification(r: Received): {
  type: string | undefined;
  since: number;
  events: { n: number; focus: string }[];
  resources: Record<string, unknown>[];
} {
  const bundle = JSON.parse(r.body) as Bundle;
  const params = (bundle.entry[0]?.resource?.parameter as Param[]) ?? [];
  const events = params
    .filter((p) => p.name === 'notification-event')
    .map((p) => ({
      n: Number(p.part?.find((x) => x.name === 'event-number')?.valueString),
      focus:
        (p.part?.find((x) => x.name === 'focus')?.valueReference?.reference ?? '').split('/').pop() ?? '',
    }));
  return {
    type: params.find((p) => p.name === 'type')?.valueCode,
    since: Number(params.find((p) => p.name === 'events-since-subscription-start')?.valueString),
    events,
    resources: bundle.entry.slice(1).flatMap((e) => (e.resource ? [e.resource] : [])),
  };
}

describe.each(testDatabases())('batched subscription delivery on $name', (database) => {
  let t: TestApp;
  let rx: Receiver;
  let project: { projectId: string; adminToken: string; memberToken: string };
  let other: { projectId: string; adminToken: string; memberToken: string };

  beforeAll(async () => {
    rx = await startReceiver();
    t = await startTestApp(
      database,
      { allowedOutboundHosts: [rx.host] },
      // Four workers: three at most for one project, so one stays for the others (deliverer.ts).
      { deliver: { pollMs: 30, concurrency: 4, timeoutMs: 30_000 } },
    );
    project = await t.newProject();
    other = await t.newProject();
    const topic = await postResource(t, project.adminToken, {
      resourceType: 'SubscriptionTopic',
      url: TOPIC,
      status: 'active',
      resourceTrigger: [{ resource: 'Patient', supportedInteraction: ['create'] }],
      canFilterBy: [{ resource: 'Patient', filterParameter: 'family' }],
    });
    expect(topic.statusCode, topic.body).toBe(201);
  });
  afterAll(async () => {
    // The receiver first: its hanging answers end, so the deliverer's stop does not wait for their timeout.
    await rx?.close();
    await t?.close();
  });

  const topicSubscription = (path: string, family: string, channelExtension: unknown[] = []) => ({
    resourceType: 'Subscription',
    status: 'requested',
    reason: 'batched',
    criteria: TOPIC,
    _criteria: {
      extension: [{ url: `${B}/backport-filter-criteria`, valueString: `Patient?family=${family}` }],
    },
    channel: {
      type: 'rest-hook',
      endpoint: `${rx.url}${path}`,
      payload: 'application/fhir+json',
      _payload: { extension: [{ url: `${B}/backport-payload-content`, valueCode: 'full-resource' }] },
      ...(channelExtension.length ? { extension: channelExtension } : {}),
    },
  });

  /** Subscribes, waits for the handshake and for `active`; answers the Subscription's id. */
  async function activeTopicSubscription(
    path: string,
    family: string,
    channelExtension: unknown[] = [],
  ): Promise<string> {
    const sub = await postResource(t, project.adminToken, topicSubscription(path, family, channelExtension));
    expect(sub.statusCode, sub.body).toBe(201);
    const id = sub.json().id as string;
    await rx.waitFor(1, { path, timeoutMs: 20_000 });
    for (let i = 0; i < 200; i++) {
      const read = await t.request({
        method: 'GET',
        url: `${t.fhir}/Subscription/${id}`,
        token: project.adminToken,
      });
      if (read.json().status === 'active') return id;
      await sleep(50);
    }
    throw new Error('the subscription did not become active');
  }

  /** The event notifications on `path` once they carry `n` events in all (the handshake left out). */
  async function eventsOn(path: string, n: number): Promise<ReturnType<typeof readNotification>[]> {
    for (let i = 0; i < 600; i++) {
      const got = rx.received
        .filter((r) => r.path === path)
        .map(readNotification)
        .filter((x) => x.type === 'event-notification');
      if (got.reduce((k, x) => k + x.events.length, 0) >= n) return got;
      await sleep(50);
    }
    throw new Error(`fewer than ${n} events arrived on ${path}`);
  }

  it('sends a burst of writes in fewer POSTs than events, each event once, numbered in order', async () => {
    const N = 25;
    await activeTopicSubscription('/burst', 'Burst');
    const made = await postBundle(
      t,
      project.adminToken,
      'transaction',
      Array.from({ length: N }, (_, i) => ({
        resource: { resourceType: 'Patient', name: [{ family: 'Burst', given: [`P${i}`] }] },
        request: { method: 'POST', url: 'Patient' },
      })),
    );
    expect(made.statusCode, made.body.slice(0, 300)).toBe(200);
    const ids = (made.json().entry as { response: { location: string } }[]).map(
      (e) => e.response.location.split('/')[1] as string,
    );
    const got = await eventsOn('/burst', N);
    await sleep(300);
    const posts = rx.received.filter((r) => r.path === '/burst').slice(1);
    expect(posts.length).toBe(got.length);
    expect(posts.length).toBeLessThan(N);
    const events = got.flatMap((x) => x.events);
    expect(events.map((e) => e.n)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    expect(new Set(events.map((e) => e.focus))).toEqual(new Set(ids));
    for (const [i, note] of got.entries()) {
      const last = note.events.at(-1)?.n ?? 0;
      // The count a subscriber checks for gaps (the IG's errors.html) is that of the last event carried.
      expect(note.since).toBe(last);
      expect(posts[i]?.headers['x-cinder-event-number']).toBe(String(last));
      // full-resource: each event's Patient is in the Bundle.
      expect(note.resources.map((r) => r.id)).toEqual(note.events.map((e) => e.focus));
    }
  });

  it('honours backport-max-count, and a slow endpoint gets the events that queued behind it in order', async () => {
    const N = 20;
    const max = [{ url: `${B}/backport-max-count`, valuePositiveInt: 3 }];
    await activeTopicSubscription('/max', 'Capped', max);
    rx.delayMs = 150;
    try {
      const writes = await Promise.all(
        Array.from({ length: N }, (_, i) =>
          postResource(t, project.adminToken, {
            resourceType: 'Patient',
            name: [{ family: 'Capped', given: [`C${i}`] }],
          }),
        ),
      );
      expect(writes.every((w) => w.statusCode === 201)).toBe(true);
      const got = await eventsOn('/max', N);
      await sleep(300);
      const events = got.flatMap((x) => x.events);
      expect(events.map((e) => e.n)).toEqual(Array.from({ length: N }, (_, i) => i + 1));
      expect(new Set(events.map((e) => e.focus))).toEqual(new Set(writes.map((w) => w.json().id as string)));
      expect(Math.max(...got.map((x) => x.events.length))).toBeLessThanOrEqual(3);
      expect(got.length).toBeLessThan(N);
    } finally {
      rx.delayMs = 0;
    }
  });

  it('still sends a classic rest-hook one POST per event, each the version that matched, in order', async () => {
    const sub = await postResource(t, project.adminToken, {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'versions',
      criteria: 'Patient?family=Versioned',
      channel: { type: 'rest-hook', endpoint: `${rx.url}/classic`, payload: 'application/fhir+json' },
    });
    expect(sub.statusCode, sub.body).toBe(201);
    rx.delayMs = 100;
    try {
      const first = await postResource(t, project.adminToken, {
        resourceType: 'Patient',
        name: [{ family: 'Versioned', given: ['v1'] }],
      });
      const id = first.json().id as string;
      // Updated in turn while the endpoint is slow: the deliverer finds several versions waiting, most of them past.
      for (let v = 2; v <= 8; v++) {
        const put = await t.request({
          method: 'PUT',
          url: `${t.fhir}/Patient/${id}`,
          token: project.adminToken,
          payload: { resourceType: 'Patient', id, name: [{ family: 'Versioned', given: [`v${v}`] }] },
        });
        expect(put.statusCode).toBe(200);
      }
      const got = await rx.waitFor(8, { path: '/classic', timeoutMs: 30_000 });
      await sleep(300);
      expect(rx.received.filter((r) => r.path === '/classic')).toHaveLength(8);
      expect(got.map((r) => r.headers['x-cinder-event-number'])).toEqual([
        '1',
        '2',
        '3',
        '4',
        '5',
        '6',
        '7',
        '8',
      ]);
      const bodies = got.map(
        (r) => JSON.parse(r.body) as { meta: { versionId: string }; name: { given: string[] }[] },
      );
      expect(bodies.map((b) => b.meta.versionId)).toEqual(['1', '2', '3', '4', '5', '6', '7', '8']);
      expect(bodies.map((b) => b.name[0]?.given[0])).toEqual([
        'v1',
        'v2',
        'v3',
        'v4',
        'v5',
        'v6',
        'v7',
        'v8',
      ]);
    } finally {
      rx.delayMs = 0;
    }
  });

  it("keeps a subscription from another project's member and from a narrowly scoped token", async () => {
    const id = await activeTopicSubscription('/guarded', 'Guarded');
    const before = (
      await t.request({ method: 'GET', url: `${t.fhir}/Subscription/${id}`, token: project.adminToken })
    ).json() as Record<string, unknown>;
    const scoped = await scopedClientToken(t, project.adminToken, project.projectId, 'system/Patient.rs');
    for (const token of [other.adminToken, other.memberToken, scoped]) {
      for (const [method, url] of [
        ['GET', `Subscription/${id}`],
        ['GET', `Subscription/${id}/$status`],
        ['GET', `Subscription/${id}/$events`],
        ['POST', `Subscription/${id}/$test-notification`],
        ['DELETE', `Subscription/${id}`],
      ] as const) {
        const res = await t.request({ method, url: `${t.fhir}/${url}`, token });
        expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeGreaterThanOrEqual(400);
        expect(res.statusCode, `${method} ${url}`).toBeLessThan(500);
        if (token !== scoped) expect(res.statusCode, `${method} ${url}`).toBe(404);
      }
      const put = await t.request({
        method: 'PUT',
        url: `${t.fhir}/Subscription/${id}`,
        token,
        payload: {
          ...before,
          channel: { ...(before.channel as object), endpoint: `${rx.url}/stolen` },
          status: 'off',
        },
      });
      expect(put.statusCode, put.body).toBeGreaterThanOrEqual(400);
      expect(put.statusCode, put.body).toBeLessThan(500);
      const search = await t.request({ method: 'GET', url: `${t.fhir}/Subscription?_id=${id}`, token });
      if (search.statusCode === 200) expect(search.json().entry ?? []).toHaveLength(0);
      else expect(search.statusCode).toBe(403);
    }
    // Nothing changed: the owner still reads it active, and it still delivers to its own endpoint only.
    const after = await t.request({
      method: 'GET',
      url: `${t.fhir}/Subscription/${id}`,
      token: project.adminToken,
    });
    expect(after.json().status).toBe('active');
    expect((after.json().channel as { endpoint: string }).endpoint).toBe(`${rx.url}/guarded`);
    const w = await postResource(t, project.adminToken, {
      resourceType: 'Patient',
      name: [{ family: 'Guarded' }],
    });
    const got = await eventsOn('/guarded', 1);
    expect(got[0]?.events[0]?.focus).toBe(w.json().id);
    expect(rx.received.filter((r) => r.path === '/stolen')).toHaveLength(0);
  });

  it('refuses a malformed backport-max-count with a 400 naming it', async () => {
    const bad: unknown[][] = [
      [{ url: `${B}/backport-max-count`, valuePositiveInt: 0 }],
      [{ url: `${B}/backport-max-count`, valuePositiveInt: -3 }],
      [{ url: `${B}/backport-max-count`, valuePositiveInt: 2.5 }],
      [{ url: `${B}/backport-max-count`, valuePositiveInt: '3' }],
      [{ url: `${B}/backport-max-count`, valueInteger: 1e12 }],
      [{ url: `${B}/backport-max-count`, valueString: 'many' }],
      [
        { url: `${B}/backport-max-count`, valuePositiveInt: 2 },
        { url: `${B}/backport-max-count`, valuePositiveInt: 3 },
      ],
    ];
    for (const ext of bad) {
      const res = await postResource(t, project.adminToken, topicSubscription('/never', 'Never', ext));
      expect(res.statusCode, `${JSON.stringify(ext)}: ${res.body}`).toBe(400);
      expect(res.json().resourceType).toBe('OperationOutcome');
    }
    const huge = await postResource(
      t,
      project.adminToken,
      topicSubscription(
        '/never',
        'Never',
        [{ url: `${B}/backport-max-count`, valuePositiveInt: 9 }].concat(
          Array.from({ length: 5000 }, () => ({ url: `${B}/backport-max-count`, valuePositiveInt: 1 })),
        ),
      ),
    );
    expect(huge.statusCode).toBeGreaterThanOrEqual(400);
    expect(huge.statusCode).toBeLessThan(500);
    expect(rx.received.filter((r) => r.path === '/never')).toHaveLength(0);
  });

  // Last: the hanging endpoints hold their workers until the 30 s timeout.
  it("delivers to another project while one project's endpoints hang", async () => {
    const hanging = ['/hang/1', '/hang/2', '/hang/3', '/hang/4'];
    rx.answer = (r) => (r.path.startsWith('/hang/') ? 'hang' : 200);
    for (const path of hanging) {
      const sub = await postResource(t, project.adminToken, {
        resourceType: 'Subscription',
        status: 'active',
        reason: 'hangs',
        criteria: 'Patient?family=Hanging',
        channel: { type: 'rest-hook', endpoint: `${rx.url}${path}` },
      });
      expect(sub.statusCode).toBe(201);
    }
    const theirs = await postResource(t, other.adminToken, {
      resourceType: 'Subscription',
      status: 'active',
      reason: 'theirs',
      criteria: 'Patient?family=Theirs',
      channel: { type: 'rest-hook', endpoint: `${rx.url}/theirs`, payload: 'application/fhir+json' },
    });
    expect(theirs.statusCode).toBe(201);
    await postResource(t, project.adminToken, { resourceType: 'Patient', name: [{ family: 'Hanging' }] });
    // Three of the four workers now wait on the hanging endpoints (the most one project may take)...
    const hung = (): number => rx.received.filter((r) => r.path.startsWith('/hang/')).length;
    for (let i = 0; i < 400 && hung() < 3; i++) await sleep(50);
    await sleep(300);
    expect(hung()).toBe(3);
    // ...and the other project's write is delivered by the fourth, long before any of them times out.
    const w = await postResource(t, other.adminToken, {
      resourceType: 'Patient',
      name: [{ family: 'Theirs' }],
    });
    const [got] = await rx.waitFor(1, { path: '/theirs', timeoutMs: 15_000 });
    expect((JSON.parse(got?.body ?? '{}') as { id: string }).id).toBe(w.json().id);
    expect(hung()).toBe(3);
  });
});
