// What storing a Subscription does beyond its row (API.md §8), inside the write's transaction: the checks that need
// the database (its topic, maxSubscriptionsPerProject, the endpoint's address), the record of its author, a handshake
// when a topic-based rest-hook is (re-)activated, and the end of pending events when it is turned off or deleted.
import type { Queryable } from '../../storage/db.js';
import type { Actor } from '../access.js';
import { FhirError } from '../outcome.js';
import type { Resource } from '../types.js';
import type { OutboxEvent, SubscriptionAuthor, WriteChange } from './model.js';
import { compileFor } from './registry.js';
import { assertEndpoint, readSubscription, type SubscriptionShape } from './subscription-resource.js';
import { compileTopic } from './topic.js';
import { compileFilters } from './topic-filters.js';

/** The subscription engine as the repository sees it (RepoContext.subscriptions). */
export interface SubscriptionHooks {
  /**
   * The outbox rows of a write's changes, to be stored in the write's own statement or transaction. `db` is the
   * write's transaction when it has one: the embedded database has one connection, which the transaction holds.
   */
  eventsFor(db: Queryable, changes: readonly WriteChange[]): Promise<OutboxEvent[]>;
  /** Checks and side rows of stored Subscription versions, in the write's transaction (before its rows). */
  beforeStore(tx: Queryable, writer: Writer, items: readonly StoredItem[]): Promise<void>;
  /** A Subscription deleted in this transaction: its pending events and delivery state go with it. */
  deleted(tx: Queryable, id: string): Promise<void>;
}

export interface Writer {
  actor: Actor;
  author?: string;
  allowedOutboundHosts?: readonly string[];
}

export interface StoredItem {
  resource: Resource;
  projectId: string;
}

async function assertTopic(tx: Queryable, shape: SubscriptionShape, item: StoredItem): Promise<void> {
  if (shape.form !== 'topic') return;
  const [url, version] = shape.criteria.split('|');
  const r = await tx.query<{ json: string }>(
    `SELECT content::text AS json FROM resources
     WHERE resource_type = 'SubscriptionTopic' AND project_id = $1 AND NOT deleted AND content->>'url' = $2
       AND ($3::text IS NULL OR content->>'version' = $3)
     ORDER BY last_updated DESC LIMIT 1`,
    [item.projectId, url, version ?? null],
  );
  const row = r.rows[0];
  if (!row) {
    throw new FhirError(
      'invalid',
      `Subscription.criteria names no SubscriptionTopic of this project: ${shape.criteria.slice(0, 200)}`,
      'subscription.topic-unknown',
      { expression: ['Subscription.criteria'] },
    );
  }
  const topic = compileTopic(JSON.parse(row.json) as Resource, compileFor);
  compileFilters(item.resource, topic, compileFor);
}

async function assertRoom(tx: Queryable, item: StoredItem, max: number): Promise<void> {
  const r = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM resources
     WHERE resource_type = 'Subscription' AND project_id = $1 AND NOT deleted AND content->>'status' <> 'off' AND id <> $2`,
    [item.projectId, item.resource.id],
  );
  if ((r.rows[0]?.n ?? 0) >= max) {
    throw new FhirError(
      'business-rule',
      `The project already holds ${max} Subscriptions that are not off (maxSubscriptionsPerProject)`,
      'subscription.limit',
      { status: 422 },
    );
  }
}

/** A writer's (or a reader's) access as a SubscriptionAuthor: what the notifications it gets may hold. */
export function authorOf(writer: Writer, projectId: string): SubscriptionAuthor {
  const a = writer.actor;
  return {
    projectId,
    ...(writer.author !== undefined ? { reference: writer.author } : {}),
    ...(a.membershipId !== undefined ? { membershipId: a.membershipId } : {}),
    projectAdmin: a.projectAdmin || a.superAdmin,
    superAdmin: a.superAdmin,
    ...(a.scopes ? { scopes: a.scopes } : {}),
    ...(a.patient !== undefined ? { patient: a.patient } : {}),
  };
}

/** Records the author, resets the retry state of a (re-)activated subscription, and queues or drops events. */
async function recordState(
  tx: Queryable,
  shape: SubscriptionShape,
  item: StoredItem,
  writer: Writer,
): Promise<void> {
  const id = item.resource.id as string;
  const live = shape.status === 'requested' || shape.status === 'active';
  await tx.query(
    `INSERT INTO subscription_state (subscription_id, project_id, author, heartbeat_seconds, last_sent_at)
     VALUES ($1, $2, $3::jsonb, $5, now())
     ON CONFLICT (subscription_id) DO UPDATE SET project_id = EXCLUDED.project_id, author = EXCLUDED.author,
       heartbeat_seconds = EXCLUDED.heartbeat_seconds,
       attempts = CASE WHEN $4 THEN 0 ELSE subscription_state.attempts END,
       first_failure_at = CASE WHEN $4 THEN NULL ELSE subscription_state.first_failure_at END,
       next_attempt_at = CASE WHEN $4 THEN now() ELSE subscription_state.next_attempt_at END`,
    [
      id,
      item.projectId,
      JSON.stringify(authorOf(writer, item.projectId)),
      live,
      shape.form === 'topic' ? (shape.heartbeatPeriod ?? 0) : 0,
    ],
  );
  if (shape.status === 'off') {
    // API.md §8: events that happen while a subscription is off are never delivered later, nor are those still
    // waiting when it was turned off.
    await tx.query(`DELETE FROM subscription_events WHERE subscription_id = $1 AND delivered_at IS NULL`, [
      id,
    ]);
  }
  if (shape.status === 'requested' && shape.form === 'topic' && shape.channel === 'rest-hook') {
    await tx.query(
      `DELETE FROM subscription_events WHERE subscription_id = $1 AND kind = 'handshake' AND delivered_at IS NULL`,
      [id],
    );
    await tx.query(
      `INSERT INTO subscription_events (subscription_id, project_id, kind) VALUES ($1, $2, 'handshake')`,
      [id, item.projectId],
    );
  }
}

export async function subscriptionsBeforeStore(
  tx: Queryable,
  writer: Writer,
  items: readonly StoredItem[],
  maxPerProject: number,
): Promise<void> {
  for (const item of items) {
    if (item.resource.resourceType !== 'Subscription') continue;
    const shape = readSubscription(item.resource);
    await assertEndpoint(shape, writer.allowedOutboundHosts ?? []);
    await assertTopic(tx, shape, item);
    if (shape.status !== 'off') await assertRoom(tx, item, maxPerProject);
    await recordState(tx, shape, item, writer);
  }
}

export async function subscriptionDeleted(tx: Queryable, id: string): Promise<void> {
  await tx.query(`DELETE FROM subscription_events WHERE subscription_id = $1 AND delivered_at IS NULL`, [id]);
  await tx.query(`DELETE FROM subscription_state WHERE subscription_id = $1`, [id]);
}
