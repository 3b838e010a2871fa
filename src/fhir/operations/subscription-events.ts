// GET|POST {fhir}/Subscription/<id>/$events (Subscriptions R5 Backport IG STU 1.1,
// https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/OperationDefinition-backport-subscription-events.html): the
// past events of a subscription (kept at least 24 hours) as a `query-event` notification Bundle, between
// `eventsSinceNumber` and `eventsUntilNumber`, with the content the caller asks (never more than the subscription's
// author may read).
import { FhirError } from '../outcome.js';
import type { ContentLevel, NumberedEvent, OutboxKind } from '../subscriptions/model.js';
import { renderBundle } from '../subscriptions/render.js';
import { readSubscriptionView } from '../subscriptions/state.js';
import { authorOf } from '../subscriptions/subscription-writes.js';
import { operationParams } from './async-start.js';
import type { OperationDefinition } from './operation.js';

/** The most events one answer holds; a client pages with eventsSinceNumber. */
const MAX_EVENTS = 100;

function number(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{1,15}$/.test(value))
    throw new FhirError('invalid', `${name} must be a non-negative integer`, 'subscription.events-number');
  return Number(value);
}

export const subscriptionEventsOperation: OperationDefinition = {
  code: 'events',
  level: 'instance',
  types: ['Subscription'],
  affectsState: false,
  definition:
    'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-events',
  async run(env, i) {
    const q = operationParams(i.request);
    const since = number(q.eventsSinceNumber?.[0], 'eventsSinceNumber') ?? 1;
    const until = number(q.eventsUntilNumber?.[0], 'eventsUntilNumber');
    const asked = q.content?.[0];
    if (asked !== undefined && asked !== 'empty' && asked !== 'id-only' && asked !== 'full-resource')
      throw new FhirError(
        'invalid',
        'content must be empty, id-only or full-resource',
        'subscription.events-content',
      );
    const view = await readSubscriptionView(env.db, i.ctx, i.id);
    const r = await env.db.query<{
      event_number: string;
      kind: OutboxKind;
      focus_type: string | null;
      focus_id: string | null;
      focus_version: number | null;
      created_at: Date;
    }>(
      `SELECT event_number, kind, focus_type, focus_id, focus_version, created_at FROM subscription_events
       WHERE subscription_id = $1 AND event_number >= $2 AND ($3::bigint IS NULL OR event_number <= $3)
       ORDER BY event_number LIMIT ${MAX_EVENTS}`,
      [view.id, since, until ?? null],
    );
    const events: NumberedEvent[] = r.rows.map((e) => ({
      eventNumber: Number(e.event_number),
      kind: e.kind,
      focusType: e.focus_type,
      focusId: e.focus_id,
      focusVersion: e.focus_version,
      createdAt: e.created_at,
    }));
    // The caller asks: what the answer holds is what the caller may read (its project, scopes and compartment).
    const author = authorOf(i.ctx, i.ctx.actor.projectId);
    const bundle = await renderBundle(env.db, {
      fhirBase: i.ctx.fhirBase,
      subscriptionId: view.id,
      shape: view.shape,
      status: (view.resource.status as string) ?? 'off',
      eventsSinceStart: view.state.eventsCount,
      author,
      type: 'query-event',
      events,
      content: (asked as ContentLevel | undefined) ?? view.shape.content,
    });
    return { status: 200, body: bundle };
  },
};
