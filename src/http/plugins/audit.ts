// Every audited request records an AuditEvent (API.md §10): requests to {fhir}, {base}oauth2, {base}auth and
// {base}admin, but not health checks, discovery documents, `metadata`, the console or websocket upgrades. Each gets a
// recorder when it arrives (before authentication, so that a 401 is recorded too); the repository stores the
// AuditEvent of its writes in their transaction; what is left is built when the answer has been sent, from the route,
// the principal and the answer itself (which resources, which patients), and stored by the writer within a second.
// Routes do not assemble AuditEvents.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AuditRecorder, type RecorderEnv, type RequestFacts } from '../../audit/recorder.js';
import type { AuditAgent, AuditKind } from '../../audit/model.js';
import { patientsInJson } from '../../audit/patients.js';
import type { AuditWriter } from '../../audit/writer.js';
import { FhirError } from '../../fhir/outcome.js';
import { jsonOfXmlAnswer } from '../reply.js';

declare module 'fastify' {
  interface FastifyRequest {
    audit: AuditRecorder | null;
    /** The answer's text, when it was one string (read after sending: the resources and patients it held). */
    auditPayload: string | null;
  }
}

export interface AuditHttpDeps {
  writer: AuditWriter;
  env: RecorderEnv;
}

const AUDITED = /^\/(?:oauth2|auth|admin)\//;
const NOT_AUDITED = /^\/fhir\/R4\/(?:metadata|\.well-known\/|ws\/)/;
const LOGIN = new Set([
  '/oauth2/token',
  '/auth/login',
  'POST /oauth2/authorize',
  '/oauth2/authorize/callback',
]);
const LOGOUT = new Set(['/oauth2/revoke', '/auth/logout', '/oauth2/logout']);

function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** The interaction a request is (undefined: not audited). */
export function kindOf(request: FastifyRequest): AuditKind | undefined {
  const url = request.url;
  // The common case first, without a regular expression: a FHIR request.
  const fhir = url.startsWith('/fhir/R4/') || url === '/fhir/R4' || url.startsWith('/fhir/R4?');
  if (!fhir && !AUDITED.test(url)) return undefined;
  const path = pathOf(url);
  if ((fhir && NOT_AUDITED.test(path)) || request.headers.upgrade) return undefined;
  if (LOGIN.has(path) || LOGIN.has(`${request.method} ${path}`)) return 'login';
  if (LOGOUT.has(path)) return 'logout';
  const method = request.method;
  if (!path.startsWith('/fhir/R4')) {
    return method === 'GET' || method === 'HEAD' ? 'read' : method === 'DELETE' ? 'delete' : 'operation';
  }
  const segments = path
    .slice('/fhir/R4'.length)
    .split('/')
    .filter((s) => s !== '');
  // Observation/$lastn is a search by another name (R4 observation-operation-lastn): audited as one.
  if (segments[1] === '$lastn' && segments.length === 2) return 'search';
  if (segments.some((s) => s.startsWith('$'))) return 'operation';
  const [type, id, third, fourth] = segments;
  if (method === 'GET' || method === 'HEAD') {
    if (segments.includes('_history'))
      return fourth !== undefined && third === '_history' ? 'vread' : 'history';
    if (type === undefined) return 'search';
    if (id === undefined || third !== undefined)
      return type === 'AsyncJob' && third === 'output' ? 'read' : 'search';
    return 'read';
  }
  if (method === 'POST') {
    if (type === undefined) {
      const bundleType = (request.body as { type?: unknown } | null | undefined)?.type;
      return bundleType === 'transaction' ? 'transaction' : 'batch';
    }
    return id === '_search' || (type === '_search' && id === undefined) ? 'search' : 'create';
  }
  if (method === 'PUT') return 'update';
  if (method === 'PATCH') return 'patch';
  if (method === 'DELETE') return 'delete';
  return 'operation';
}

/** The first `n` characters of a JWT payload claim, read without verifying (the server signed it itself). */
function jwtClaims(token: unknown): Record<string, unknown> {
  if (typeof token !== 'string') return {};
  try {
    return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as Record<
      string,
      unknown
    >;
  } catch {
    return {};
  }
}

const str = (v: unknown): string | undefined =>
  typeof v === 'string' && v !== '' ? v.slice(0, 256) : undefined;

