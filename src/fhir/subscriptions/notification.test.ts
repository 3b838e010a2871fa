// The builders against the facts of the Backport IG's R4 examples (STU 1.1: Bundle r4-notification-full-resource,
// -multi-resource, -handshake, -error; Parameters r4-notification-status): the same subscription, topic, ids, order.
import { describe, expect, it } from 'vitest';
import type { Resource } from '../types.js';
import {
  buildNotification,
  NOTIFICATION_PROFILE,
  STATUS_PROFILE,
  statusParameters,
  SUBSCRIPTION_ERROR_SYSTEM,
  type NotificationInput,
} from './notification.js';

const BASE = 'https://example.org/fhir';
const TOPIC = 'http://hl7.org/SubscriptionTopic/admission';
const ENCOUNTER_ID = '86009987-eabe-42bf-8c02-b112b18cb616';
const PATIENT_ID = '1599eb66-431a-447c-a3de-6897fe9ae9a1';
const encounter: Resource = {
  resourceType: 'Encounter',
  id: ENCOUNTER_ID,
  status: 'in-progress',
  class: { system: 'http://terminology.hl7.org/CodeSystem/v3-ActCode', code: 'VR' },
  subject: { reference: `${BASE}/Patient/${PATIENT_ID}`, display: 'Example Patient' },
};
const patient: Resource = { resourceType: 'Patient', id: PATIENT_ID, active: true };
// The examples' instant has 7 decimals; a JS Date keeps milliseconds.
const TIMESTAMP = new Date('2020-05-29T11:44:13.188-05:00');

/** Ids handed out in order: the Bundle's, then its status Parameters'. */
const ids = (...list: string[]) => {
  const queue = [...list];
  return () => queue.shift() as string;
};

const input = (over: Partial<NotificationInput>): NotificationInput => ({
  fhirBase: BASE,
  subscriptionId: 'admission',
  topicUrl: TOPIC,
  status: 'active',
  type: 'event-notification',
  eventsSinceStart: 2,
  content: 'full-resource',
  events: [
    {
      eventNumber: 2,
      timestamp: TIMESTAMP,
      focus: { type: 'Encounter', id: ENCOUNTER_ID, interaction: 'create', resource: encounter },
    },
  ],
  now: TIMESTAMP,
  ...over,
});

const statusEntry = (id: string, parameter: unknown[]) => ({
  fullUrl: `urn:uuid:${id}`,
  resource: { resourceType: 'Parameters', id, meta: { profile: [STATUS_PROFILE] }, parameter },
  request: { method: 'GET', url: `${BASE}/Subscription/admission/$status` },
  response: { status: '200' },
});

const head = (status: string, type: string, since: string) => [
  { name: 'subscription', valueReference: { reference: `${BASE}/Subscription/admission` } },
  { name: 'topic', valueCanonical: TOPIC },
  { name: 'status', valueCode: status },
  { name: 'type', valueCode: type },
  { name: 'events-since-subscription-start', valueString: since },
];

const event2 = (...more: unknown[]) => ({
  name: 'notification-event',
  part: [
    { name: 'event-number', valueString: '2' },
    { name: 'timestamp', valueInstant: '2020-05-29T16:44:13.188Z' },
    ...more,
  ],
});
const focus = { name: 'focus', valueReference: { reference: `${BASE}/Encounter/${ENCOUNTER_ID}` } };

