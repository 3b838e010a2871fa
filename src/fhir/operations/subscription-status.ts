// GET|POST {fhir}/Subscription/<id>/$status (Subscriptions R5 Backport IG STU 1.1,
// https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/OperationDefinition-backport-subscription-status.html): a
// searchset Bundle holding the subscription's SubscriptionStatus Parameters (`query-status`), with two Cinder
// extensions an operator wants beside it: when a notification last reached the endpoint, and how many wait.
import { randomUUID } from 'node:crypto';
import { statusParameters, type SubscriptionStatusCode } from '../subscriptions/notification.js';
import { readSubscriptionView } from '../subscriptions/state.js';
import type { Resource } from '../types.js';
import type { OperationDefinition } from './operation.js';

export const CINDER_EXTENSION = 'https://cinder.dev/fhir/StructureDefinition';

export const subscriptionStatusOperation: OperationDefinition = {
  code: 'status',
  level: 'instance',
  types: ['Subscription'],
  affectsState: false,
  definition:
    'http://hl7.org/fhir/uv/subscriptions-backport/OperationDefinition/backport-subscription-status',
  async run(env, i) {
    const view = await readSubscriptionView(env.db, i.ctx, i.id);
    const { state, shape } = view;
    const errors = [
      ...(typeof view.resource.error === 'string' ? [view.resource.error] : []),
      ...(state.lastError && state.lastError !== view.resource.error ? [state.lastError] : []),
    ];
    const status: Resource = statusParameters({
      fhirBase: i.ctx.fhirBase,
      subscriptionId: view.id,
      ...(shape.form === 'topic' ? { topicUrl: shape.criteria } : {}),
      status: (view.resource.status as SubscriptionStatusCode) ?? 'off',
      type: 'query-status',
      eventsSinceStart: state.eventsCount,
      content: shape.content === 'empty' ? 'id-only' : shape.content,
      ...(errors.length ? { errors } : {}),
    });
    status.extension = [
      ...(state.lastDelivery
        ? [
            {
              url: `${CINDER_EXTENSION}/subscription-last-delivery`,
              valueInstant: state.lastDelivery.toISOString(),
            },
          ]
        : []),
      { url: `${CINDER_EXTENSION}/subscription-pending-events`, valueInteger: state.pending },
    ];
    return {
      status: 200,
      body: {
        resourceType: 'Bundle',
        id: randomUUID(),
        type: 'searchset',
        total: 1,
        entry: [{ fullUrl: `urn:uuid:${status.id as string}`, resource: status, search: { mode: 'match' } }],
      },
    };
  },
};
