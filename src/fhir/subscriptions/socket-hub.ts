// The websocket hub of Subscriptions (API.md §8 "Websocket"; https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/channels.html#websockets):
// which of this instance's sockets are bound to which subscription, and the announcements, carried by the Signals
// channel to every instance, after which each instance renders a subscription's notifications and sends them to its
// own sockets. No Fastify and no `ws` here: the route (src/http/routes/subscription-ws.ts) adapts its sockets.
import type { Signals } from '../../storage/signals.js';
import { isValidId } from '../id.js';
import type { IssueCode, OperationOutcome } from '../outcome.js';

/**
 * The Signals channel of announcements (NOTIFY payloads stay tiny): `notify <id> <from> <to>` (events ready),
 * `heartbeat <id>` (a heartbeat or test notification is due), `check <id>` (the subscription was written: unbind its
 * sockets if it is no longer live) or `revoke <id>` (unbind them whatever its state).
 */
export const SOCKETS_CHANNEL = 'subscription-sockets';

export interface SocketLimits {
  /** Sockets one instance holds, bound or not; more are closed at once (1013). */
  perInstance: number;
  /** Sockets of one instance bound to one subscription. */
  perSubscription: number;
  /** Subscriptions one socket may bind. */
  bindingsPerSocket: number;
  /** Bytes queued for a socket that does not read, beyond which it is closed (1013) rather than buffered further. */
  maxBufferedBytes: number;
  /**
   * How often an instance asks the database which of its bound subscriptions are still live and unbinds the rest: the
   * safety net under `check` announcements, which can come before the write that caused them has committed.
   */
  liveCheckMs: number;
}

export const SOCKET_LIMITS: SocketLimits = {
  perInstance: 10_000,
  perSubscription: 50,
  bindingsPerSocket: 100,
  maxBufferedBytes: 8 * 1024 * 1024,
  liveCheckMs: 5000,
};

/** Close codes (RFC 6455 §7.4.1, and 1013 from the IANA registry). */
export const CLOSE = {
  goingAway: 1001,
  unsupportedData: 1003,
  policy: 1008,
  internalError: 1011,
  tryAgainLater: 1013,
} as const;

/** A websocket as the hub sees it. */
export interface HubSocket {
  send(text: string): void;
  close(code: number, reason: string): void;
  /** Bytes queued to be sent. */
  bufferedAmount(): number;
}

/**
 * `bound`: the handshake was sent and notifications follow; `gone`: renderHandshake found no such subscription to
 * tell about; `failed`: it threw; `closed`: the socket or the hub closed meanwhile.
 */
export type BindResult = 'bound' | 'subscription-full' | 'too-many-bindings' | 'gone' | 'failed' | 'closed';

export interface HubConnection {
  /** Binds the socket to a subscription: its handshake is sent, then its notifications, in announcement order. */
  bind(subscriptionId: string): Promise<BindResult>;
  /** Subscriptions the socket is bound to. */
  bindings(): number;
  /** The socket has closed (either side): forget it. */
  end(): void;
}

export interface HubLog {
  warn(obj: object, msg: string): void;
}

export interface SocketHubDeps {
  signals: Signals;
  /** The notification Bundles (JSON text, one per message) of events fromNumber..toNumber of a subscription. */
  render(subscriptionId: string, fromNumber: number, toNumber: number): Promise<string[]>;
  /** The handshake Bundle sent right after a bind; undefined when the subscription is gone. Default: a minimal one. */
  renderHandshake?(subscriptionId: string): Promise<string | undefined>;
  /** A heartbeat Bundle; undefined when the subscription is gone. Default: nothing is sent. */
  renderHeartbeat?(subscriptionId: string): Promise<string | undefined>;
  /** Which of these subscriptions may still notify (not deleted, `requested` or `active`). Default: all of them. */
  live?(subscriptionIds: readonly string[]): Promise<ReadonlySet<string>>;
  log?: HubLog;
  limits?: Partial<SocketLimits>;
}

export interface SocketHub {
  /** Any instance: tell every instance that events (fromNumber..toNumber) of subscription id are ready. */
  announce(subscriptionId: string, fromNumber: number, toNumber: number): Promise<void>;
  /** Any instance: send a heartbeat Bundle to every socket bound to this subscription. */
  heartbeat(subscriptionId: string): Promise<void>;
  /** Any instance: the subscription was written or deleted; its sockets are unbound if it is no longer live. */
  check(subscriptionId: string): Promise<void>;
  /** Any instance: unbind every socket from this subscription (deleted, turned off, its author's access ended). */
  revoke(subscriptionId: string): Promise<void>;
  /** Local sockets bound to this subscription right now (for tests and $status). */
  boundCount(subscriptionId: string): number;
  /** Local sockets open right now, bound or not. */
  socketCount(): number;
  /** A new local socket; undefined when this instance holds as many as it may (the caller closes it). */
  open(socket: HubSocket): HubConnection | undefined;
  close(): Promise<void>;
}

