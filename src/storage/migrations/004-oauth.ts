// Authorization codes of POST /auth/login and refresh tokens of the code flow (API.md §2, RFC 6749 §4.1 and §6,
// RFC 6819 §5.2.2.3). Only SHA-256 hashes of codes and tokens are stored; `used_at` makes both single-use, and a
// used row is kept until it expires so that a replay can be detected.
export const version = 4;
export const sql = `
CREATE TABLE oauth_codes (
  code_hash text PRIMARY KEY,
  login_id text NOT NULL,
  code_challenge text NOT NULL,
  scope text NOT NULL,
  nonce text,
  auth_time bigint NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX oauth_codes_expires ON oauth_codes (expires_at);

CREATE TABLE refresh_tokens (
  token_hash text PRIMARY KEY,
  login_id text NOT NULL,
  scope text NOT NULL,
  auth_time bigint NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX refresh_tokens_login ON refresh_tokens (login_id);
CREATE INDEX refresh_tokens_expires ON refresh_tokens (expires_at);

CREATE INDEX logins_user ON logins (user_id) WHERE user_id IS NOT NULL;
`;
