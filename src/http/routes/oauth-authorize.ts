// The browser authorization endpoint, GET and POST {base}oauth2/authorize (RFC 6749 §4.1, SMART App Launch 2.x
// standalone launch, https://hl7.org/fhir/smart-app-launch/app-launch.html): the request is checked and kept
// server-side (auth/authorize-request.ts), the sign-in and chooser pages post back only its transaction id, and the
// browser that started it must present the cookie it was given (the CSRF guard).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  chooseMembership,
  declineAuthorization,
  pickPatient,
  signIn,
  type AuthorizeStep,
} from '../../auth/authorize-login.js';
import {
  AUTHORIZE_LIFETIME,
  checkAuthorizeRequest,
  loadTransaction,
  startTransaction,
  type PendingAuthorization,
  type Query,
} from '../../auth/authorize-request.js';
import type { AuthDeps } from '../../auth/deps.js';
import { finishUpstream, startUpstream, upstreamProvider } from '../../auth/upstream-sign-in.js';
import { FhirError } from '../../fhir/outcome.js';
import { sha256 } from '../../fhir/repository/secrets.js';
import { chooserPage, errorPage, patientPickerPage, signInPage } from '../authorize-html.js';
import type { FormBody } from '../plugins/content-types.js';
import type { LoginGuard } from '../plugins/rate-limit.js';

const BROWSER = /^[A-Za-z0-9_-]{43}$/;

/**
 * The cookie of one transaction: a name of its own (so that sign-ins in two tabs do not undo each other) and a fresh
 * value that was never anywhere but in this Set-Cookie (so a cookie planted beforehand binds nothing).
 */
const cookieName = (transaction: string): string => cookieNameOfHash(sha256(transaction));
const cookieNameOfHash = (idHash: string): string => `cinder_az_${idHash.slice(0, 16)}`;

function cookieValue(request: FastifyRequest, transaction: string): string | undefined {
  return cookieNamed(request, cookieName(transaction));
}

function cookieNamed(request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const [k, v] = part.trim().split('=', 2);
    if (k === name && v && BROWSER.test(v)) return v;
  }
  return undefined;
}