/** A text message telling the client why: an OperationOutcome, as FHIR answers errors. */
export function outcomeText(severity: 'error' | 'information', code: IssueCode, text: string): string {
  const o: OperationOutcome = {
    resourceType: 'OperationOutcome',
    issue: [{ severity, code, details: { text } }],
  };
  return JSON.stringify(o);
}

/** The IG's handshake Bundle with what the hub knows (its id): the default until the delivery engine renders one. */
export function minimalHandshake(subscriptionId: string): string {
  return JSON.stringify({
    resourceType: 'Bundle',
    type: 'history',
    entry: [
      {
        resource: {
          resourceType: 'Parameters',
          parameter: [
            { name: 'subscription', valueReference: { reference: `Subscription/${subscriptionId}` } },
            { name: 'status', valueCode: 'active' },
            { name: 'type', valueCode: 'handshake' },
          ],
        },
      },
    ],
  });
}

type Announcement =
  | { kind: 'notify'; id: string; from: number; to: number }
  | { kind: 'revoke' | 'check' | 'heartbeat'; id: string };

function parseAnnouncement(payload: string): Announcement | undefined {
  const [kind, id, from, to] = payload.split(' ');
  if (id === undefined || !isValidId(id)) return undefined;
  if (kind === 'revoke' || kind === 'check' || kind === 'heartbeat') return { kind, id };
  const f = Number(from);
  const t = Number(to);
  if (kind !== 'notify' || !Number.isSafeInteger(f) || !Number.isSafeInteger(t) || f > t) return undefined;
  return { kind, id, from: f, to: t };
}

interface Conn {
  socket: HubSocket;
  subscriptions: Set<string>;
  /** Binds queued or running, counted against bindingsPerSocket. */
  pending: number;
  closed: boolean;
}

/** How long close() waits for renders in flight. */
const CLOSE_WAIT_MS = 5000;

