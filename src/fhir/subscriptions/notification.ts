// The notification Bundle of topic-based subscriptions in R4 and its SubscriptionStatus Parameters, as the Subscriptions
// R5 Backport IG (STU 1.1) defines them: https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/notifications.html,
// StructureDefinition-backport-subscription-status-r4.html and payloads.html. Pure builders: no storage, no clock.
import { randomUUID } from 'node:crypto';
import type { Resource } from '../types.js';
import type { ContentLevel, NotificationType, TriggerInteraction } from './model.js';

const PROFILE = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
export const STATUS_PROFILE = `${PROFILE}/backport-subscription-status-r4`;
export const NOTIFICATION_PROFILE = `${PROFILE}/backport-subscription-notification-r4`;
/** Codes of SubscriptionStatus errors, e.g. `no-response` (http://terminology.hl7.org/CodeSystem/subscription-error). */
export const SUBSCRIPTION_ERROR_SYSTEM = 'http://terminology.hl7.org/CodeSystem/subscription-error';

export type SubscriptionStatusCode = 'requested' | 'active' | 'error' | 'off';

export interface CodeableConcept {
  coding?: { system?: string; code?: string; display?: string }[];
  text?: string;
}

/** A resource an event refers to; `resource` is given (full-resource content) when the author may read it. */
export interface EventResource {
  type: string;
  id: string;
  versionId?: number;
  /** The change that made this version: the entry's `request` says it (as in a history Bundle); absent: a `GET`. */
  interaction?: TriggerInteraction;
  /** The version's content; null or absent: not included (id-only, or not available), the entry still names it. */
  resource?: Resource | null;
}

export interface NotificationEvent {
  eventNumber: number | string;
  timestamp: Date;
  focus?: EventResource;
  /** Further resources of the event (the topic's notificationShape includes): `additional-context` references. */
  additionalContext?: readonly EventResource[];
}

export interface StatusInput {
  /** The FHIR base URL of the subscription's server, without a trailing slash. */
  fhirBase: string;
  subscriptionId: string;
  topicUrl?: string;
  status: SubscriptionStatusCode;
  type: NotificationType;
  /** Events since the subscription started, this notification's included (never counting handshakes, heartbeats). */
  eventsSinceStart: number | string;
  content: ContentLevel;
  events?: readonly NotificationEvent[];
  /** Errors on the subscription: a text, or a CodeableConcept (e.g. a subscription-error code). */
  errors?: readonly (string | CodeableConcept)[];
  /** Id of the Parameters (default: a new UUID). */
  id?: string;
}

export interface NotificationInput extends StatusInput {
  events: readonly NotificationEvent[];
  /** The Bundle's timestamp (default: now). */
  now?: Date;
  /** Ids of the Bundle and of its status Parameters (default: new UUIDs). */
  newId?: () => string;
}

type Parameter = { name: string; [value: string]: unknown };

const absolute = (base: string, r: { type: string; id: string }): string => `${base}/${r.type}/${r.id}`;

function eventParameter(base: string, event: NotificationEvent, content: ContentLevel): Parameter {
  const part: Parameter[] = [
    { name: 'event-number', valueString: String(event.eventNumber) },
    { name: 'timestamp', valueInstant: event.timestamp.toISOString() },
  ];
  // payloads.html: with `empty` content, focus and additional-context SHALL NOT be present.
  if (content !== 'empty') {
    if (event.focus) part.push({ name: 'focus', valueReference: { reference: absolute(base, event.focus) } });
    for (const r of event.additionalContext ?? []) {
      part.push({ name: 'additional-context', valueReference: { reference: absolute(base, r) } });
    }
  }
  return { name: 'notification-event', part };
}

/**
 * The SubscriptionStatus of R4 (a Parameters with the IG's backport-subscription-status-r4 profile): subscription,
 * topic, status, type, events-since-subscription-start, one notification-event per event, then errors, in the
 * profile's order. `topic` is left out with `empty` content (the profile: it SHOULD NOT be present then).
 */
export function statusParameters(input: StatusInput): Resource {
  const base = input.fhirBase;
  const parameter: Parameter[] = [
    { name: 'subscription', valueReference: { reference: `${base}/Subscription/${input.subscriptionId}` } },
  ];
  if (input.topicUrl !== undefined && input.content !== 'empty') {
    parameter.push({ name: 'topic', valueCanonical: input.topicUrl });
  }
  parameter.push(
    { name: 'status', valueCode: input.status },
    { name: 'type', valueCode: input.type },
    // R4 has no integer64: the profile types the count (and event numbers) as strings.
    { name: 'events-since-subscription-start', valueString: String(input.eventsSinceStart) },
  );
  for (const event of input.events ?? []) parameter.push(eventParameter(base, event, input.content));
  for (const error of input.errors ?? []) {
    parameter.push({
      name: 'error',
      valueCodeableConcept: typeof error === 'string' ? { text: error } : error,
    });
  }
  return {
    resourceType: 'Parameters',
    id: input.id ?? randomUUID(),
    meta: { profile: [STATUS_PROFILE] },
    parameter,
  };
}

/** A history entry for a resource of an event, shaped like Cinder's own history entries (request and response). */
function resourceEntry(base: string, r: EventResource, withResource: boolean): Record<string, unknown> {
  const url = `${r.type}/${r.id}`;
  const request =
    r.interaction === 'create'
      ? { method: 'POST', url: r.type }
      : r.interaction === 'update'
        ? { method: 'PUT', url }
        : r.interaction === 'delete'
          ? { method: 'DELETE', url }
          : { method: 'GET', url: r.versionId !== undefined ? `${url}/_history/${r.versionId}` : url };
  const status = r.interaction === 'create' ? '201' : r.interaction === 'delete' ? '204' : '200';
  return {
    fullUrl: `${base}/${url}`,
    ...(withResource && r.resource && r.interaction !== 'delete' ? { resource: r.resource } : {}),
    request,
    response: { status, ...(r.versionId !== undefined ? { etag: `W/"${r.versionId}"` } : {}) },
  };
}

/**
 * The notification Bundle (`history`, profile backport-subscription-notification-r4): first the status Parameters
 * (its request a GET of the subscription's `$status`, as the IG's examples), then per event its focus and additional
 * resources as `content` asks: `empty` none; `id-only` entries with fullUrl, request and response but no resource;
 * `full-resource` the same with the resource (left out when not given, e.g. a delete, as payloads.html allows). A
 * resource version named by several events is listed once.
 */
export function buildNotification(input: NotificationInput): Resource {
  const newId = input.newId ?? randomUUID;
  const base = input.fhirBase;
  const bundleId = newId();
  const statusId = input.id ?? newId();
  const entry: Record<string, unknown>[] = [
    {
      fullUrl: `urn:uuid:${statusId}`,
      resource: statusParameters({ ...input, id: statusId }),
      request: { method: 'GET', url: `${base}/Subscription/${input.subscriptionId}/$status` },
      response: { status: '200' },
    },
  ];
  if (input.content !== 'empty') {
    const seen = new Set<string>();
    for (const event of input.events) {
      for (const r of [...(event.focus ? [event.focus] : []), ...(event.additionalContext ?? [])]) {
        const key = `${r.type}/${r.id}/${r.versionId ?? ''}`;
        if (seen.has(key)) continue;
        seen.add(key);
        entry.push(resourceEntry(base, r, input.content === 'full-resource'));
      }
    }
  }
  return {
    resourceType: 'Bundle',
    id: bundleId,
    meta: { profile: [NOTIFICATION_PROFILE] },
    type: 'history',
    timestamp: (input.now ?? new Date()).toISOString(),
    entry,
  };
}
