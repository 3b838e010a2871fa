// The `jti` of every client assertion accepted (RFC 7523 §3 item 7, SMART client-confidential-asymmetric: each jti
// is used once), kept until the assertion's own `exp`, in the database every instance shares: an assertion replayed
// against another instance is refused too. (The Cache interface is not used: without Redis it is per process, and
// during a Redis outage it falls back to memory — a replay window — and it has no atomic insert-if-absent.)
export const version = 8;
export const sql = `
CREATE TABLE client_assertion_jtis (
  client_id text NOT NULL,
  jti text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (client_id, jti)
);
CREATE INDEX client_assertion_jtis_expires ON client_assertion_jtis (expires_at);
`;
