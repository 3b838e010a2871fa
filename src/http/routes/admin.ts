// Administration endpoints under /admin (API.md §3).
import type { FastifyInstance } from 'fastify';
import { invite } from '../../auth/invite.js';
import type { Db } from '../../storage/db.js';
import { principalOf } from '../plugins/auth.js';
import { FHIR_JSON } from '../reply.js';

export interface AdminRouteDeps {
  db: Db;
  clock: () => Date;
  newId: () => string;
  fhirBase: string;
  /** Tells every instance that memberships changed (cached principals are dropped). */
  membershipsChanged: () => Promise<void>;
}

export function adminRoutes(app: FastifyInstance, deps: AdminRouteDeps): void {
  app.post<{ Params: { projectId: string } }>('/admin/projects/:projectId/invite', async (request, reply) => {
    const env = { clock: deps.clock, newId: deps.newId, fhirBase: deps.fhirBase };
    const membership = await invite(
      deps.db,
      env,
      principalOf(request),
      request.params.projectId,
      request.body,
    );
    await deps.membershipsChanged();
    return reply.code(200).type(FHIR_JSON).send(JSON.stringify(membership));
  });
}
