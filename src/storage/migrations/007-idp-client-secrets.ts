// Identity provider client secrets leave resource content (API.md §2: write-only): the `credentials` table gains a
// `secret` column for secrets the server must send on (a row holds a hash or a secret, never both), the secret of each
// live ClientApplication moves there, and every stored version, current and history, loses it.
export const version = 7;
export const sql = `
ALTER TABLE credentials ADD COLUMN secret text;
ALTER TABLE credentials ALTER COLUMN hash DROP NOT NULL;
ALTER TABLE credentials ADD CONSTRAINT credentials_hash_or_secret CHECK ((hash IS NULL) <> (secret IS NULL));

-- The current version is the truth: an update without clientSecret used to drop it, so older versions do not count.
INSERT INTO credentials (resource_type, id, kind, secret)
  SELECT resource_type, id, 'idp_client_secret', content->'identityProvider'->>'clientSecret'
  FROM resources
  WHERE resource_type = 'ClientApplication' AND NOT deleted
    AND jsonb_typeof(content->'identityProvider'->'clientSecret') = 'string'
    AND content->'identityProvider'->>'clientSecret' <> ''
  ON CONFLICT (resource_type, id, kind) DO UPDATE SET secret = EXCLUDED.secret, hash = NULL, updated_at = now();

UPDATE resources SET content = content #- '{identityProvider,clientSecret}'
  WHERE resource_type = 'ClientApplication' AND content->'identityProvider'->'clientSecret' IS NOT NULL;

UPDATE resource_history SET content = content #- '{identityProvider,clientSecret}'
  WHERE resource_type = 'ClientApplication' AND content->'identityProvider'->'clientSecret' IS NOT NULL;
`;
