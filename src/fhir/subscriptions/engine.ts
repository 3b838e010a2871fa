// The subscription engine of one process (API.md §8): the registry of active subscriptions, the hooks the repository
// calls on every write, and the delivery workers. Built once and passed in (main.ts, test/support/app.ts).
import type { Db } from '../../storage/db.js';
import type { Signals } from '../../storage/signals.js';
import { createDeliverer, type Deliverer, type DelivererOptions } from './deliverer.js';
import { eventsFor } from './matcher.js';
import { createSocketHub, type SocketHub } from './socket-hub.js';
import { renderSocketEvents, renderSocketHandshake } from './socket-render.js';
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
    renderHandshake: (id) => renderSocketHandshake(opts.workerDb, opts.fhirBase, id),
    ...(opts.log ? { log: opts.log as never } : {}),
  });
  const deliverer = createDeliverer({
    announce: (id, from, to) => hub.announce(id, from, to),
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
  const hooks: SubscriptionHooks = {
    async eventsFor(db, changes) {
      const events = await eventsFor(registry, db, changes);
      if (events.length > 0) wakeAll();
      return events;
    },
    async beforeStore(tx, writer, items) {
      await subscriptionsBeforeStore(tx, writer, items, opts.maxSubscriptionsPerProject);
      wakeAll();
    },
    deleted: subscriptionDeleted,
  };
  return { registry, hub, hooks, deliverer };
}
