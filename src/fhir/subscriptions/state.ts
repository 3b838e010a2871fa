// What an operation about one Subscription needs: the caller's readable Subscription, its shape and delivery state.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import type { RepoContext } from '../repository/context.js';
import { readLiveRow } from '../repository/read.js';
import type { Resource } from '../types.js';
import type { SubscriptionAuthor } from './model.js';
import { readSubscription, type SubscriptionShape } from './subscription-resource.js';

export interface DeliveryState {
  eventsCount: number;
  deliveredCount: number;
  pending: number;
  lastError: string | null;
  lastDelivery: Date | null;
  author: SubscriptionAuthor | null;
}

export interface SubscriptionView {
  id: string;
  resource: Resource;
  shape: SubscriptionShape;
  state: DeliveryState;
}

/** The Subscription as the caller may read it (read's 403/404/410), with its delivery state. */
export async function readSubscriptionView(
  db: Queryable,
  ctx: RepoContext,
  id: string,
): Promise<SubscriptionView> {
  const row = await readLiveRow(db, ctx, 'Subscription', id);
  const resource = parseJson(row.json) as Resource;
  const r = await db.query<{
    events_count: string;
    delivered_count: string;
    last_error: string | null;
    last_delivery_at: Date | null;
    author: SubscriptionAuthor | null;
    pending: number;
  }>(
    `SELECT s.events_count, s.delivered_count, s.last_error, s.last_delivery_at, s.author,
       (SELECT count(*)::int FROM subscription_events e
        WHERE e.subscription_id = s.subscription_id AND e.delivered_at IS NULL) AS pending
     FROM subscription_state s WHERE s.subscription_id = $1`,
    [row.id],
  );
  const s = r.rows[0];
  return {
    id: row.id,
    resource,
    shape: readSubscription(resource),
    state: {
      eventsCount: Number(s?.events_count ?? 0),
      deliveredCount: Number(s?.delivered_count ?? 0),
      pending: s?.pending ?? 0,
      lastError: s?.last_error ?? null,
      lastDelivery: s?.last_delivery_at ?? null,
      author: s?.author ?? null,
    },
  };
}
