// Bounds how many requests with a large body a process reads and works on at once. A JSON body costs many times its
// size once parsed and written (a 30 MB transaction of 10,000 entries peaked at ~400 MB of the process's memory),
// so a handful sent together could exhaust the machine's memory. The slot is taken before the body is read (after
// authentication, an `onRequest` hook): a request waiting for one leaves its body unread in the connection. It is
// given back when the response ends or the connection closes. Beyond the queue: 429 with Retry-After.
import type { FastifyInstance } from 'fastify';
import { FhirError } from '../../fhir/outcome.js';
import { createLimiter, type Limiter } from '../../limiter.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The slots of large request bodies (registerLargeBodyLimit). */
    largeBodies: Limiter;
  }
}

export interface LargeBodyLimits {
  /** Bodies above this many bytes (by Content-Length; a body without one counts as large) take a slot. */
  threshold: number;
  slots: number;
  maxWaiting: number;
}

export const LARGE_BODIES: LargeBodyLimits = { threshold: 4 * 1024 * 1024, slots: 2, maxWaiting: 32 };

/** Registers the hook; returns its limiter (whose state tells how many are running and waiting). */
export function registerLargeBodyLimit(
  app: FastifyInstance,
  limits: LargeBodyLimits = LARGE_BODIES,
): Limiter {
  const limiter = createLimiter(
    limits.slots,
    limits.maxWaiting,
    () =>
      new FhirError('throttled', 'Too many large requests at once; retry later', 'http.large-bodies-busy', {
        headers: { 'retry-after': '2' },
      }),
  );
  app.addHook('preParsing', async (request, reply, payload) => {
    const length = request.headers['content-length'];
    const chunked = length === undefined && request.headers['transfer-encoding'] !== undefined;
    if (!chunked && !(Number(length) > limits.threshold)) return payload;
    const release = await limiter.acquire();
    reply.raw.once('finish', release);
    reply.raw.once('close', release);
    // Already over (the client went away while it waited): give the slot back now.
    if (reply.raw.destroyed || reply.raw.writableFinished) release();
    return payload;
  });
  return limiter;
}
