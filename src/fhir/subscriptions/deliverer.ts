// The delivery workers of one process (API.md §8 "Delivery"): claim a subscription with pending events (a lease: one
// deliverer per subscription across every instance), number its new events in the order they were recorded, send
// them in event-number order, and on failure retry with growing delays until RETRY_WINDOW has passed, then set the
// Subscription to `error`. Nothing here runs on a request's path: a slow endpoint slows only its own subscription.
import { randomUUID } from 'node:crypto';
import { OutboundError, outboundRequest } from '../../auth/outbound.js';
import { usableMembership } from '../../auth/login-rules.js';
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { parseJson } from '../json/parse.js';
import { readSubscriptionHeaders } from '../repository/secrets.js';
import type { Resource } from '../types.js';
import type { NumberedEvent, OutboxKind, SubscriptionAuthor } from './model.js';
import type { SubscriptionRegistry } from './registry.js';
import { SUBSCRIPTIONS_CHANNEL } from './registry.js';
import { renderBundle, renderClassic } from './render.js';
import { readSubscription, type SubscriptionShape } from './subscription-resource.js';
import { setSubscriptionStatus } from './status-change.js';

export interface DelivererOptions {
  db: Db;
  signals: Signals;
  registry: SubscriptionRegistry;
  fhirBase: string;
  allowedOutboundHosts: readonly string[];
  /** Tells the instances holding a websocket subscription's sockets that events are ready (socket-hub.ts). */
  announce?: (subscriptionId: string, from: number, to: number) => Promise<void>;
  /** Tells them a heartbeat (or a test notification) is due. */
  announceHeartbeat?: (subscriptionId: string) => Promise<void>;
  log?: { warn(obj: unknown, msg: string): void; info?(obj: unknown, msg: string): void };
  clock?: () => Date;
  pollMs?: number;
  leaseMs?: number;
  concurrency?: number;
  /** First retry delay; each later one doubles, up to maxDelayMs. */
  retryBaseMs?: number;
  maxDelayMs?: number;
  /** How long failures go on being retried before the subscription is set to `error` (API.md: at least an hour). */
  retryWindowMs?: number;
  /** Deadline of one rest-hook call (API.md: 10 s). */
  timeoutMs?: number;
  /** Told, for each event notification delivered, the seconds since its event was recorded (metrics). */
  onDelivered?: (lagSeconds: number) => void;
}

export interface Deliverer {
  start(): void;
  stop(): Promise<void>;
  /** Wakes the loop now (after a commit that recorded events). */
  wake(): void;
}

interface StateRow {
  subscription_id: string;
  project_id: string;
  author: SubscriptionAuthor;
  events_count: string;
  attempts: number;
  first_failure_at: Date | null;
}

interface EventRow {
  seq: string;
  event_number: string | null;
  kind: OutboxKind;
  focus_type: string | null;
  focus_id: string | null;
  focus_version: number | null;
  created_at: Date;
}

const BATCH = 100;
const RESPONSE_LIMIT = 64 * 1024;

const toEvent = (r: EventRow): NumberedEvent => ({
  eventNumber: r.event_number === null ? null : Number(r.event_number),
  kind: r.kind,
  focusType: r.focus_type,
  focusId: r.focus_id,
  focusVersion: r.focus_version,
  createdAt: r.created_at,
});

