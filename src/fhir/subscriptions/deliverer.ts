// The delivery workers of one process (API.md §8 "Delivery"): claim a subscription with pending events (a lease: one
// deliverer per subscription across every instance), number its new events in the order they were recorded, send
// a batch of them per pass in event-number order (several events per notification where the subscription allows,
// rest-hook.ts), and on failure retry with growing delays until RETRY_WINDOW has passed, then set the Subscription
// to `error`. Nothing here runs on a request's path: a slow endpoint slows only its own subscription, and claims
// share the workers among projects (no project takes every worker; the least served project goes first).
import { randomUUID } from 'node:crypto';
import { usableMembership } from '../../auth/login-rules.js';
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { parseJson } from '../json/parse.js';
import { readSubscriptionHeaders } from '../repository/secrets.js';
import type { Resource } from '../types.js';
import type { NumberedEvent, OutboxKind, SubscriptionAuthor } from './model.js';
import type { SubscriptionRegistry } from './registry.js';
import { SUBSCRIPTIONS_CHANNEL } from './registry.js';
import { focusVersions, renderBundle, renderClassic } from './render.js';
import { eventsPerNotification, notificationGroups, postNotification } from './rest-hook.js';
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
  interaction: NumberedEvent['interaction'] | null;
  created_at: Date;
}

/** Pending events one pass claims of a subscription (in order); the rest wait for its next pass. */
const BATCH = 100;

const toEvent = (r: EventRow): NumberedEvent => ({
  eventNumber: r.event_number === null ? null : Number(r.event_number),
  kind: r.kind,
  focusType: r.focus_type,
  focusId: r.focus_id,
  focusVersion: r.focus_version,
  ...(r.interaction ? { interaction: r.interaction } : {}),
  createdAt: r.created_at,
});

/** The highest event number of these rows (0 when none is an event). */
const highest = (rows: readonly EventRow[]): number =>
  rows.reduce((n, r) => (r.event_number === null ? n : Math.max(n, Number(r.event_number))), 0);

