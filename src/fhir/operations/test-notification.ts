// POST {fhir}/Subscription/<id>/$test-notification (a Cinder operation, API.md §8 and the console's Subscriptions
// page): queues one notification that is not an event — a classic rest-hook receives an empty POST, a topic-based
// one a `heartbeat` Bundle, both with `X-Cinder-Notification: test` — so an operator can see the channel work.
import { SUBSCRIPTIONS_CHANNEL } from '../subscriptions/registry.js';
import { FhirError, outcome } from '../outcome.js';
import { readLiveRow } from '../repository/read.js';
import { assertWrite } from '../access.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import type { OperationDefinition } from './operation.js';

export const testNotificationOperation: OperationDefinition = {
  code: 'test-notification',
  level: 'instance',
  types: ['Subscription'],
  affectsState: true,
  anyBody: true,
  async run(env, i) {
    // Sending on a subscription's behalf is a change to it: the caller must be allowed to update it.
    assertWrite(i.ctx.actor, 'Subscription', 'update');
    const row = await readLiveRow(env.db, i.ctx, 'Subscription', i.id);
    const status = (parseJson(row.json) as Resource).status;
    if (status !== 'active') {
      throw new FhirError(
        'business-rule',
        `Subscription/${i.id} is ${String(status)}; only an active subscription can be sent a test notification`,
        'subscription.test-inactive',
        { status: 422 },
      );
    }
    await env.db.query(
      `INSERT INTO subscription_events (subscription_id, project_id, kind) VALUES ($1, $2, 'test')`,
      [row.id, row.project_id],
    );
    await env.signals.publish(SUBSCRIPTIONS_CHANNEL, 'wake').catch(() => undefined);
    return {
      status: 202,
      body: outcome('information', 'informational', `A test notification to Subscription/${i.id} is queued`),
    };
  },
};
