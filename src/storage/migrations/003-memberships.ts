// ProjectMembership lookups of the auth module, and the database-enforced uniqueness of externalId across all
// projects (API.md §3: two concurrent writes with one externalId cannot both succeed, whichever path writes).
export const version = 3;
export const sql = `
CREATE UNIQUE INDEX resources_membership_external_id ON resources ((content->>'externalId'))
  WHERE resource_type = 'ProjectMembership' AND NOT deleted AND content->>'externalId' IS NOT NULL;
CREATE INDEX resources_membership_user ON resources ((content->'user'->>'reference'))
  WHERE resource_type = 'ProjectMembership';
CREATE INDEX resources_membership_profile ON resources ((content->'profile'->>'reference'))
  WHERE resource_type = 'ProjectMembership';
CREATE INDEX resources_user_email ON resources ((lower(content->>'email')))
  WHERE resource_type = 'User';
`;
