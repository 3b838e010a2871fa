// OAuth 2.0 token endpoint (RFC 6749 §3.2) and the login's own description at /auth/me (API.md §2).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { clientCredentialsGrant } from '../../auth/client-credentials.js';
import type { AuthDeps } from '../../auth/deps.js';
import { OAuthError } from '../../auth/oauth-error.js';
import { userinfo } from '../../auth/userinfo.js';
import { selectCurrent } from '../../fhir/repository/store.js';
import type { FormBody } from '../plugins/content-types.js';
import { principalOf } from '../plugins/auth.js';

function one(body: FormBody, key: string): string | undefined {
  const v = body[key];
  return Array.isArray(v) ? undefined : v;
}

/** HTTP Basic client authentication (RFC 6749 §2.3.1). */
function basicCredentials(header: string | undefined): { id?: string; secret?: string } {
  const m = header ? /^Basic\s+(\S+)$/i.exec(header) : null;
  if (!m) return {};
  const text = Buffer.from(m[1] as string, 'base64').toString('utf8');
  const i = text.indexOf(':');
  if (i < 0) return {};
  return { id: decodeURIComponent(text.slice(0, i)), secret: decodeURIComponent(text.slice(i + 1)) };
}

export function oauthRoutes(app: FastifyInstance, deps: AuthDeps): void {
  app.post('/oauth2/token', { config: { public: true } }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    try {
      const ct = request.headers['content-type'] ?? '';
      if (
        !ct.startsWith('application/x-www-form-urlencoded') ||
        typeof request.body !== 'object' ||
        request.body === null
      ) {
        throw new OAuthError('invalid_request', 'The body must be application/x-www-form-urlencoded');
      }
      const body = request.body as FormBody;
      const grant = one(body, 'grant_type');
      if (!grant) throw new OAuthError('invalid_request', 'grant_type is required');
      if (grant === 'client_credentials') {
        const basic = basicCredentials(request.headers.authorization);
        return await clientCredentialsGrant(
          deps,
          basic.id ?? one(body, 'client_id'),
          basic.secret ?? one(body, 'client_secret'),
        );
      }
      throw new OAuthError('unsupported_grant_type', `Unsupported grant_type: ${grant.slice(0, 80)}`);
    } catch (err) {
      if (err instanceof OAuthError) return reply.code(err.status).send(err.toJSON());
      throw err;
    }
  });

  const userinfoHandler = async (request: FastifyRequest): Promise<Record<string, unknown>> =>
    userinfo(deps, principalOf(request));
  app.get('/oauth2/userinfo', userinfoHandler);
  app.post('/oauth2/userinfo', userinfoHandler);

  app.get('/auth/me', async (request) => {
    const p = principalOf(request);
    const [type, id] = p.profile.split('/') as [string, string];
    const [profile, membership, project] = await Promise.all([
      selectCurrent(deps.db, type, id),
      selectCurrent(deps.db, 'ProjectMembership', p.membershipId),
      selectCurrent(deps.db, 'Project', p.projectId),
    ]);
    const parse = (row: { json: string } | undefined): unknown => (row ? JSON.parse(row.json) : undefined);
    return { profile: parse(profile), project: parse(project), membership: parse(membership) };
  });
}
