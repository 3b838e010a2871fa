// Resources (current version + full history), signing keys, credentials and logins.
export const version = 1;
export const sql = `
CREATE TABLE resources (
  rid bigserial PRIMARY KEY,
  resource_type text NOT NULL,
  id text NOT NULL,
  project_id text NOT NULL,
  version_id integer NOT NULL,
  last_updated timestamptz NOT NULL,
  deleted boolean NOT NULL DEFAULT false,
  content jsonb NOT NULL,
  CONSTRAINT resources_type_id UNIQUE (resource_type, id)
);
CREATE INDEX resources_type_project_updated ON resources (resource_type, project_id, last_updated, rid);
CREATE INDEX resources_type_updated ON resources (resource_type, last_updated, rid);

CREATE TABLE resource_history (
  rid bigint NOT NULL,
  resource_type text NOT NULL,
  id text NOT NULL,
  version_id integer NOT NULL,
  project_id text NOT NULL,
  last_updated timestamptz NOT NULL,
  deleted boolean NOT NULL,
  content jsonb,
  PRIMARY KEY (rid, version_id)
);
CREATE INDEX resource_history_type_updated ON resource_history (resource_type, last_updated);

CREATE TABLE signing_keys (
  kid text PRIMARY KEY,
  alg text NOT NULL,
  private_jwk jsonb NOT NULL,
  public_jwk jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Secrets live outside resource content so that no read, search, history or export can return them.
CREATE TABLE credentials (
  resource_type text NOT NULL,
  id text NOT NULL,
  kind text NOT NULL,
  hash text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (resource_type, id, kind)
);

CREATE TABLE logins (
  id text PRIMARY KEY,
  membership_id text NOT NULL,
  project_id text NOT NULL,
  profile text NOT NULL,
  client_id text,
  user_id text,
  auth_method text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked boolean NOT NULL DEFAULT false
);
`;
