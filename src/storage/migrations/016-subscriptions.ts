// Subscriptions (API.md §8): the outbox of events and each subscription's delivery state. A write that matches a
// subscription inserts its event rows in the write's own statement or transaction (a commit is never lost, a rollback
// never notifies); the deliverers of every instance claim one subscription at a time (lease), number its events in
// the order they were recorded and deliver them in that order. Nothing here is written on the write path except
// `subscription_events`, so writes that match the same subscription never wait for each other.
export const version = 16;
export const sql = `
CREATE TABLE subscription_state (
  subscription_id text PRIMARY KEY,
  project_id text NOT NULL,
  -- Whose read access bounds what the subscription tells (model.ts SubscriptionAuthor), recorded at each save.
  author jsonb NOT NULL,
  -- The backport-heartbeat-period of a topic-based rest-hook (0: none); a heartbeat is due when nothing was sent for it.
  heartbeat_seconds int NOT NULL DEFAULT 0,
  -- Highest event number given so far (events-since-subscription-start) and the highest delivered.
  events_count bigint NOT NULL DEFAULT 0,
  delivered_count bigint NOT NULL DEFAULT 0,
  -- Retry state of the next undelivered event: attempts so far, when the first of them failed, when to try again.
  attempts int NOT NULL DEFAULT 0,
  first_failure_at timestamptz,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  last_delivery_at timestamptz,
  last_sent_at timestamptz,
  -- One deliverer per subscription at a time, from any instance.
  lease_owner text,
  lease_until timestamptz
);

CREATE TABLE subscription_events (
  seq bigserial PRIMARY KEY,
  subscription_id text NOT NULL,
  project_id text NOT NULL,
  -- Given by the deliverer holding the subscription's lease, in seq order; null until then.
  event_number bigint,
  -- event-notification | handshake | heartbeat | test
  kind text NOT NULL DEFAULT 'event-notification',
  focus_type text,
  focus_id text,
  focus_version int,
  interaction text,
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
CREATE INDEX subscription_events_pending ON subscription_events (subscription_id, seq) WHERE delivered_at IS NULL;
CREATE INDEX subscription_events_number ON subscription_events (subscription_id, event_number);
CREATE INDEX subscription_events_created ON subscription_events (created_at);
`;
