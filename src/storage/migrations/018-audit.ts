// The audit trail (API.md §10, issue 28): AuditEvents live in their own append-only table, not among the resources.
// Rows are only inserted (a write's AuditEvent in the write's own statement or transaction, reads' in batches), never
// updated: the sealer (src/audit/chain.ts) takes each new row from audit_unsealed and records its place in its
// project's hash chain in audit_chain (chain_no, and the hash of that place: sha256 of the previous hash and the row's
// exact `content`). Retention deletes the oldest
// rows by `recorded`. Search reads the columns below, never the JSON.
// AuditEvents that clients stored as ordinary resources before this migration move here (unsealed, then sealed), and
// leave the resource tables.
export const version = 18;
export const sql = `
CREATE TABLE audit_events (
  seq bigserial PRIMARY KEY,
  id text NOT NULL,
  -- The project of the request's login; '' when there was none (a failed login, a request without a valid token).
  project_id text NOT NULL,
  recorded timestamptz NOT NULL,
  -- Search columns: type and each subtype as 'system|code'; action and outcome codes; references as 'Type/id'.
  type text NOT NULL,
  subtype text[] NOT NULL,
  action text,
  outcome text NOT NULL,
  agents text[] NOT NULL,
  entities text[] NOT NULL,
  patients text[] NOT NULL,
  -- The AuditEvent's JSON exactly as hashed and served.
  content text NOT NULL
);
CREATE UNIQUE INDEX audit_events_id ON audit_events (id);
-- Searches page newest first by (recorded, seq), within a project or (a super administrator) across all; retention
-- finds the oldest by the second.
CREATE INDEX audit_events_project ON audit_events (project_id, recorded, seq);
CREATE INDEX audit_events_recorded ON audit_events (recorded, seq);
CREATE INDEX audit_events_patients ON audit_events USING gin (patients);
CREATE INDEX audit_events_agents ON audit_events USING gin (agents);
CREATE INDEX audit_events_entities ON audit_events USING gin (entities);
-- Rows not sealed yet (every insert adds its seq here; the sealer takes them out): the sealer's to-do list, so that
-- audit_events rows are only ever inserted, never updated.
-- With the sha256 of the row's content (hex), taken when it is stored: sealing links it without reading the row back.
CREATE TABLE audit_unsealed (seq bigint PRIMARY KEY, project_id text NOT NULL, content_hash text NOT NULL);
-- Each sealed row's place in its project's chain: chain_no, the previous link's hash, its own hash.
CREATE TABLE audit_chain (
  seq bigint PRIMARY KEY,
  project_id text NOT NULL,
  chain_no bigint NOT NULL,
  prev_hash text NOT NULL,
  hash text NOT NULL
);
CREATE UNIQUE INDEX audit_chain_link ON audit_chain (project_id, chain_no);
-- Each project's last sealed link: the next row's prev_hash, and the end a verification must reach.
CREATE TABLE audit_chain_heads (
  project_id text PRIMARY KEY,
  chain_no bigint NOT NULL,
  hash text NOT NULL
);
INSERT INTO audit_events (id, project_id, recorded, type, subtype, action, outcome, agents, entities, patients, content)
SELECT r.id, r.project_id, COALESCE((r.content->>'recorded')::timestamptz, r.last_updated),
  COALESCE(r.content->'type'->>'system', '') || '|' || COALESCE(r.content->'type'->>'code', ''),
  ARRAY(SELECT COALESCE(s->>'system', '') || '|' || COALESCE(s->>'code', '')
        FROM json_array_elements(CASE WHEN json_typeof(r.content->'subtype') = 'array' THEN r.content->'subtype' ELSE '[]'::json END) s),
  r.content->>'action', COALESCE(r.content->>'outcome', ''),
  ARRAY(SELECT a->'who'->>'reference'
        FROM json_array_elements(CASE WHEN json_typeof(r.content->'agent') = 'array' THEN r.content->'agent' ELSE '[]'::json END) a
        WHERE a->'who'->>'reference' IS NOT NULL),
  ARRAY(SELECT e->'what'->>'reference'
        FROM json_array_elements(CASE WHEN json_typeof(r.content->'entity') = 'array' THEN r.content->'entity' ELSE '[]'::json END) e
        WHERE e->'what'->>'reference' IS NOT NULL),
  ARRAY(SELECT e->'what'->>'reference'
        FROM json_array_elements(CASE WHEN json_typeof(r.content->'entity') = 'array' THEN r.content->'entity' ELSE '[]'::json END) e
        WHERE e->'what'->>'reference' LIKE 'Patient/%'),
  r.content::text
FROM resources r WHERE r.resource_type = 'AuditEvent' AND NOT r.deleted;
INSERT INTO audit_unsealed (seq, project_id, content_hash)
  SELECT seq, project_id, encode(sha256(convert_to(content, 'UTF8')), 'hex') FROM audit_events;
-- The copies are gone from among the resources: an AuditEvent is read only as API.md §10 says (no _revinclude or
-- _history of the old rows around those rules).
CREATE TEMP TABLE audit_moved AS SELECT rid FROM resources WHERE resource_type = 'AuditEvent';
DELETE FROM sp_string WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_token WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_reference WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_date WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_number WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_quantity WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_uri WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM sp_identifier WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM resource_history WHERE rid IN (SELECT rid FROM audit_moved);
DELETE FROM resources WHERE rid IN (SELECT rid FROM audit_moved);
DROP TABLE audit_moved;
`;
