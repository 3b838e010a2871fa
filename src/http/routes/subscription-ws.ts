// The websocket endpoint of Subscriptions, `{base}ws/subscriptions-r4` on the server's own port (API.md §8
// "Websocket"; https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/channels.html#websockets): a client sends
// `bind-with-token: <token>` (from $get-ws-binding-token) and then receives each notification Bundle as one text message.
import websocket from '@fastify/websocket';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import { FhirError, type IssueCode } from '../../fhir/outcome.js';
import {
  InvalidBindingTokenError,
  WEBSOCKET_PATH,
  type BindingTokens,
} from '../../fhir/subscriptions/binding-token.js';
import { CLOSE, outcomeText, type BindResult, type SocketHub } from '../../fhir/subscriptions/socket-hub.js';

export interface WsLimits {
  /** Largest message a client may send (a bind message with its token is under 1 KiB); larger ones close with 1009. */
  maxMessageBytes: number;
  /** A socket with no binding this long after it opened is closed (1008). */
  bindWithinMs: number;
  /** A ping every this often; a socket that has not answered the previous one is cut. */
  pingEveryMs: number;
  /** Messages of one socket waiting while one is handled; more close it (1008). */
  maxQueuedMessages: number;
}

export const WS_LIMITS: WsLimits = {
  maxMessageBytes: 4096,
  bindWithinMs: 30_000,
  pingEveryMs: 30_000,
  maxQueuedMessages: 8,
};

/** How long a closing socket may take to answer the close frame before it is cut. */
const CLOSE_GRACE_MS = 2000;

/**
 * Registers the websocket support. Before the other hooks and routes: its hooks must see every upgrade request first,
 * so that one a later hook refuses (401) or one to another route has its socket closed, not left open.
 */
export async function registerWebsockets(
  app: FastifyInstance,
  hub: SocketHub,
  limits: Partial<WsLimits> = {},
): Promise<void> {
  await app.register(websocket, {
    options: { maxPayload: limits.maxMessageBytes ?? WS_LIMITS.maxMessageBytes },
    // A client's broken frame or dropped connection is the client's problem, not an error of the server.
    errorHandler: (err, socket, request) => {
      request.log.info({ err: err.message }, 'Websocket error');
      cutLater(socket);
    },
    // Sockets outlive their HTTP request: close them (1001) and wait briefly, or the server's close would wait for
    // every client to leave.
    preClose: async () => {
      await hub.close();
      const open = [...app.websocketServer.clients];
      for (const s of open) s.close(CLOSE.goingAway, 'Server shutting down');
      await Promise.all(open.map((s) => closedWithin(s, CLOSE_GRACE_MS)));
    },
  });
  // An upgrade request anywhere else is answered 404 (and its socket closed by the plugin's onResponse), rather than
  // upgraded and then closed: a client that never answers the close frame would hold that socket for 30 s.
  app.addHook('onRequest', (request, _reply, done) => {
    if (request.ws && request.routeOptions.url !== `/${WEBSOCKET_PATH}`)
      done(new FhirError('not-found', 'No websocket endpoint here', 'ws.not-websocket'));
    else done();
  });
}

export interface SubscriptionWsDeps {
  hub: SocketHub;
  tokens: BindingTokens;
  clock: () => Date;
  limits?: Partial<WsLimits>;
}

export function subscriptionWsRoutes(app: FastifyInstance, deps: SubscriptionWsDeps): void {
  const limits = { ...WS_LIMITS, ...deps.limits };
  // Public: a browser cannot send an Authorization header with a websocket; the binding token is the credential.
  app.get(`/${WEBSOCKET_PATH}`, { websocket: true, config: { public: true } }, (socket, request) =>
    serve(socket, deps, limits, request.log),
  );
}

const BIND = /^bind-with-token(?::\s*|\s+)(\S+)\s*$/;