describe('notification Bundles (Backport IG, R4)', () => {
  it('full-resource: as the r4-notification-full-resource example', () => {
    const bundle = buildNotification(
      input({ newId: ids('r4-notification-full-resource', '2d5afc69-6ef2-420f-a8d1-8500c99eb96c') }),
    );
    expect(bundle).toEqual({
      resourceType: 'Bundle',
      id: 'r4-notification-full-resource',
      meta: { profile: [NOTIFICATION_PROFILE] },
      type: 'history',
      timestamp: '2020-05-29T16:44:13.188Z',
      entry: [
        statusEntry('2d5afc69-6ef2-420f-a8d1-8500c99eb96c', [
          ...head('active', 'event-notification', '2'),
          event2(focus),
        ]),
        {
          fullUrl: `${BASE}/Encounter/${ENCOUNTER_ID}`,
          resource: encounter,
          request: { method: 'POST', url: 'Encounter' },
          response: { status: '201' },
        },
      ],
    });
    // Property order as in the example (JSON readers that stream care): status first, then the focus.
    expect(Object.keys(bundle)).toEqual(['resourceType', 'id', 'meta', 'type', 'timestamp', 'entry']);
    const entries = bundle.entry as Record<string, unknown>[];
    expect(Object.keys(entries[1] as object)).toEqual(['fullUrl', 'resource', 'request', 'response']);
  });

  it('full-resource with additional context: as the r4-notification-multi-resource example', () => {
    const bundle = buildNotification(
      input({
        newId: ids('b', '7bd91d26-c951-4520-9ac6-67f41bfbe897'),
        events: [
          {
            eventNumber: 2,
            timestamp: TIMESTAMP,
            focus: { type: 'Encounter', id: ENCOUNTER_ID, interaction: 'create', resource: encounter },
            additionalContext: [{ type: 'Patient', id: PATIENT_ID, resource: patient }],
          },
        ],
      }),
    );
    const context = {
      name: 'additional-context',
      valueReference: { reference: `${BASE}/Patient/${PATIENT_ID}` },
    };
    expect((bundle.entry as unknown[])[0]).toEqual(
      statusEntry('7bd91d26-c951-4520-9ac6-67f41bfbe897', [
        ...head('active', 'event-notification', '2'),
        event2(focus, context),
      ]),
    );
    expect((bundle.entry as unknown[])[2]).toEqual({
      fullUrl: `${BASE}/Patient/${PATIENT_ID}`,
      resource: patient,
      request: { method: 'GET', url: `Patient/${PATIENT_ID}` },
      response: { status: '200' },
    });
  });

  it('id-only: focus references, entries that name the resources without them', () => {
    const bundle = buildNotification(
      input({
        content: 'id-only',
        newId: ids('b', '292d3c72-edc1-4d8a-afaa-d85e19c7f563'),
        events: [
          {
            eventNumber: 2,
            timestamp: TIMESTAMP,
            focus: {
              type: 'Encounter',
              id: ENCOUNTER_ID,
              versionId: 3,
              interaction: 'update',
              resource: encounter,
            },
          },
        ],
      }),
    );
    expect(bundle.entry).toEqual([
      statusEntry('292d3c72-edc1-4d8a-afaa-d85e19c7f563', [
        ...head('active', 'event-notification', '2'),
        event2(focus),
      ]),
      {
        fullUrl: `${BASE}/Encounter/${ENCOUNTER_ID}`,
        request: { method: 'PUT', url: `Encounter/${ENCOUNTER_ID}` },
        response: { status: '200', etag: 'W/"3"' },
      },
    ]);
  });

  it('empty: no focus, no topic, no entries beyond the status', () => {
    const bundle = buildNotification(
      input({ content: 'empty', newId: ids('b', '9e41ff6d-5be6-4e6a-8b85-abd4e7f58400') }),
    );
    expect(bundle.entry).toEqual([
      statusEntry('9e41ff6d-5be6-4e6a-8b85-abd4e7f58400', [
        ...head('active', 'event-notification', '2').filter((p) => p.name !== 'topic'),
        event2(),
      ]),
    ]);
  });

  it('handshake and query-status with an error: as the r4-notification-handshake and -error examples', () => {
    const handshake = buildNotification(
      input({
        status: 'requested',
        type: 'handshake',
        eventsSinceStart: 0,
        events: [],
        newId: ids('h', '63c28e8a-f402-43e4-beb2-75b1c0f6833f'),
      }),
    );
    expect(handshake.entry).toEqual([
      statusEntry('63c28e8a-f402-43e4-beb2-75b1c0f6833f', head('requested', 'handshake', '0')),
    ]);

    const error = buildNotification(
      input({
        status: 'error',
        type: 'query-status',
        eventsSinceStart: 3,
        events: [],
        errors: [
          { coding: [{ system: SUBSCRIPTION_ERROR_SYSTEM, code: 'no-response' }] },
          'Endpoint answered 503',
        ],
        newId: ids('e', '7bd91d26-c951-4520-9ac6-67f41bfbe897'),
      }),
    );
    expect(error.entry).toEqual([
      statusEntry('7bd91d26-c951-4520-9ac6-67f41bfbe897', [
        ...head('error', 'query-status', '3'),
        {
          name: 'error',
          valueCodeableConcept: { coding: [{ system: SUBSCRIPTION_ERROR_SYSTEM, code: 'no-response' }] },
        },
        { name: 'error', valueCodeableConcept: { text: 'Endpoint answered 503' } },
      ]),
    ]);
  });

  it('query-event: every event in order, each resource version once, deletes without content', () => {
    const t = (s: string) => new Date(`2024-01-01T00:00:0${s}Z`);
    const e1 = { resourceType: 'Encounter', id: 'a', meta: { versionId: '1' } };
    const bundle = buildNotification(
      input({
        type: 'query-event',
        eventsSinceStart: '9007199254740993',
        newId: ids('q', 's'),
        events: [
          {
            eventNumber: '9007199254740991',
            timestamp: t('1'),
            focus: { type: 'Encounter', id: 'a', versionId: 1, interaction: 'create', resource: e1 },
          },
          {
            eventNumber: '9007199254740992',
            timestamp: t('2'),
            focus: { type: 'Encounter', id: 'a', versionId: 1, interaction: 'create', resource: e1 },
          },
          {
            eventNumber: '9007199254740993',
            timestamp: t('3'),
            focus: { type: 'Encounter', id: 'a', versionId: 2, interaction: 'delete', resource: null },
          },
        ],
      }),
    );
    const entries = bundle.entry as {
      fullUrl: string;
      resource?: unknown;
      request: unknown;
      response: unknown;
    }[];
    const params = (
      entries[0]?.resource as {
        parameter: { name: string; valueString?: string; part?: { valueString?: string }[] }[];
      }
    ).parameter;
    expect(
      params.filter((p) => p.name === 'notification-event').map((p) => p.part?.[0]?.valueString),
    ).toEqual(['9007199254740991', '9007199254740992', '9007199254740993']);
    expect(params.find((p) => p.name === 'events-since-subscription-start')?.valueString).toBe(
      '9007199254740993',
    );
    expect(entries.slice(1)).toEqual([
      {
        fullUrl: `${BASE}/Encounter/a`,
        resource: e1,
        request: { method: 'POST', url: 'Encounter' },
        response: { status: '201', etag: 'W/"1"' },
      },
      {
        fullUrl: `${BASE}/Encounter/a`,
        request: { method: 'DELETE', url: 'Encounter/a' },
        response: { status: '204', etag: 'W/"2"' },
      },
    ]);
  });

  it('statusParameters alone, for $status', () => {
    const p = statusParameters({
      fhirBase: BASE,
      subscriptionId: 'admission',
      topicUrl: TOPIC,
      status: 'active',
      type: 'query-status',
      eventsSinceStart: 12,
      content: 'id-only',
      id: 'x',
    });
    expect(p).toEqual({
      resourceType: 'Parameters',
      id: 'x',
      meta: { profile: [STATUS_PROFILE] },
      parameter: head('active', 'query-status', '12'),
    });
    expect(
      statusParameters({
        fhirBase: BASE,
        subscriptionId: 'a',
        status: 'off',
        type: 'heartbeat',
        eventsSinceStart: 0,
        content: 'empty',
      }).id,
    ).toMatch(/^[0-9a-f-]{36}$/);
  });
});