/** What a login request named as its user (never a secret): the user name, email or client id. */
function loginIdentifier(request: FastifyRequest): string | undefined {
  const body = (request.body ?? {}) as Record<string, unknown>;
  const first = (v: unknown): unknown => (Array.isArray(v) ? v[0] : v);
  const named = str(first(body.username)) ?? str(first(body.email)) ?? str(first(body.client_id));
  if (named) return named;
  const basic = /^Basic\s+(.+)$/i.exec(request.headers.authorization ?? '')?.[1];
  if (basic) {
    const user = Buffer.from(basic, 'base64').toString('utf8').split(':')[0];
    return str(user ? decodeURIComponent(user) : undefined);
  }
  return undefined;
}

/** The login a token endpoint's answer issued: its project and profile, and the client it was issued to. */
function issuedLogin(payload: string | null): { projectId?: string; who?: string; client?: string } {
  if (!payload || !payload.includes('access_token')) return {};
  try {
    const body = JSON.parse(payload) as {
      access_token?: unknown;
      project?: { reference?: unknown };
      profile?: { reference?: unknown };
    };
    const claims = jwtClaims(body.access_token);
    const project = str(body.project?.reference)?.replace(/^Project\//, '');
    const who = str(body.profile?.reference);
    const client = str(claims.client_id);
    return {
      ...(project ? { projectId: project } : {}),
      ...(who ? { who } : {}),
      ...(client ? { client: `ClientApplication/${client}` } : {}),
    };
  } catch {
    return {};
  }
}

function facts(request: FastifyRequest, kind: AuditKind): RequestFacts {
  return {
    // A Bundle's kind (batch or transaction) is known once its body is parsed.
    kind: () => (kind === 'batch' ? (kindOf(request) ?? kind) : kind),
    projectId: () => request.principal?.projectId ?? issuedLogin(request.auditPayload).projectId ?? '',
    agent: (): AuditAgent => {
      const p = request.principal;
      const address = request.ip;
      if (p) {
        return {
          who: p.profile,
          membership: `ProjectMembership/${p.membershipId}`,
          ...(p.clientId ? { client: `ClientApplication/${p.clientId}` } : {}),
          address,
        };
      }
      const issued = issuedLogin(request.auditPayload);
      if (issued.who)
        return { who: issued.who, ...(issued.client ? { client: issued.client } : {}), address };
      const identifier = kind === 'login' || kind === 'logout' ? loginIdentifier(request) : undefined;
      return { ...(identifier ? { identifier } : {}), address };
    },
  };
}

/** The error text of a failed answer (an OperationOutcome's diagnostics or details, an OAuth error description). */
function failureOf(payload: string | null): string | undefined {
  if (!payload || payload.length > 65_536) return undefined;
  try {
    const body = JSON.parse(payload) as {
      issue?: { diagnostics?: unknown; details?: { text?: unknown } }[];
      error?: unknown;
      error_description?: unknown;
    };
    const issue = body.issue?.[0];
    return (
      str(issue?.diagnostics) ?? str(issue?.details?.text) ?? str(body.error_description) ?? str(body.error)
    );
  } catch {
    return undefined;
  }
}

const ETAG = /^W\/"(\d+)"$/;

/** The resource a JSON answer is (an admin endpoint's ProjectMembership), read from its first properties. */
function answeredResource(payload: string | null): string | undefined {
  if (!payload || payload.length > 65_536 || !payload.startsWith('{"resourceType"')) return undefined;
  try {
    const r = JSON.parse(payload) as { resourceType?: unknown; id?: unknown };
    return typeof r.resourceType === 'string' &&
      typeof r.id === 'string' &&
      r.resourceType !== 'OperationOutcome'
      ? `${r.resourceType}/${r.id}`
      : undefined;
  } catch {
    return undefined;
  }
}

const ADMIN_TARGET: Record<string, string> = { projects: 'Project', users: 'User' };

/** What the answer held: the resource a read returned, the query of a search, the patients of any. */
function describe(request: FastifyRequest, reply: FastifyReply, rec: AuditRecorder, kind: AuditKind) {
  const path = pathOf(request.url);
  const segments = path.split('/').filter((s) => s !== '');
  const fhir = path.startsWith('/fhir/R4');
  const ok = reply.statusCode < 400;
  const [type, id] = fhir ? segments.slice(2) : [];
  if (fhir && type && id && !id.startsWith('$') && !id.startsWith('_') && /^[A-Z]/.test(type)) {
    if (kind === 'read' || kind === 'vread' || kind === 'history' || kind === 'operation' || !ok) {
      const etag = ETAG.exec(String(reply.getHeader('etag') ?? ''))?.[1];
      const version = kind === 'vread' ? segments[5] : kind === 'history' ? undefined : etag;
      rec.entities.push({ reference: `${type}/${id}`, ...(version && ok ? { version } : {}) });
      if (type === 'Patient') rec.patients.add(`Patient/${id}`);
    }
  } else if (segments[0] === 'admin') {
    // `/admin/projects/<id>/invite`, `/admin/users/<id>/password`: the project or user acted on, and what was made.
    const target = ADMIN_TARGET[segments[1] ?? ''];
    if (target && segments[2]) rec.entities.push({ reference: `${target}/${segments[2]}` });
    const made = ok ? answeredResource(request.auditPayload) : undefined;
    if (made) rec.entities.push({ reference: made });
  }
  if (ok && request.auditPayload && (request.method === 'GET' || request.method === 'POST'))
    patientsInJson(request.auditPayload, rec.patients, kind === 'batch' || kind === 'transaction');
  const q = request.url.indexOf('?');
  let query = q < 0 ? '' : request.url.slice(q + 1);
  if (kind === 'search' && request.method === 'POST' && request.body && typeof request.body === 'object') {
    const form = new URLSearchParams(
      Object.entries(request.body as Record<string, unknown>).flatMap(([k, v]) =>
        [v].flat().map((x) => [k, String(x)]),
      ),
    ).toString();
    query = query ? `${query}&${form}` : form;
  }
  const failure = ok ? undefined : failureOf(request.auditPayload);
  return {
    // A search's query; an operation's (or admin action's) request, so that the trail says which one it was.
    ...(kind === 'search' || kind === 'operation' ? { query, description: `${request.method} ${path}` } : {}),
    ...(failure ? { failure } : {}),
  };
}

/** Parses `X-Provenance` (API.md §10): a Provenance without `target`, stored beside the request's writes. */
function provenanceOf(header: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(header);
  } catch {
    throw new FhirError(
      'invalid',
      'X-Provenance must be a Provenance resource as JSON',
      'audit.provenance-json',
    );
  }
  if (!value || typeof value !== 'object' || Array.isArray(value))
    throw new FhirError(
      'invalid',
      'X-Provenance must be a Provenance resource as JSON',
      'audit.provenance-json',
    );
  const p = value as Record<string, unknown>;
  if (p.resourceType !== 'Provenance')
    throw new FhirError('invalid', 'X-Provenance must have resourceType Provenance', 'audit.provenance-type');
  if (p.target !== undefined)
    throw new FhirError(
      'invalid',
      'X-Provenance must not have a target: the server sets it to what the request writes',
      'audit.provenance-target',
    );
  return p;
}

