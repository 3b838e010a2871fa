// Bounds how many requests with a large body, or a large response, a process reads and works on at once. A JSON body
// costs many times its size once parsed and written (a 30 MB transaction of 10,000 entries peaked at ~400 MB of the
// process's memory), so a handful sent together could exhaust the machine's memory; a large response (a 50 MiB
// Binary, raw or as FHIR JSON) is streamed, but eight at once still held the event loop and the file store's
// connections from other tenants' reads (issue 25 point 7). A body's slot is taken before the body is read (after
// authentication, a `preParsing` hook): a request waiting for one leaves its body unread in the connection. A
// response's slot is taken by its route once its length is known and before any of it is produced
// (`largeResponse`). Either is given back when the response ends or the connection closes. Beyond the queue: 429
// with Retry-After. A request holds at most one slot, so one with a large body and a large answer never waits for
// itself.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FhirError } from '../../fhir/outcome.js';
import { createLimiter, type Limiter } from '../../limiter.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The slots of large request bodies and responses (registerLargeBodyLimit). */
    largeBodies: Limiter;
    /**
     * Waits for a slot when a response of `bytes` bytes is large (then held until the response ends or the
     * connection closes); throws the 429 when too many wait already. Call it before producing the response.
     */
    largeResponse(request: FastifyRequest, reply: FastifyReply, bytes: number): Promise<void>;
  }
}

export interface LargeBodyLimits {
  /**
   * Bodies above this many bytes (by Content-Length; a body without one counts as large) take a slot, and so do
   * responses above it.
   */
  threshold: number;
  slots: number;
  maxWaiting: number;
}

export const LARGE_BODIES: LargeBodyLimits = { threshold: 4 * 1024 * 1024, slots: 2, maxWaiting: 32 };

/**
 * Registers the hook and decorates the app with `largeResponse`; returns the limiter (whose state tells how many are
 * running and waiting).
 */
export function registerLargeBodyLimit(
  app: FastifyInstance,
  limits: LargeBodyLimits = LARGE_BODIES,
): Limiter {
  const limiter = createLimiter(
    limits.slots,
    limits.maxWaiting,
    () =>
      new FhirError(
        'throttled',
        `Too many large requests at once: large bodies and responses (over ${limits.threshold} bytes) are ` +
          `worked on ${limits.slots} at a time, with ${limits.maxWaiting} more waiting; retry later`,
        'http.large-bodies-busy',
        { headers: { 'retry-after': '2' } },
      ),
  );
  /** Requests holding a slot. */
  const holding = new WeakSet<FastifyRequest>();
  const hold = async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    if (holding.has(request)) return;
    holding.add(request);
    let release: () => void;
    try {
      release = await limiter.acquire();
    } catch (err) {
      holding.delete(request);
      throw err;
    }
    reply.raw.once('finish', release);
    reply.raw.once('close', release);
    // Already over (the client went away while it waited): give the slot back now.
    if (reply.raw.destroyed || reply.raw.writableFinished) release();
  };
  app.addHook('preParsing', async (request, reply, payload) => {
    const length = request.headers['content-length'];
    const chunked = length === undefined && request.headers['transfer-encoding'] !== undefined;
    if (chunked || Number(length) > limits.threshold) await hold(request, reply);
    return payload;
  });
  app.decorate('largeResponse', async (request: FastifyRequest, reply: FastifyReply, bytes: number) => {
    if (bytes > limits.threshold) await hold(request, reply);
  });
  return limiter;
}