export function createDeliverer(opts: DelivererOptions): Deliverer {
  const { db } = opts;
  const worker = randomUUID();
  const pollMs = opts.pollMs ?? 200;
  const leaseMs = opts.leaseMs ?? 30_000;
  const concurrency = opts.concurrency ?? 8;
  const retryBaseMs = opts.retryBaseMs ?? 2000;
  const maxDelayMs = opts.maxDelayMs ?? 5 * 60_000;
  const retryWindowMs = opts.retryWindowMs ?? 60 * 60_000;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const clock = opts.clock ?? (() => new Date());
  let stopping = false;
  let loop: Promise<void> | undefined;
  let wakeUp: (() => void) | undefined;
  let woken = false;
  let lastSweep = 0;
  const running = new Set<Promise<void>>();

  opts.signals.subscribe(SUBSCRIPTIONS_CHANNEL, (payload) => {
    if (payload === 'wake') wake();
  });
  function wake(): void {
    woken = true;
    wakeUp?.();
  }

  async function claim(n: number): Promise<StateRow[]> {
    const r = await db.query<StateRow>(
      `WITH pending AS (SELECT DISTINCT subscription_id FROM subscription_events WHERE delivered_at IS NULL),
       c AS (
         SELECT s.subscription_id FROM subscription_state s
         JOIN pending p ON p.subscription_id = s.subscription_id
         JOIN resources r ON r.resource_type = 'Subscription' AND r.id = s.subscription_id AND NOT r.deleted
           AND r.content->>'status' IN ('requested', 'active')
         WHERE s.next_attempt_at <= now() AND (s.lease_until IS NULL OR s.lease_until < now())
         ORDER BY s.next_attempt_at LIMIT $2
         FOR UPDATE OF s SKIP LOCKED)
       UPDATE subscription_state s SET lease_owner = $1, lease_until = now() + make_interval(secs => $3)
       FROM c WHERE s.subscription_id = c.subscription_id
       RETURNING s.subscription_id, s.project_id, s.author, s.events_count, s.attempts, s.first_failure_at`,
      [worker, n, leaseMs / 1000],
    );
    return r.rows;
  }

  const release = (id: string): Promise<unknown> =>
    db.query(
      `UPDATE subscription_state SET lease_owner = NULL, lease_until = NULL WHERE subscription_id = $1 AND lease_owner = $2`,
      [id, worker],
    );

  /** Numbers the events recorded since the last pass, in the order they were recorded; the new events_count. */
  async function number(id: string): Promise<number> {
    const r = await db.query<{ events_count: string }>(
      `WITH todo AS (
         SELECT seq, row_number() OVER (ORDER BY seq) AS n FROM subscription_events
         WHERE subscription_id = $1 AND event_number IS NULL AND kind = 'event-notification'),
       upd AS (
         UPDATE subscription_events e SET event_number = st.events_count + todo.n
         FROM todo, subscription_state st
         WHERE e.seq = todo.seq AND st.subscription_id = $1 AND st.lease_owner = $2
         RETURNING e.event_number)
       UPDATE subscription_state SET events_count = events_count + (SELECT count(*) FROM upd),
         lease_until = now() + make_interval(secs => $3)
       WHERE subscription_id = $1 AND lease_owner = $2 RETURNING events_count`,
      [id, worker, leaseMs / 1000],
    );
    const n = r.rows[0]?.events_count;
    if (n === undefined) throw new Error('lease lost');
    return Number(n);
  }

  async function authorLive(author: SubscriptionAuthor): Promise<boolean> {
    if (!author.membershipId) return true;
    const r = await db.query(
      `SELECT 1 FROM resources m, resources p WHERE m.resource_type = 'ProjectMembership' AND m.id = $1
         AND ${usableMembership('m', 'p')}`,
      [author.membershipId],
    );
    return r.rows.length > 0;
  }

  async function toError(state: StateRow, message: string): Promise<void> {
    const project = await setSubscriptionStatus(
      db,
      state.subscription_id,
      ['requested', 'active'],
      'error',
      clock(),
      message,
    );
    if (project) await opts.registry.changed(project);
    opts.log?.warn({ subscriptionId: state.subscription_id, error: message }, 'subscription set to error');
  }

  /** Marks the event delivered and the subscription's progress: one statement (one round trip per event). */
  async function delivered(state: StateRow, row: EventRow): Promise<void> {
    const done = await db.query<{ lag: number }>(
      `WITH sent AS (UPDATE subscription_events SET delivered_at = now() WHERE seq = $5
                     RETURNING extract(epoch FROM now() - created_at)::float8 AS lag),
       progress AS (UPDATE subscription_state SET delivered_count = greatest(delivered_count, coalesce($2::bigint, 0)),
         last_delivery_at = now(), last_sent_at = now(), attempts = 0, first_failure_at = NULL,
         lease_until = now() + make_interval(secs => $4)
       WHERE subscription_id = $1 AND lease_owner = $3)
       SELECT lag FROM sent`,
      [state.subscription_id, row.event_number, worker, leaseMs / 1000, row.seq],
    );
    const lag = done.rows[0]?.lag;
    if (opts.onDelivered && row.kind === 'event-notification' && lag !== undefined) opts.onDelivered(lag);
  }

  /** Records a failed attempt; false when the retry window is over (the subscription was set to error). */
  async function failed(state: StateRow, row: EventRow, why: string): Promise<boolean> {
    const attempts = state.attempts + 1;
    const firstFailure = state.first_failure_at ?? clock();
    opts.log?.warn(
      {
        subscriptionId: state.subscription_id,
        eventNumber: row.event_number === null ? undefined : Number(row.event_number),
        kind: row.kind,
        attempts,
        error: why,
      },
      'subscription delivery failed',
    );
    const delay = Math.min(maxDelayMs, retryBaseMs * 2 ** Math.min(attempts - 1, 20));
    await db.query(
      `UPDATE subscription_state SET attempts = $2, first_failure_at = $3, last_error = $4,
         next_attempt_at = now() + make_interval(secs => $5)
       WHERE subscription_id = $1`,
      [state.subscription_id, attempts, firstFailure, why.slice(0, 1000), delay / 1000],
    );
    if (clock().getTime() - firstFailure.getTime() >= retryWindowMs) {
      await toError(state, `Delivery failed for ${Math.round(retryWindowMs / 60_000)} minutes: ${why}`);
      return false;
    }
    return true;
  }

  async function post(
    state: StateRow,
    shape: SubscriptionShape,
    row: EventRow,
    body: string | undefined,
    channelHeaders: readonly [string, string][],
  ): Promise<string | undefined> {
    const headers: Record<string, string> = {};
    for (const [name, value] of channelHeaders) headers[name] = value;
    if (body !== undefined) headers['content-type'] = 'application/fhir+json';
    headers['x-cinder-subscription'] = state.subscription_id;
    headers['x-cinder-event-number'] = row.event_number ?? '0';
    if (row.kind === 'test') headers['x-cinder-notification'] = 'test';
    const deadline = Math.min(timeoutMs, (shape.timeout ?? timeoutMs / 1000) * 1000 || timeoutMs);
    try {
      const res = await outboundRequest(
        shape.endpoint as string,
        { allowedHosts: opts.allowedOutboundHosts },
        {
          method: 'POST',
          headers,
          ...(body !== undefined ? { body } : { body: '' }),
          timeoutMs: deadline,
          maxBytes: RESPONSE_LIMIT,
        },
      );
      if (res.status >= 200 && res.status < 300) return undefined;
      return `the endpoint answered ${res.status}`;
    } catch (err) {
      if (err instanceof OutboundError) return `${err.reason}${err.code ? ` (${err.code})` : ''}`;
      return (err as Error).message;
    }
  }

  async function bodyOf(
    state: StateRow,
    shape: SubscriptionShape,
    status: string,
    eventsCount: number,
    row: EventRow,
  ): Promise<string | undefined> {
    const event = toEvent(row);
    if (shape.form === 'classic') return renderClassic(db, state.author, shape, event);
    const type =
      row.kind === 'event-notification' ? 'event-notification' : row.kind === 'test' ? 'heartbeat' : row.kind;
    const bundle = await renderBundle(db, {
      fhirBase: opts.fhirBase,
      subscriptionId: state.subscription_id,
      shape,
      status,
      eventsSinceStart: eventsCount,
      author: state.author,
      type,
      events: row.kind === 'event-notification' ? [event] : [],
    });
    return JSON.stringify(bundle);
  }

  /** One pass over a claimed subscription; false when it could send nothing (it then waits before the next claim). */
  async function deliver(state: StateRow): Promise<boolean> {
    const id = state.subscription_id;
    const current = await db.query<{ json: string }>(
      `SELECT content::text AS json FROM resources WHERE resource_type = 'Subscription' AND id = $1 AND NOT deleted`,
      [id],
    );
    const json = current.rows[0]?.json;
    if (!json) return false;
    const resource = parseJson(json) as Resource;
    const shape = readSubscription(resource);
    if (shape.status !== 'requested' && shape.status !== 'active') return false;
    if (!(await authorLive(state.author))) {
      await toError(state, "The subscription's author no longer has access to the project");
      return false;
    }
    const eventsCount = await number(id);
    const r = await db.query<EventRow>(
      `SELECT seq, event_number, kind, focus_type, focus_id, focus_version, created_at FROM subscription_events
       WHERE subscription_id = $1 AND delivered_at IS NULL AND (kind <> 'event-notification' OR event_number IS NOT NULL)
       ORDER BY coalesce(event_number, 0), seq LIMIT ${BATCH}`,
      [id],
    );
    if (shape.channel === 'websocket') {
      const numbers = r.rows.filter((e) => e.event_number !== null).map((e) => Number(e.event_number));
      if (numbers.length && opts.announce)
        await opts.announce(id, Math.min(...numbers), Math.max(...numbers));
      // A heartbeat, or a test notification, which a socket receives as a heartbeat Bundle.
      if (r.rows.some((e) => e.kind === 'heartbeat' || e.kind === 'test')) await opts.announceHeartbeat?.(id);
      for (const row of r.rows) await delivered(state, row);
      return r.rows.length > 0;
    }
    let status = shape.status;
    let sent = 0;
    // The channel's headers, read once per pass (the Subscription was read once above too).
    const channelHeaders = r.rows.length ? await readSubscriptionHeaders(db, id) : [];
    for (const row of r.rows) {
      if (stopping) break;
      // A topic-based rest-hook sends nothing but its handshake until the handshake succeeded.
      if (status === 'requested' && shape.form === 'topic' && row.kind !== 'handshake') break;
      const body = await bodyOf(state, shape, status, eventsCount, row);
      const why = await post(state, shape, row, body, channelHeaders);
      if (why !== undefined) {
        await failed(state, row, why);
        return true;
      }
      sent++;
      await delivered(state, row);
      state.attempts = 0;
      state.first_failure_at = null;
      if (row.kind === 'handshake' && status === 'requested') {
        const project = await setSubscriptionStatus(db, id, ['requested'], 'active', clock());
        if (project) await opts.registry.changed(project);
        status = 'active';
      }
    }
    return sent > 0;
  }

  /** Heartbeats that are due, and events past their keeping time ($events keeps them at least 24 hours). */
  async function sweep(): Promise<void> {
    await db.query(
      `INSERT INTO subscription_events (subscription_id, project_id, kind)
       SELECT s.subscription_id, s.project_id, 'heartbeat' FROM subscription_state s
       JOIN resources r ON r.resource_type = 'Subscription' AND r.id = s.subscription_id AND NOT r.deleted
         AND r.content->>'status' = 'active'
       WHERE s.heartbeat_seconds > 0 AND s.last_sent_at < now() - make_interval(secs => s.heartbeat_seconds)
         AND NOT EXISTS (SELECT 1 FROM subscription_events e
                         WHERE e.subscription_id = s.subscription_id AND e.delivered_at IS NULL)`,
    );
    if (Date.now() - lastSweep > 10 * 60_000) {
      lastSweep = Date.now();
      await db.query(
        `DELETE FROM subscription_events WHERE delivered_at IS NOT NULL AND created_at < now() - interval '48 hours'`,
      );
    }
  }

  async function run(state: StateRow): Promise<void> {
    try {
      if (!(await deliver(state))) {
        await db.query(
          `UPDATE subscription_state SET next_attempt_at = now() + interval '1 second' WHERE subscription_id = $1`,
          [state.subscription_id],
        );
      }
    } catch (err) {
      opts.log?.warn({ subscriptionId: state.subscription_id, err }, 'subscription delivery pass failed');
    } finally {
      await release(state.subscription_id).catch(() => undefined);
    }
  }

  async function tick(): Promise<boolean> {
    await sweep();
    const room = concurrency - running.size;
    if (room <= 0) return false;
    const claimed = await claim(room);
    for (const state of claimed) {
      const p: Promise<void> = run(state).finally(() => {
        running.delete(p);
        wake();
      });
      running.add(p);
    }
    return claimed.length > 0;
  }

  async function main(): Promise<void> {
    while (!stopping) {
      woken = false;
      let busy = false;
      try {
        busy = await tick();
      } catch (err) {
        opts.log?.warn({ err }, 'subscription deliverer tick failed');
      }
      if (busy || woken || stopping) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, pollMs);
        function done(): void {
          clearTimeout(timer);
          wakeUp = undefined;
          resolve();
        }
        wakeUp = done;
      });
    }
  }

  return {
    start() {
      if (!loop) loop = main();
    },
    async stop() {
      stopping = true;
      wakeUp?.();
      await loop;
      await Promise.all([...running]);
    },
    wake,
  };
}
