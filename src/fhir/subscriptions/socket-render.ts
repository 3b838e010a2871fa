// What a websocket bound to a subscription receives (API.md §8 "Websocket"): the same notification Bundles as a
// rest-hook of the topic form — a handshake at bind, then one Bundle per event — rendered on the instance that holds
// the socket, from the events the deliverer numbered (socket-hub.ts announces their numbers), and heartbeats.
import type { Queryable } from '../../storage/db.js';
import { parseJson } from '../json/parse.js';
import type { Resource } from '../types.js';
import type { NumberedEvent, OutboxKind, SubscriptionAuthor } from './model.js';
import { focusVersions, renderBundle } from './render.js';
import { readSubscription } from './subscription-resource.js';

interface Loaded {
  resource: Resource;
  author: SubscriptionAuthor;
  eventsCount: number;
}

async function load(db: Queryable, id: string): Promise<Loaded | undefined> {
  const r = await db.query<{ json: string; author: SubscriptionAuthor | null; events_count: string | null }>(
    `SELECT r.content::text AS json, s.author, s.events_count FROM resources r
     LEFT JOIN subscription_state s ON s.subscription_id = r.id
     WHERE r.resource_type = 'Subscription' AND r.id = $1 AND NOT r.deleted`,
    [id],
  );
  const row = r.rows[0];
  if (!row?.author) return undefined;
  const resource = parseJson(row.json) as Resource;
  if (resource.status !== 'active' && resource.status !== 'requested') return undefined;
  return { resource, author: row.author, eventsCount: Number(row.events_count ?? 0) };
}

/** The handshake sent at a bind, or a heartbeat (also a test notification); undefined when it is not live. */
export async function renderSocketStatus(
  db: Queryable,
  fhirBase: string,
  id: string,
  type: 'handshake' | 'heartbeat',
): Promise<string | undefined> {
  const s = await load(db, id);
  if (!s) return undefined;
  const bundle = await renderBundle(db, {
    fhirBase,
    subscriptionId: id,
    shape: readSubscription(s.resource),
    status: s.resource.status as string,
    eventsSinceStart: s.eventsCount,
    author: s.author,
    type,
    events: [],
  });
  return JSON.stringify(bundle);
}

/** Those of `ids` that are Subscriptions that may still notify (not deleted, `requested` or `active`). */
export async function liveSubscriptions(db: Queryable, ids: readonly string[]): Promise<Set<string>> {
  const r = await db.query<{ id: string }>(
    `SELECT id FROM resources WHERE resource_type = 'Subscription' AND id = ANY($1::text[]) AND NOT deleted
       AND content->>'status' IN ('requested', 'active')`,
    [ids],
  );
  return new Set(r.rows.map((row) => row.id));
}

export async function renderSocketEvents(
  db: Queryable,
  fhirBase: string,
  id: string,
  from: number,
  to: number,
): Promise<string[]> {
  const s = await load(db, id);
  if (!s) return [];
  const shape = readSubscription(s.resource);
  const r = await db.query<{
    event_number: string;
    kind: OutboxKind;
    focus_type: string | null;
    focus_id: string | null;
    focus_version: number | null;
    interaction: string | null;
    created_at: Date;
  }>(
    `SELECT event_number, kind, focus_type, focus_id, focus_version, interaction, created_at FROM subscription_events
     WHERE subscription_id = $1 AND event_number BETWEEN $2 AND $3 ORDER BY event_number`,
    [id, from, to],
  );
  const events: NumberedEvent[] = r.rows.map((e) => ({
    eventNumber: Number(e.event_number),
    kind: e.kind,
    focusType: e.focus_type,
    focusId: e.focus_id,
    focusVersion: e.focus_version,
    ...(e.interaction ? { interaction: e.interaction as NonNullable<NumberedEvent['interaction']> } : {}),
    createdAt: e.created_at,
  }));
  // The versions of the whole range in one statement; then one message per event, as before.
  const versions = shape.content === 'full-resource' ? await focusVersions(db, s.author, events) : undefined;
  const out: string[] = [];
  for (const event of events) {
    const bundle = await renderBundle(db, {
      fhirBase,
      subscriptionId: id,
      shape,
      status: s.resource.status as string,
      eventsSinceStart: event.eventNumber ?? 0,
      author: s.author,
      type: 'event-notification',
      events: [event],
      ...(versions ? { versions } : {}),
    });
    out.push(JSON.stringify(bundle));
  }
  return out;
}