/** Register before authentication (a refused token is recorded too). */
export function registerAudit(app: FastifyInstance, deps: AuditHttpDeps): void {
  app.decorateRequest('audit', null);
  app.decorateRequest('auditPayload', null);
  // Callback hooks (no promise per request on the hot path).
  app.addHook('onRequest', (request, _reply, done) => {
    const kind = kindOf(request);
    if (kind !== undefined) request.audit = new AuditRecorder(deps.env, facts(request, kind));
    done();
  });
  app.addHook('preHandler', (request, _reply, done) => {
    const header = request.headers['x-provenance'];
    if (!request.audit || header === undefined || request.method === 'GET' || request.method === 'HEAD')
      return done();
    try {
      request.audit.provenance = provenanceOf(Array.isArray(header) ? header.join(',') : header);
    } catch (err) {
      return done(err as Error);
    }
    done();
  });
  app.addHook('onSend', (request, _reply, payload, done) => {
    // An XML answer is read as the JSON it was made from (http/reply.ts).
    if (request.audit && typeof payload === 'string')
      request.auditPayload = jsonOfXmlAnswer.get(request) ?? payload;
    done(null, payload);
  });
  app.addHook('onResponse', (request, reply, done) => {
    const rec = request.audit;
    if (!rec) return done();
    try {
      const kind = rec.request.kind();
      deps.writer.stored(rec.storedRows);
      const settled = rec.storedWithWrites && rec.pending().length === 0 && reply.statusCode < 400;
      if (!(settled && kind !== 'batch'))
        deps.writer.add(rec.finish(reply.statusCode, describe(request, reply, rec, kind)));
    } catch (err) {
      request.log.error({ err }, 'the AuditEvent of this request could not be built');
    } finally {
      request.auditPayload = null;
      done();
    }
  });
}