function serve(socket: WebSocket, deps: SubscriptionWsDeps, limits: WsLimits, log: FastifyBaseLogger): void {
  const conn = deps.hub.open({
    send: (text) => socket.send(text),
    close: (code, reason) => {
      socket.close(code, reason);
      cutLater(socket);
    },
    bufferedAmount: () => socket.bufferedAmount,
  });
  if (!conn) {
    socket.close(CLOSE.tryAgainLater, 'Too many websockets on this server');
    cutLater(socket);
    return;
  }
  const refuse = (code: number, issue: IssueCode, text: string): void => {
    if (socket.readyState !== socket.OPEN) return;
    socket.send(outcomeText('error', issue, text));
    socket.close(code, text.slice(0, 120));
    cutLater(socket);
  };
  const unbound = setTimeout(() => {
    if (conn.bindings() === 0)
      refuse(CLOSE.policy, 'security', `No subscription was bound within ${limits.bindWithinMs / 1000} s`);
  }, limits.bindWithinMs);
  let answered = true;
  const ping = setInterval(() => {
    if (!answered) {
      socket.terminate();
      return;
    }
    answered = false;
    socket.ping();
  }, limits.pingEveryMs);
  socket.on('pong', () => {
    answered = true;
  });
  // One message at a time, a few waiting: binding costs a signature check and a handshake render.
  let queue = Promise.resolve();
  let queued = 0;
  socket.on('message', (data, isBinary) => {
    if (queued >= limits.maxQueuedMessages) {
      refuse(CLOSE.policy, 'throttled', 'Too many messages at once');
      return;
    }
    queued++;
    queue = queue
      .then(() => handleMessage(data, isBinary))
      .catch((err: unknown) => {
        log.warn({ err }, 'Websocket message failed');
        refuse(CLOSE.internalError, 'exception', 'Internal error');
      })
      .finally(() => {
        queued--;
      });
  });
  socket.on('close', () => {
    clearTimeout(unbound);
    clearInterval(ping);
    conn.end();
  });

  const handleMessage = async (data: RawData, isBinary: boolean): Promise<void> => {
    if (socket.readyState !== socket.OPEN) return;
    if (isBinary) {
      refuse(CLOSE.unsupportedData, 'not-supported', 'Only text messages are understood');
      return;
    }
    const m = BIND.exec(rawText(data));
    if (!m) {
      refuse(CLOSE.policy, 'invalid', 'Unknown message: send bind-with-token: <token>');
      return;
    }
    let subscriptionId;
    try {
      ({ subscriptionId } = await deps.tokens.verify(m[1] as string, deps.clock()));
    } catch (err) {
      if (!(err instanceof InvalidBindingTokenError)) throw err;
      refuse(CLOSE.policy, 'security', err.message);
      return;
    }
    afterBind(await conn.bind(subscriptionId), subscriptionId, refuse);
  };
}

/** What the client is told when a bind did not succeed. */
function afterBind(
  result: BindResult,
  id: string,
  refuse: (code: number, issue: IssueCode, text: string) => void,
): void {
  switch (result) {
    case 'subscription-full':
      return refuse(CLOSE.tryAgainLater, 'throttled', `Too many websockets bound to Subscription/${id}`);
    case 'too-many-bindings':
      return refuse(CLOSE.policy, 'throttled', 'Too many subscriptions bound to this websocket');
    case 'gone':
      return refuse(CLOSE.policy, 'not-found', `Subscription/${id} is not available`);
    case 'failed':
      return refuse(CLOSE.internalError, 'exception', `The handshake of Subscription/${id} failed`);
    case 'bound':
    case 'closed':
      return;
  }
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return (Buffer.isBuffer(data) ? data : Buffer.from(data)).toString('utf8');
}

/** Cuts a socket that has not finished its close handshake in time. */
function cutLater(socket: WebSocket): void {
  setTimeout(() => {
    if (socket.readyState !== socket.CLOSED) socket.terminate();
  }, CLOSE_GRACE_MS).unref();
}

function closedWithin(socket: WebSocket, ms: number): Promise<void> {
  if (socket.readyState === socket.CLOSED) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      socket.terminate();
      resolve();
    }, ms);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}