function html(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .header('pragma', 'no-cache')
    .header('x-frame-options', 'DENY')
    .header('referrer-policy', 'no-referrer')
    .header(
      'content-security-policy',
      "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    )
    .type('text/html; charset=utf-8')
    .send(body);
}

const text = (body: FormBody, key: string): string | undefined => {
  const v = body[key];
  return typeof v === 'string' ? v : undefined;
};

export function authorizeRoutes(
  app: FastifyInstance,
  deps: AuthDeps,
  opts: { baseUrl: string; loginGuard?: LoginGuard },
): void {
  const action = `${opts.baseUrl}oauth2/authorize`;
  const callbackUrl = `${opts.baseUrl}oauth2/authorize/callback`;
  const providerLabel = async (clientId: string) => (await upstreamProvider(deps, clientId))?.label;
  const fhirBase = `${opts.baseUrl}fhir/R4`;
  const secure = opts.baseUrl.startsWith('https:') ? '; Secure' : '';
  const cookiePath = `${new URL(opts.baseUrl).pathname}oauth2/authorize`;
  const guard = opts.loginGuard;

  const answer = (reply: FastifyReply, transaction: string, step: AuthorizeStep): FastifyReply => {
    if (step.kind === 'redirect')
      return reply.header('cache-control', 'no-store').redirect(step.location, 303);
    if (step.kind === 'show') return html(reply, 400, errorPage(step.message));
    if (step.kind === 'pick') {
      const { patients, search } = step;
      const error = step.error !== undefined ? { error: step.error } : {};
      return html(reply, 200, patientPickerPage({ action, transaction, patients, search, ...error }));
    }
    return html(reply, 200, chooserPage({ action, transaction, options: step.options }));
  };

  // Both count against the per-address limit of the login endpoints: each GET stores a pending request.
  const guarded = { config: { public: true }, ...(guard ? { onRequest: guard.perIp } : {}) };

  app.get('/oauth2/authorize', guarded, async (request, reply) => {
    const check = await checkAuthorizeRequest(deps, request.query as Query, fhirBase);
    if (check.kind === 'show') return html(reply, 400, errorPage(check.message));
    if (check.kind === 'redirect')
      return reply.header('cache-control', 'no-store').redirect(check.location, 302);
    const { id, browser } = await startTransaction(deps.db, deps, {
      ...check.request,
      clientName: check.clientName,
    });
    reply.header(
      'set-cookie',
      `${cookieName(id)}=${browser}; Path=${cookiePath}; Max-Age=${AUTHORIZE_LIFETIME}; HttpOnly; SameSite=Lax${secure}`,
    );
    const provider = await providerLabel(check.request.clientId);
    return html(
      reply,
      200,
      signInPage({
        action,
        transaction: id,
        clientName: check.clientName,
        ...(provider ? { provider } : {}),
      }),
    );
  });

  // The identity provider sends the browser back here (upstream-sign-in.ts); the request's cookie path covers it.
  app.get('/oauth2/authorize/callback', guarded, async (request, reply) => {
    const q = request.query as Query;
    const one = (k: string): string | undefined => (typeof q[k] === 'string' ? q[k] : undefined);
    const step = await finishUpstream(
      deps,
      { state: one('state'), code: one('code'), error: one('error') },
      (idHash) => cookieNamed(request, cookieNameOfHash(idHash)),
      callbackUrl,
      { log: request.log },
    );
    return answer(reply, '', step);
  });

  const passwordStep = async (
    request: FastifyRequest,
    reply: FastifyReply,
    pending: PendingAuthorization,
    form: { transaction: string; email: string; password: string },
  ): Promise<FastifyReply> => {
    const provider = await providerLabel(pending.clientId);
    const again = (status: number, error: string) =>
      html(
        reply,
        status,
        signInPage({
          action,
          transaction: form.transaction,
          clientName: pending.clientName,
          email: form.email,
          error,
          ...(provider ? { provider } : {}),
        }),
      );
    // The lockout rules of POST /auth/login, counted against the same (address, email) pair.
    const identity = `email:${form.email.trim().toLowerCase()}`;
    try {
      await guard?.check(request, identity);
      const step = await signIn(deps, pending, form.email, form.password);
      await guard?.succeeded(request, identity);
      return answer(reply, form.transaction, step);
    } catch (err) {
      if (!(err instanceof FhirError)) throw err;
      if (err.code === 'auth.rate-limited') return again(429, err.message);
      if (err.code !== 'login.bad-credentials') throw err;
      await guard?.failed(request, identity);
      return again(400, 'Email or password is invalid.');
    }
  };

  app.post('/oauth2/authorize', guarded, async (request, reply) => {
    const ct = request.headers['content-type'] ?? '';
    const body = ct.startsWith('application/x-www-form-urlencoded') ? (request.body as FormBody) : {};
    const transaction = text(body, 'transaction') ?? '';
    const pending = await loadTransaction(deps.db, deps, transaction, cookieValue(request, transaction));
    // Unknown, used, expired or started in another browser: nothing is trusted, so nothing is redirected.
    if (!pending) {
      return html(reply, 400, errorPage('This sign-in form has expired or was not opened in this browser.'));
    }
    if (text(body, 'cancel') !== undefined)
      return answer(reply, transaction, await declineAuthorization(deps, pending));
    if (pending.membershipId !== undefined) {
      const form = { search: text(body, 'search'), patient: text(body, 'patient') };
      return answer(reply, transaction, await pickPatient(deps, pending, form));
    }
    if (pending.userId !== undefined) {
      return answer(reply, transaction, await chooseMembership(deps, pending, text(body, 'membership')));
    }
    if (text(body, 'provider') !== undefined)
      return answer(reply, transaction, await startUpstream(deps, pending, callbackUrl));
    const email = (text(body, 'email') ?? '').slice(0, 320);
    const password = (text(body, 'password') ?? '').slice(0, 1024);
    if (email.trim() === '' || password === '') {
      const provider = await providerLabel(pending.clientId);
      return html(
        reply,
        400,
        signInPage({
          action,
          transaction,
          clientName: pending.clientName,
          email,
          error: 'Enter your email and password.',
          ...(provider ? { provider } : {}),
        }),
      );
    }
    return passwordStep(request, reply, pending, { transaction, email, password });
  });
}
