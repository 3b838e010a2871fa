// The admin console's own OAuth client (issue 17): a public ClientApplication `cinder-console` of the Super Admin
// project whose only redirect URI is `{baseUrl}console/`, ensured at start-up; it signs a user in through any of their
// memberships (the console is first-party, served by this server, exactly as POST /auth/login is), always with PKCE.
import type { RepoContext } from '../fhir/repository/context.js';
import { updateResource } from '../fhir/repository/update.js';
import type { Db, Queryable } from '../storage/db.js';

/** The console's well-known client id (the single-page app in console/ names it). */
export const CONSOLE_CLIENT_ID = 'cinder-console';
const CONSOLE_NAME = 'Cinder console';

/** The redirect URI of the console for a FHIR base `{baseUrl}fhir/R4`: `{baseUrl}console/`. */
export function consoleRedirectUri(fhirBase: string): string {
  return `${fhirBase.replace(/fhir\/R4\/?$/, '')}console/`;
}

/**
 * SQL condition on ClientApplication alias `c`: `c` is the console client of a live super-administrator project
 * (login-rules.ts lets a login through it hold in any project; a tenant's client named `cinder-console` never does).
 */
export function isConsoleClientSql(c: string): string {
  return `${c}.id = '${CONSOLE_CLIENT_ID}' AND EXISTS (
      SELECT 1 FROM resources sp WHERE sp.resource_type = 'Project' AND sp.id = ${c}.project_id AND NOT sp.deleted
        AND sp.content->>'superAdmin' = 'true')`;
}

/** Whether `clientId` names the console client of the super-administrator project (see isConsoleClientSql). */
export async function isConsoleClient(db: Queryable, clientId: string): Promise<boolean> {
  if (clientId !== CONSOLE_CLIENT_ID) return false;
  const r = await db.query(
    `SELECT 1 FROM resources c WHERE c.resource_type = 'ClientApplication' AND NOT c.deleted AND ${isConsoleClientSql('c')}`,
    [],
  );
  return r.rows.length > 0;
}

/**
 * Ensures the console client in the super-administrator project `projectId` (the caller holds the bootstrap lock):
 * created when missing, its redirect URI and name set back when they differ (the configuration's baseUrl is the source
 * of truth); its `status` is left as an administrator set it. Answers false, changing nothing, when a tenant's project already holds the id: the console then cannot
 * sign in anyone (isConsoleClient is false), and main.ts logs why.
 */
export async function ensureConsoleClient(
  db: Db,
  ctx: RepoContext,
  projectId: string,
  redirectUri: string,
): Promise<boolean> {
  const r = await db.query<{ project_id: string; deleted: boolean; json: string }>(
    `SELECT project_id, deleted, content::text AS json FROM resources WHERE resource_type = 'ClientApplication' AND id = $1`,
    [CONSOLE_CLIENT_ID],
  );
  const row = r.rows[0];
  if (row && row.project_id !== projectId) return false;
  const current = row && !row.deleted ? (JSON.parse(row.json) as Record<string, unknown>) : undefined;
  const wanted = {
    resourceType: 'ClientApplication',
    id: CONSOLE_CLIENT_ID,
    name: CONSOLE_NAME,
    description: 'The admin console served at {base}console/ (a public client: PKCE, no secret)',
    redirectUri,
  };
  const same =
    current &&
    current.redirectUri === redirectUri &&
    current.name === CONSOLE_NAME &&
    current.redirectUris === undefined;
  // A status an administrator set (`off` switches the console's sign-in off) is kept.
  const status = typeof current?.status === 'string' ? { status: current.status } : {};
  if (!same) await updateResource(db, ctx, 'ClientApplication', CONSOLE_CLIENT_ID, { ...wanted, ...status });
  return true;
}