export function createDeliverer(opts: DelivererOptions): Deliverer {
  const { db } = opts;
  const worker = randomUUID();
  const pollMs = opts.pollMs ?? 200;
  const leaseMs = opts.leaseMs ?? 30_000;
  const concurrency = opts.concurrency ?? 8;
  // A project may hold at most this many of the workers at once: the rest stay free for other projects' subscriptions
  // however many of its endpoints hang until their timeout.
  const perProject = Math.max(1, concurrency - Math.floor(concurrency / 4));
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
  let lastHeartbeatSweep = 0;
  const running = new Set<Promise<void>>();
  /** Passes running in this process per project. */
  const busy = new Map<string, number>();

  opts.signals.subscribe(SUBSCRIPTIONS_CHANNEL, (payload) => {
    if (payload === 'wake') wake();
  });
  function wake(): void {
    woken = true;
    wakeUp?.();
  }

  /**
   * Leases up to n due subscriptions with pending events: projects with the fewest passes running here first (then
   * each project's longest waiting), none beyond perProject.
   */
  async function claim(n: number): Promise<StateRow[]> {
    const load = JSON.stringify([...busy].map(([project_id, k]) => ({ project_id, k })));
    const r = await db.query<StateRow>(
      `WITH pending AS (SELECT DISTINCT subscription_id FROM subscription_events WHERE delivered_at IS NULL),
       due AS (
         SELECT s.subscription_id, s.project_id, s.next_attempt_at,
           row_number() OVER (PARTITION BY s.project_id ORDER BY s.next_attempt_at) AS rank
         FROM subscription_state s
         JOIN pending p ON p.subscription_id = s.subscription_id
         JOIN resources r ON r.resource_type = 'Subscription' AND r.id = s.subscription_id AND NOT r.deleted
           AND r.content->>'status' IN ('requested', 'active')
         WHERE s.next_attempt_at <= now() AND (s.lease_until IS NULL OR s.lease_until < now())),
       c AS (
         SELECT s.subscription_id FROM subscription_state s
         JOIN due d ON d.subscription_id = s.subscription_id
         LEFT JOIN json_to_recordset($4::json) AS b(project_id text, k int) ON b.project_id = d.project_id
         WHERE d.rank + coalesce(b.k, 0) <= $5
           AND s.next_attempt_at <= now() AND (s.lease_until IS NULL OR s.lease_until < now())
         ORDER BY d.rank + coalesce(b.k, 0), d.next_attempt_at LIMIT $2
         FOR UPDATE OF s SKIP LOCKED)
       UPDATE subscription_state s SET lease_owner = $1, lease_until = now() + make_interval(secs => $3)
       FROM c WHERE s.subscription_id = c.subscription_id
       RETURNING s.subscription_id, s.project_id, s.author, s.events_count, s.attempts, s.first_failure_at`,
      [worker, n, leaseMs / 1000, load, perProject],
    );
    return r.rows;
  }

  // Back of the queue (next_attempt_at now, unless a failure put it later): a subscription that always has events
  // takes its turn after the others that wait, instead of being claimed first again.
  // A pass that could send nothing waits a second before its subscription is claimed again.
  const release = (id: string, idle: boolean): Promise<unknown> =>
    db.query(
      `UPDATE subscription_state SET lease_owner = NULL, lease_until = NULL,
         next_attempt_at = CASE WHEN $3 THEN now() + interval '1 second' ELSE greatest(next_attempt_at, now()) END
       WHERE subscription_id = $1 AND lease_owner = $2`,
      [id, worker, idle],
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

  /**
   * Marks these events delivered and the subscription's progress, renewing the lease: one statement however many
   * events (at least once: a crash before it sends them again). Throws when the lease was lost meanwhile, so that
   * the pass stops before another instance's deliverer and this one send the same events.
   */
  async function delivered(state: StateRow, rows: readonly EventRow[]): Promise<void> {
    if (rows.length === 0) return;
    const done = await db.query<{ held: number; lags: number[] | null }>(
      `WITH sent AS (UPDATE subscription_events SET delivered_at = now() WHERE seq = ANY($5::bigint[])
                     RETURNING kind, extract(epoch FROM now() - created_at)::float8 AS lag),
       progress AS (UPDATE subscription_state SET delivered_count = greatest(delivered_count, $2::bigint),
         last_delivery_at = now(), last_sent_at = now(), attempts = 0, first_failure_at = NULL,
         lease_until = now() + make_interval(secs => $4)
       WHERE subscription_id = $1 AND lease_owner = $3 RETURNING 1)
       SELECT (SELECT count(*) FROM progress)::int AS held,
         (SELECT array_agg(lag) FROM sent WHERE kind = 'event-notification') AS lags`,
      [state.subscription_id, highest(rows), worker, leaseMs / 1000, rows.map((r) => r.seq)],
    );
    const row = done.rows[0];
    if (opts.onDelivered) for (const lag of row?.lags ?? []) opts.onDelivered(lag);
    if (!row?.held) throw new Error('lease lost');
  }

  /** Renews the lease without other change (a long pass); throws when it was lost. */
  async function renew(state: StateRow): Promise<void> {
    const r = await db.query(
      `UPDATE subscription_state SET lease_until = now() + make_interval(secs => $3)
       WHERE subscription_id = $1 AND lease_owner = $2 RETURNING 1`,
      [state.subscription_id, worker, leaseMs / 1000],
    );
    if (r.rows.length === 0) throw new Error('lease lost');
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

  /** The body of one notification: a classic one's single event, or a topic Bundle of the group's events. */
  async function bodyOf(
    state: StateRow,
    shape: SubscriptionShape,
    status: string,
    eventsCount: number,
    group: readonly EventRow[],
    versions: ReadonlyMap<string, Resource | null>,
  ): Promise<string | undefined> {
    const first = group[0] as EventRow;
    if (shape.form === 'classic') return renderClassic(shape, toEvent(first), versions);
    const type =
      first.kind === 'event-notification'
        ? 'event-notification'
        : first.kind === 'test'
          ? 'heartbeat'
          : first.kind;
    const events = first.kind === 'event-notification' ? group.map(toEvent) : [];
    const bundle = await renderBundle(db, {
      fhirBase: opts.fhirBase,
      subscriptionId: state.subscription_id,
      shape,
      status,
      // The IG's errors.html: a subscriber detects a missed event by this count, so it is the count up to the last
      // event this notification carries (not the events numbered since and still waiting).
      eventsSinceStart: events.length ? highest(group) : eventsCount,
      author: state.author,
      type,
      events,
      versions,
    });
    return JSON.stringify(bundle);
  }

  /** One pass over a claimed subscription; false when it could send nothing (it then waits before the next claim). */
  async function deliver(state: StateRow): Promise<boolean> {
    const id = state.subscription_id;
    // The Subscription as stored, and whether its author's membership is still usable: one round trip.
    const current = await db.query<{ json: string; author_live: boolean }>(
      `SELECT content::text AS json, ($2::text IS NULL OR EXISTS (
         SELECT 1 FROM resources m, resources p WHERE m.resource_type = 'ProjectMembership' AND m.id = $2
           AND ${usableMembership('m', 'p')})) AS author_live
       FROM resources WHERE resource_type = 'Subscription' AND id = $1 AND NOT deleted`,
      [id, state.author.membershipId ?? null],
    );
    const json = current.rows[0]?.json;
    if (!json) return false;
    const resource = parseJson(json) as Resource;
    const shape = readSubscription(resource);
    if (shape.status !== 'requested' && shape.status !== 'active') return false;
    if (!current.rows[0]?.author_live) {
      await toError(state, "The subscription's author no longer has access to the project");
      return false;
    }
    const eventsCount = await number(id);
    const r = await db.query<EventRow>(
      `SELECT seq, event_number, kind, focus_type, focus_id, focus_version, interaction, created_at
       FROM subscription_events
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
      await delivered(state, r.rows);
      return r.rows.length > 0;
    }
    return sendRestHook(state, shape, eventsCount, r.rows);
  }

  /**
   * Sends a rest-hook's claimed rows as notifications, in order. Marked delivered together (one statement) at the
   * end, before a failure is recorded, at the handshake, and whenever a third of the lease has gone by; the pass stops
   * starting notifications after half the lease, and the subscription takes its turn again after the others.
   */
  async function sendRestHook(
    state: StateRow,
    shape: SubscriptionShape,
    eventsCount: number,
    rows: readonly EventRow[],
  ): Promise<boolean> {
    const id = state.subscription_id;
    if (rows.length === 0) return false;
    let status = shape.status;
    let sent = 0;
    // The channel's headers, and the versions the events name, read once per pass (the Subscription was too).
    const channelHeaders = await readSubscriptionHeaders(db, id);
    const versions =
      shape.content === 'full-resource'
        ? await focusVersions(
            db,
            state.author,
            rows.filter((e) => e.kind === 'event-notification').map(toEvent),
          )
        : new Map<string, Resource | null>();
    const deadline = Math.min(timeoutMs, (shape.timeout ?? timeoutMs / 1000) * 1000 || timeoutMs);
    const started = Date.now();
    let renewed = started;
    let done: EventRow[] = [];
    const flush = async (): Promise<void> => {
      if (done.length) await delivered(state, done);
      else await renew(state);
      done = [];
      renewed = Date.now();
    };
    for (const group of notificationGroups(rows, eventsPerNotification(shape))) {
      if (stopping || Date.now() - started > leaseMs / 2) break;
      const first = group[0] as EventRow;
      // A topic-based rest-hook sends nothing but its handshake until the handshake succeeded.
      if (status === 'requested' && shape.form === 'topic' && first.kind !== 'handshake') break;
      if (Date.now() - renewed > leaseMs / 3) await flush();
      const why = await postNotification({
        endpoint: shape.endpoint as string,
        allowedOutboundHosts: opts.allowedOutboundHosts,
        subscriptionId: id,
        channelHeaders,
        eventNumber: String(highest(group)),
        test: first.kind === 'test',
        body: await bodyOf(state, shape, status, eventsCount, group, versions),
        timeoutMs: deadline,
      });
      if (why !== undefined) {
        if (done.length) await flush();
        await failed(state, first, why);
        return true;
      }
      sent += group.length;
      done.push(...group);
      state.attempts = 0;
      state.first_failure_at = null;
      if (first.kind === 'handshake' && status === 'requested') {
        await flush();
        const project = await setSubscriptionStatus(db, id, ['requested'], 'active', clock());
        if (project) await opts.registry.changed(project);
        status = 'active';
      }
    }
    if (done.length) await flush();
    return sent > 0;
  }

  /** Heartbeats that are due, and events past their keeping time ($events keeps them at least 24 hours). */
  async function sweep(): Promise<void> {
    // Heartbeat periods are whole seconds: looking once a second is enough, not before every claim of a busy loop.
    if (Date.now() - lastHeartbeatSweep < 1000) return;
    lastHeartbeatSweep = Date.now();
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
    let idle = false;
    try {
      idle = !(await deliver(state));
    } catch (err) {
      opts.log?.warn({ subscriptionId: state.subscription_id, err }, 'subscription delivery pass failed');
    } finally {
      await release(state.subscription_id, idle).catch(() => undefined);
    }
  }

  async function tick(): Promise<boolean> {
    await sweep();
    const room = concurrency - running.size;
    if (room <= 0) return false;
    const claimed = await claim(room);
    for (const state of claimed) {
      busy.set(state.project_id, (busy.get(state.project_id) ?? 0) + 1);
      const p: Promise<void> = run(state).finally(() => {
        running.delete(p);
        const left = (busy.get(state.project_id) ?? 1) - 1;
        if (left > 0) busy.set(state.project_id, left);
        else busy.delete(state.project_id);
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
