// Administration of Users: a super administrator sets a User's password (the password of POST /auth/login, API.md §2).
import type { FastifyInstance } from 'fastify';
import type { AuthDeps } from '../../auth/deps.js';
import { setUserPassword } from '../../auth/password-login.js';
import { outcome } from '../../fhir/outcome.js';
import { principalOf } from '../plugins/auth.js';
import { sendOutcome } from '../reply.js';

export function adminUserRoutes(app: FastifyInstance, deps: AuthDeps): void {
  app.post<{ Params: { userId: string } }>('/admin/users/:userId/password', async (request, reply) => {
    await setUserPassword(deps, principalOf(request), request.params.userId, request.body);
    return sendOutcome(reply, 200, outcome('information', 'informational', 'Password set'));
  });
}
