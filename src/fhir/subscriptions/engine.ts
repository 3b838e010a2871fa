// The subscription engine of one process (API.md §8): the registry of active subscriptions, the hooks the repository
// calls on every write, and the delivery workers. Built once and passed in (main.ts, test/support/app.ts).
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { createDeliverer, type Deliverer, type DelivererOptions } from './deliverer.js';
import { eventsFor } from './matcher.js';
import { createSocketHub, type SocketHub, type SocketLimits } from './socket-hub.js';
import { liveSubscriptions, renderSocketEvents, renderSocketStatus } from './socket-render.js';
import { createSubscriptionRegistry, SUBSCRIPTIONS_CHANNEL, type SubscriptionRegistry } from './registry.js';
import {
  subscriptionDeleted,
  subscriptionsBeforeStore,
  type SubscriptionHooks,
} from './subscription-writes.js';

export interface SubscriptionEngine {
  registry: SubscriptionRegistry;
  /** The websocket sockets of this process, and the announcements that reach them from any instance. */
  hub: SocketHub;
  hooks: SubscriptionHooks;
  deliverer: Deliverer;
}

export interface EngineOptions {
  /** The database of the delivery workers (no statement timeout). */
  workerDb: Db;
  signals: Signals;
  fhirBase: string;
  allowedOutboundHosts: readonly string[];
  maxSubscriptionsPerProject: number;
  log?: { warn(obj: unknown, msg: string): void };
  socketLimits?: Partial<SocketLimits>;
  delivery?: Partial<
    Omit<DelivererOptions, 'db' | 'signals' | 'registry' | 'fhirBase' | 'allowedOutboundHosts'>
  >;
}

export function createSubscriptionEngine(opts: EngineOptions): SubscriptionEngine {
  const registry = createSubscriptionRegistry({
    signals: opts.signals,
    ...(opts.log ? { log: opts.log } : {}),
  });
  const hub = createSocketHub({
    signals: opts.signals,
    render: (id, from, to) => renderSocketEvents(opts.workerDb, opts.fhirBase, id, from, to),
    renderHandshake: (id) => renderSocketStatus(opts.workerDb, opts.fhirBase, id, 'handshake'),
    renderHeartbeat: (id) => renderSocketStatus(opts.workerDb, opts.fhirBase, id, 'heartbeat'),
    live: (ids) => liveSubscriptions(opts.workerDb, ids),
    ...(opts.socketLimits ? { limits: opts.socketLimits } : {}),
    ...(opts.log ? { log: opts.log as never } : {}),
  });
  const deliverer = createDeliverer({
    announce: (id, from, to) => hub.announce(id, from, to),
    announceHeartbeat: (id) => hub.heartbeat(id),
    db: opts.workerDb,
    signals: opts.signals,
    registry,
    fhirBase: opts.fhirBase,
    allowedOutboundHosts: opts.allowedOutboundHosts,
    ...(opts.log ? { log: opts.log } : {}),
    ...opts.delivery,
  });
  // After a write that recorded events: this process's deliverer at once, the others through the signal. A wake
  // that comes before the commit finds nothing; the next poll (DelivererOptions.pollMs) does.
  const wakeAll = (): void => {
    setTimeout(() => {
      deliverer.wake();
      void opts.signals.publish(SUBSCRIPTIONS_CHANNEL, 'wake').catch(() => undefined);
    }, 5).unref();
  };
  // The check reads the committed state; one that runs before the commit finds the subscription still live, and the
  // hub's own periodic check (SocketLimits.liveCheckMs) unbinds it then.
  const checkSoon = (id: string): void => {
    setTimeout(() => void hub.check(id).catch(() => undefined), 50).unref();
  };
  const hooks: SubscriptionHooks = {
    async eventsFor(db, changes) {
      const events = await eventsFor(registry, db, changes);
      if (events.length > 0) wakeAll();
      return events;
    },
    async beforeStore(tx, writer, items) {
      await subscriptionsBeforeStore(tx, writer, items, opts.maxSubscriptionsPerProject);
      wakeAll();
      // A websocket subscription turned off (or to error) loses its sockets on every instance once this commits.
      for (const { resource } of items)
        if (resource.status !== 'requested' && resource.status !== 'active') checkSoon(resource.id as string);
    },
    async deleted(tx, id) {
      await subscriptionDeleted(tx, id);
      checkSoon(id);
    },
  };
  return { registry, hub, hooks, deliverer };
}
