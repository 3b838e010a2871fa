// The Subscriptions page's readers: a Subscription's form, criteria and channel, and the `$status` answer (the Backport
// IG's SubscriptionStatus Parameters with Cinder's last-delivery and pending-events extensions), as API.md §8 says.
import { describe, expect, it } from 'vitest';
import { LAST_DELIVERY, PENDING_EVENTS, parseSubscriptionStatus, summarize } from './subscriptions.js';

const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';

const status = (parameter: unknown[], extension: unknown[] = []) => ({
  resourceType: 'Parameters',
  ...(extension.length ? { extension } : {}),
  parameter,
});

describe('summarize', () => {
  it('reads a classic rest-hook Subscription', () => {
    expect(
      summarize({
        resourceType: 'Subscription',
        id: 'a1',
        status: 'error',
        error: 'The endpoint answered 500',
        criteria: 'Observation?code=http://loinc.org|8867-4',
        channel: {
          type: 'rest-hook',
          endpoint: 'https://hooks.example/in',
          payload: 'application/fhir+json',
        },
      }),
    ).toEqual({
      id: 'a1',
      form: 'classic',
      criteria: 'Observation?code=http://loinc.org|8867-4',
      filters: [],
      channelType: 'rest-hook',
      endpoint: 'https://hooks.example/in',
      content: 'application/fhir+json',
      status: 'error',
      error: 'The endpoint answered 500',
    });
  });

  it('reads a topic-based Subscription: topic canonical, filters, payload content, a backported channel type', () => {
    const s = summarize({
      resourceType: 'Subscription',
      id: 't1',
      status: 'active',
      criteria: 'http://example.org/SubscriptionTopic/encounter-start',
      _criteria: {
        extension: [
          { url: `${BACKPORT}/backport-filter-criteria`, valueString: 'Encounter?patient=Patient/p1' },
          { url: `${BACKPORT}/backport-filter-criteria`, valueString: 'Encounter?class=IMP' },
          { url: 'http://other.example/ext', valueString: 'ignored' },
        ],
      },
      channel: {
        type: 'websocket',
        payload: 'application/fhir+json',
        _payload: { extension: [{ url: `${BACKPORT}/backport-payload-content`, valueCode: 'id-only' }] },
      },
    });
    expect(s).toMatchObject({
      form: 'topic',
      criteria: 'http://example.org/SubscriptionTopic/encounter-start',
      filters: ['Encounter?patient=Patient/p1', 'Encounter?class=IMP'],
      channelType: 'websocket',
      endpoint: '',
      content: 'id-only',
      status: 'active',
      error: '',
    });
    const custom = summarize({
      resourceType: 'Subscription',
      criteria: 'urn:uuid:0f3a',
      channel: {
        type: 'rest-hook',
        _type: { extension: [{ url: `${BACKPORT}/backport-channel-type`, valueCoding: { code: 'zulip' } }] },
      },
    });
    expect(custom).toMatchObject({ form: 'topic', channelType: 'zulip', id: '', status: '' });
  });
});

describe('parseSubscriptionStatus', () => {
  const full = status(
    [
      { name: 'subscription', valueReference: { reference: 'Subscription/s1' } },
      { name: 'topic', valueCanonical: 'http://example.org/SubscriptionTopic/t' },
      { name: 'status', valueCode: 'error' },
      { name: 'type', valueCode: 'query-status' },
      { name: 'events-since-subscription-start', valueString: '42' },
      { name: 'error', valueCodeableConcept: { text: 'Endpoint answered 503 after 12 attempts' } },
      {
        name: 'error',
        valueCodeableConcept: {
          coding: [
            { system: 'http://terminology.hl7.org/CodeSystem/subscription-error', code: 'no-response' },
          ],
        },
      },
    ],
    [
      { url: LAST_DELIVERY, valueInstant: '2026-01-02T03:04:05.678Z' },
      { url: PENDING_EVENTS, valueInteger: 3 },
    ],
  );

  it('reads every field of the contract', () => {
    expect(parseSubscriptionStatus(full, 's1')).toEqual({
      subscription: 'Subscription/s1',
      topic: 'http://example.org/SubscriptionTopic/t',
      status: 'error',
      type: 'query-status',
      events: 42,
      errors: ['Endpoint answered 503 after 12 attempts', 'no-response'],
      lastDelivery: '2026-01-02T03:04:05.678Z',
      pending: 3,
    });
  });

  it('takes the event count as valueString, valueInteger64, valueUnsignedInt or valueInteger', () => {
    const events = (p: Record<string, unknown>) =>
      parseSubscriptionStatus(status([{ name: 'events-since-subscription-start', ...p }]))?.events;
    expect(events({ valueString: '7' })).toBe(7);
    expect(events({ valueInteger64: '8' })).toBe(8);
    expect(events({ valueUnsignedInt: 9 })).toBe(9);
    expect(events({ valueInteger: 0 })).toBe(0);
    expect(events({ valueString: 'many' })).toBeUndefined();
    expect(events({ valueInteger: -1 })).toBeUndefined();
  });

  it('leaves out what the answer does not say: no events, no delivery yet, no errors', () => {
    const bare = parseSubscriptionStatus(
      status([
        { name: 'status', valueCode: 'requested' },
        { name: 'type', valueCode: 'query-status' },
      ]),
    );
    expect(bare).toEqual({
      subscription: '',
      topic: '',
      status: 'requested',
      type: 'query-status',
      errors: [],
    });
    expect(bare && 'pending' in bare).toBe(false);
    expect(bare && 'lastDelivery' in bare).toBe(false);
  });

  it("reads the IG's searchset Bundle form, picking the entry of the Subscription asked about", () => {
    const other = status([
      { name: 'subscription', valueReference: { reference: 'https://x.example/fhir/R4/Subscription/s0' } },
      { name: 'status', valueCode: 'active' },
    ]);
    const mine = status([
      {
        name: 'subscription',
        valueReference: { reference: 'https://x.example/fhir/R4/Subscription/s1/_history/2' },
      },
      { name: 'status', valueCode: 'off' },
    ]);
    const bundle = {
      resourceType: 'Bundle',
      type: 'searchset',
      entry: [{ resource: other }, { resource: mine }],
    };
    expect(parseSubscriptionStatus(bundle, 's1')?.status).toBe('off');
    expect(parseSubscriptionStatus(bundle, 's9')?.status).toBe('active');
    // `1` does not pick `Subscription/s1`: the id is compared whole.
    expect(parseSubscriptionStatus(bundle, '1')?.status).toBe('active');
  });

  it('answers undefined for what is not a status (an OperationOutcome, nothing, an empty Bundle)', () => {
    expect(parseSubscriptionStatus({ resourceType: 'OperationOutcome', issue: [] })).toBeUndefined();
    expect(parseSubscriptionStatus(undefined)).toBeUndefined();
    expect(parseSubscriptionStatus('text')).toBeUndefined();
    expect(parseSubscriptionStatus({ resourceType: 'Bundle', entry: [] })).toBeUndefined();
  });
});
