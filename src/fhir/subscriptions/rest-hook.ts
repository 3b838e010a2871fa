// One rest-hook notification (API.md §8; https://hl7.org/fhir/R4/subscription.html#2.46.7.1 and the Backport IG's
// https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/channels.html#rest-hook): which pending events go into one
// POST, and the POST itself. A classic subscription is told one event per POST (R4 sends the matched resource as the
// body); a topic-based one gets several events in one notification Bundle, in event-number order, at most
// `backport-max-count` of them (StructureDefinition-backport-max-count.html) and at most MAX_EVENTS_PER_NOTIFICATION.
import { OutboundError, outboundRequest } from '../../auth/outbound.js';
import type { OutboxKind } from './model.js';
import type { SubscriptionShape } from './subscription-resource.js';

/** The most events one topic-based notification carries when the subscription sets no lower backport-max-count. */
export const MAX_EVENTS_PER_NOTIFICATION = 100;
const RESPONSE_LIMIT = 64 * 1024;

/** Events one notification of this subscription may carry. */
export function eventsPerNotification(shape: Pick<SubscriptionShape, 'form' | 'maxCount'>): number {
  if (shape.form === 'classic') return 1;
  return Math.max(1, Math.min(MAX_EVENTS_PER_NOTIFICATION, shape.maxCount ?? MAX_EVENTS_PER_NOTIFICATION));
}

/**
 * The pending rows (in delivery order) split into notifications, kept in order: consecutive events share one up to
 * `perNotification`; a handshake, heartbeat or test notification is always one of its own.
 */
export function notificationGroups<T extends { kind: OutboxKind }>(
  rows: readonly T[],
  perNotification: number,
): T[][] {
  const groups: T[][] = [];
  let open: T[] | undefined;
  for (const row of rows) {
    if (row.kind === 'event-notification' && open && open.length < perNotification) {
      open.push(row);
      continue;
    }
    const group = [row];
    groups.push(group);
    open = row.kind === 'event-notification' ? group : undefined;
  }
  return groups;
}

export interface RestHookPost {
  endpoint: string;
  allowedOutboundHosts: readonly string[];
  subscriptionId: string;
  /** The channel's own headers (channel.header), sent first. */
  channelHeaders: readonly [string, string][];
  /** X-Cinder-Event-Number: the highest event number the notification carries (0 when it carries none). */
  eventNumber: string;
  test: boolean;
  body: string | undefined;
  timeoutMs: number;
}

/** POSTs one notification; undefined when the endpoint answered 2xx, else why not (for the log and last_error). */
export async function postNotification(p: RestHookPost): Promise<string | undefined> {
  const headers: Record<string, string> = {};
  for (const [name, value] of p.channelHeaders) headers[name] = value;
  if (p.body !== undefined) headers['content-type'] = 'application/fhir+json';
  headers['x-cinder-subscription'] = p.subscriptionId;
  headers['x-cinder-event-number'] = p.eventNumber;
  if (p.test) headers['x-cinder-notification'] = 'test';
  try {
    const res = await outboundRequest(
      p.endpoint,
      { allowedHosts: p.allowedOutboundHosts },
      { method: 'POST', headers, body: p.body ?? '', timeoutMs: p.timeoutMs, maxBytes: RESPONSE_LIMIT },
    );
    if (res.status >= 200 && res.status < 300) return undefined;
    return `the endpoint answered ${res.status}`;
  } catch (err) {
    if (err instanceof OutboundError) return `${err.reason}${err.code ? ` (${err.code})` : ''}`;
    return (err as Error).message;
  }
}