export function createSocketHub(deps: SocketHubDeps): SocketHub {
  const limits = { ...SOCKET_LIMITS, ...deps.limits };
  const handshake = deps.renderHandshake ?? (async (id: string) => minimalHandshake(id));
  const conns = new Set<Conn>();
  const bound = new Map<string, Set<Conn>>();
  /** Binds queued or running per subscription: an announcement during a bind is queued behind it, not dropped. */
  const pendingBinds = new Map<string, number>();
  /** Per subscription, the tail of its work: binds, deliveries and revocations run one at a time, in order. */
  const chains = new Map<string, Promise<void>>();
  let closed = false;

  const enqueue = <T>(id: string, task: () => Promise<T>): Promise<T> => {
    const run = (chains.get(id) ?? Promise.resolve()).then(task);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    chains.set(id, tail);
    void tail.then(() => {
      if (chains.get(id) === tail) chains.delete(id);
    });
    return run;
  };

  const unbind = (conn: Conn, id: string): void => {
    conn.subscriptions.delete(id);
    const set = bound.get(id);
    set?.delete(conn);
    if (set?.size === 0) bound.delete(id);
  };

  const drop = (conn: Conn, code: number, reason: string): void => {
    if (conn.closed) return;
    conn.closed = true;
    conns.delete(conn);
    for (const id of [...conn.subscriptions]) unbind(conn, id);
    try {
      conn.socket.close(code, reason);
    } catch {
      // Already closing: nothing more to do.
    }
  };

  const send = (conn: Conn, text: string): void => {
    if (conn.closed) return;
    if (conn.socket.bufferedAmount() > limits.maxBufferedBytes) {
      drop(conn, CLOSE.tryAgainLater, 'Too slow: notifications were not read');
      return;
    }
    try {
      conn.socket.send(text);
    } catch {
      drop(conn, CLOSE.internalError, 'Send failed');
    }
  };

  const deliver = async (id: string, from: number, to: number): Promise<void> => {
    const texts = await deps.render(id, from, to);
    for (const conn of [...(bound.get(id) ?? [])]) for (const text of texts) send(conn, text);
  };

  const heartbeatLocal = async (id: string): Promise<void> => {
    const text = await deps.renderHeartbeat?.(id);
    if (text === undefined) return;
    for (const conn of [...(bound.get(id) ?? [])]) send(conn, text);
  };

  /** Unbinds the sockets of those of `ids` the database no longer holds live. */
  const checkLocal = async (ids: readonly string[]): Promise<void> => {
    if (!deps.live || ids.length === 0) return;
    const live = await deps.live(ids);
    for (const id of ids) if (!live.has(id)) revokeLocal(id);
  };

  const revokeLocal = (id: string): void => {
    for (const conn of [...(bound.get(id) ?? [])]) {
      unbind(conn, id);
      send(
        conn,
        outcomeText('information', 'informational', `Subscription/${id} is no longer bound to this socket`),
      );
      if (conn.subscriptions.size === 0 && conn.pending === 0) drop(conn, 1000, 'No subscription left');
    }
  };

  deps.signals.subscribe(SOCKETS_CHANNEL, (payload) => {
    if (closed) return;
    // `*` (the signals reconnected, messages may be lost) and anything unknown: nothing to redo here.
    const a = parseAnnouncement(payload);
    if (!a || (!bound.has(a.id) && !pendingBinds.has(a.id))) return;
    const work =
      a.kind === 'notify'
        ? () => deliver(a.id, a.from, a.to)
        : a.kind === 'heartbeat'
          ? () => heartbeatLocal(a.id)
          : a.kind === 'check'
            ? () => checkLocal([a.id])
            : async () => revokeLocal(a.id);
    enqueue(a.id, work).catch((err: unknown) =>
      deps.log?.warn({ err, subscriptionId: a.id }, 'Websocket notifications could not be rendered'),
    );
  });

  const bindOne = async (conn: Conn, id: string): Promise<BindResult> => {
    const full = (): boolean =>
      !conn.subscriptions.has(id) && (bound.get(id)?.size ?? 0) >= limits.perSubscription;
    if (conn.closed || closed) return 'closed';
    if (full()) return 'subscription-full';
    let text: string | undefined;
    try {
      text = await handshake(id);
    } catch (err) {
      deps.log?.warn({ err, subscriptionId: id }, 'Websocket handshake could not be rendered');
      return 'failed';
    }
    if (conn.closed || closed) return 'closed';
    if (text === undefined) return 'gone';
    if (full()) return 'subscription-full';
    send(conn, text);
    if (conn.closed) return 'closed';
    conn.subscriptions.add(id);
    bound.set(id, (bound.get(id) ?? new Set()).add(conn));
    return 'bound';
  };

  // The safety net: a `check` that ran before its write committed, or a subscription that left `active` another way
  // (its author's access ended, the deliverer set it to `error`), is noticed within liveCheckMs.
  const liveTimer = deps.live
    ? setInterval(() => {
        const ids = [...bound.keys()];
        for (let i = 0; i < ids.length; i += 500) {
          const chunk = ids.slice(i, i + 500);
          void checkLocal(chunk).catch((err: unknown) =>
            deps.log?.warn({ err }, 'Websocket subscriptions could not be checked'),
          );
        }
      }, limits.liveCheckMs)
    : undefined;
  liveTimer?.unref();

  const publishFor = async (
    kind: 'heartbeat' | 'check' | 'revoke',
    subscriptionId: string,
  ): Promise<void> => {
    if (!isValidId(subscriptionId)) throw new RangeError(`${kind}: an id`);
    await deps.signals.publish(SOCKETS_CHANNEL, `${kind} ${subscriptionId}`);
  };

  return {
    async announce(subscriptionId, fromNumber, toNumber) {
      if (!isValidId(subscriptionId) || !Number.isSafeInteger(fromNumber) || !Number.isSafeInteger(toNumber))
        throw new RangeError('announce: an id and two integers');
      if (fromNumber > toNumber) throw new RangeError('announce: fromNumber after toNumber');
      await deps.signals.publish(SOCKETS_CHANNEL, `notify ${subscriptionId} ${fromNumber} ${toNumber}`);
    },
    heartbeat: (subscriptionId) => publishFor('heartbeat', subscriptionId),
    check: (subscriptionId) => publishFor('check', subscriptionId),
    revoke: (subscriptionId) => publishFor('revoke', subscriptionId),
    boundCount: (id) => bound.get(id)?.size ?? 0,
    socketCount: () => conns.size,
    open(socket) {
      if (closed || conns.size >= limits.perInstance) return undefined;
      const conn: Conn = { socket, subscriptions: new Set(), pending: 0, closed: false };
      conns.add(conn);
      return {
        async bind(id) {
          if (conn.closed || closed) return 'closed';
          if (
            !conn.subscriptions.has(id) &&
            conn.subscriptions.size + conn.pending >= limits.bindingsPerSocket
          )
            return 'too-many-bindings';
          conn.pending++;
          pendingBinds.set(id, (pendingBinds.get(id) ?? 0) + 1);
          try {
            return await enqueue(id, () => bindOne(conn, id));
          } finally {
            conn.pending--;
            const left = (pendingBinds.get(id) ?? 1) - 1;
            if (left > 0) pendingBinds.set(id, left);
            else pendingBinds.delete(id);
          }
        },
        bindings: () => conn.subscriptions.size,
        end() {
          conn.closed = true;
          conns.delete(conn);
          for (const id of [...conn.subscriptions]) unbind(conn, id);
        },
      };
    },
    async close() {
      if (closed) return;
      closed = true;
      if (liveTimer) clearInterval(liveTimer);
      for (const conn of [...conns]) drop(conn, CLOSE.goingAway, 'Server shutting down');
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, CLOSE_WAIT_MS);
        timer.unref();
      });
      await Promise.race([Promise.allSettled([...chains.values()]), waited]);
      clearTimeout(timer);
    },
  };
}
