// When a ProjectMembership can be logged in through, and when a login made through one still holds (API.md §3, §4).
// Every path that starts a login or turns a token into a Principal uses these SQL conditions, so that data that
// reached the database before the write rules existed (a restore, an old bug) can never lend a login another
// project's resource, another project's client, or a client, user or membership that was deleted or deactivated.

import { isConsoleClientSql } from './console-client.js';

/** `<Type>/<id>` and nothing else: the only reference form a membership's `profile` and `user` are resolved in. */
const LOCAL_REF = `'^[A-Za-z]{1,64}/[A-Za-z0-9.-]{1,64}$'`;

/** ClientApplication.status is `active | error | off` (Medplum definition); only `active` (or none) may log in. */
export const clientActive = (c: string): string => `coalesce(${c}.content->>'status', 'active') = 'active'`;

/**
 * SQL condition on membership alias `m` and project alias `p` (both from `resources`): the membership is live and
 * active, lives in the project it names, that project is live, its `profile` is a live resource of that same
 * project, and its `user` is a live User (any project: a User may belong to several) or a live, active
 * ClientApplication of that same project.
 */
export function usableMembership(m: string, p: string): string {
  const profile = `${m}.content->'profile'->>'reference'`;
  const user = `${m}.content->'user'->>'reference'`;
  return `${m}.resource_type = 'ProjectMembership' AND NOT ${m}.deleted
    AND coalesce(${m}.content->>'active', 'true') <> 'false'
    AND ${p}.resource_type = 'Project' AND ${p}.id = ${m}.project_id AND NOT ${p}.deleted
    AND ${m}.content->'project'->>'reference' = 'Project/' || ${m}.project_id
    AND ${profile} ~ ${LOCAL_REF} AND EXISTS (
      SELECT 1 FROM resources pr
      WHERE pr.resource_type = split_part(${profile}, '/', 1) AND pr.id = split_part(${profile}, '/', 2)
        AND NOT pr.deleted AND pr.project_id = ${m}.project_id)
    AND ${user} ~ ${LOCAL_REF} AND CASE split_part(${user}, '/', 1)
      WHEN 'User' THEN EXISTS (
        SELECT 1 FROM resources u
        WHERE u.resource_type = 'User' AND u.id = split_part(${user}, '/', 2) AND NOT u.deleted)
      WHEN 'ClientApplication' THEN EXISTS (
        SELECT 1 FROM resources c
        WHERE c.resource_type = 'ClientApplication' AND c.id = split_part(${user}, '/', 2) AND NOT c.deleted
          AND c.project_id = ${m}.project_id AND ${clientActive('c')})
      ELSE false END`;
}

/**
 * SQL condition on login alias `l` (columns of the `logins` table) and its membership `m`: the login still
 * matches its membership (project, profile, user), its client is live, active and of the login's project (or, for a
 * password sign-in, the admin console's client: console-client.ts), and
 * nothing it was made through — membership, client, user, project — was deleted or deactivated since the login
 * began (so reactivating or re-creating one does not revive old tokens).
 */
export function loginHolds(l: string, m: string): string {
  return `${m}.project_id = ${l}.project_id
    AND ${m}.content->'profile'->>'reference' = ${l}.profile
    AND (${l}.user_id IS NULL OR ${m}.content->'user'->>'reference' = 'User/' || ${l}.user_id)
    AND (${l}.auth_method <> 'client_credentials'
         OR ${m}.content->'user'->>'reference' = 'ClientApplication/' || ${l}.client_id)
    AND (${l}.client_id IS NULL OR EXISTS (
      SELECT 1 FROM resources c
      WHERE c.resource_type = 'ClientApplication' AND c.id = ${l}.client_id AND NOT c.deleted
        AND (c.project_id = ${l}.project_id OR (${l}.auth_method = 'password' AND ${isConsoleClientSql('c')}))
        AND ${clientActive('c')}))
    AND NOT EXISTS (
      SELECT 1 FROM resources x CROSS JOIN LATERAL (
        SELECT p.last_updated, p.deleted, p.content FROM resource_history p WHERE p.rid = x.rid
        UNION ALL SELECT x.last_updated, x.deleted, x.content) h
      WHERE h.last_updated > ${l}.created_at AND (
        (x.resource_type = 'ProjectMembership' AND x.id = ${l}.membership_id
          AND (h.deleted OR h.content->>'active' = 'false'))
        OR (x.resource_type = 'ClientApplication' AND x.id = ${l}.client_id
          AND (h.deleted OR coalesce(h.content->>'status', 'active') <> 'active'))
        OR (x.resource_type = 'User' AND x.id = ${l}.user_id AND h.deleted)
        OR (x.resource_type = 'Project' AND x.id = ${l}.project_id AND h.deleted)))`;
}

/** Profile types an external identity's `fhirUser` may name (API.md §4): people, never a client, user or membership. */
export const EXTERNAL_PROFILE_TYPES: ReadonlySet<string> = new Set([
  'Patient',
  'Practitioner',
  'RelatedPerson',
]);
