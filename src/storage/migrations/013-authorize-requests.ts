// The browser authorization endpoint (GET/POST {base}oauth2/authorize, RFC 6749 §4.1.1, SMART App Launch 2.x
// https://hl7.org/fhir/smart-app-launch/app-launch.html): its pending requests are kept server-side, so the sign-in
// form carries only an opaque transaction id and the request is never re-read from form fields. Each row is bound to
// the browser that started it (a hash of a cookie value) and is used once. Codes it issues remember the redirect_uri
// of their request (RFC 6749 §4.1.3) and that they came from this endpoint (client_id required at the exchange,
// refresh tokens only with offline_access).
export const version = 13;
export const sql = `
CREATE TABLE authorize_requests (
  id_hash text PRIMARY KEY,
  browser_hash text NOT NULL,
  client_id text NOT NULL,
  client_name text NOT NULL,
  redirect_uri text NOT NULL,
  redirect_uri_sent boolean NOT NULL,
  state text,
  scope text NOT NULL,
  code_challenge text NOT NULL,
  nonce text,
  user_id text,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);
CREATE INDEX authorize_requests_expires ON authorize_requests (expires_at);

ALTER TABLE oauth_codes ADD COLUMN redirect_uri text;
ALTER TABLE oauth_codes ADD COLUMN via_authorize boolean NOT NULL DEFAULT false;
`;
