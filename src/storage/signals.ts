// Cross-instance signals (cache invalidation, later job cancellation): publish a message on a channel and every
// instance's subscribers receive it. PostgreSQL LISTEN/NOTIFY when several instances share one PostgreSQL; an
// in-process emitter for the embedded database (which only one process can open).
import { EventEmitter } from 'node:events';
import pg from 'pg';

export type SignalHandler = (payload: string) => void;

export interface Signals {
  publish(channel: string, payload: string): Promise<void>;
  subscribe(channel: string, handler: SignalHandler): void;
  close(): Promise<void>;
}

export function localSignals(): Signals {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(100);
  return {
    async publish(channel, payload) {
      emitter.emit(channel, payload);
    },
    subscribe(channel, handler) {
      emitter.on(channel, handler);
    },
    async close() {
      emitter.removeAllListeners();
    },
  };
}

const PG_CHANNEL = 'cinder_signals';

/**
 * LISTEN on a dedicated connection (reconnecting after a loss, and then telling every subscriber to treat all
 * caches as stale, since messages may have been missed); NOTIFY through a short-lived pool query.
 */
export function postgresSignals(
  url: string,
  opts: { schema?: string; onError?: (err: Error) => void; connectTimeoutMs?: number } = {},
): Signals {
  const local = localSignals();
  const channel = opts.schema ? `${PG_CHANNEL}_${opts.schema}` : PG_CHANNEL;
  // Bounded waits: a publish during a database outage fails instead of hanging the request that made it.
  const connectionTimeoutMillis = opts.connectTimeoutMs ?? 5000;
  const notifier = new pg.Pool({ connectionString: url, max: 2, connectionTimeoutMillis });
  notifier.on('error', (err) => opts.onError?.(err));
  let listener: pg.Client | undefined;
  let closed = false;
  const handlers = new Set<string>();
  const connect = async (): Promise<void> => {
    if (closed) return;
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis });
    client.on('error', (err) => {
      opts.onError?.(err);
      client.end().catch(() => undefined);
      if (listener === client) listener = undefined;
      if (!closed) setTimeout(() => void reconnect(), 1000);
    });
    client.on('notification', (msg) => {
      if (!msg.payload) return;
      const i = msg.payload.indexOf('\n');
      if (i > 0) void local.publish(msg.payload.slice(0, i), msg.payload.slice(i + 1));
    });
    await client.connect();
    await client.query(`LISTEN ${channel}`);
    listener = client;
  };
  const reconnect = async (): Promise<void> => {
    try {
      await connect();
      for (const h of handlers) void local.publish(h, '*');
    } catch (err) {
      opts.onError?.(err as Error);
      if (!closed) setTimeout(() => void reconnect(), 2000);
    }
  };
  const ready = connect().catch((err: Error) => {
    opts.onError?.(err);
    setTimeout(() => void reconnect(), 2000);
  });
  return {
    async publish(ch, payload) {
      await ready;
      await notifier.query('SELECT pg_notify($1, $2)', [channel, `${ch}\n${payload}`]);
    },
    subscribe(ch, handler) {
      handlers.add(ch);
      local.subscribe(ch, handler);
    },
    async close() {
      closed = true;
      await ready;
      await listener?.end().catch(() => undefined);
      await notifier.end().catch(() => undefined);
      await local.close();
    },
  };
}
