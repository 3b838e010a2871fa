// Sign-in through a ClientApplication's identity provider at the authorize endpoint (auth/upstream-sign-in.ts): a
// pending authorization request remembers the state it sent to the provider (its hash, to find the request again at
// the callback) and the PKCE verifier of that upstream request.
export const version = 14;
export const sql = `
ALTER TABLE authorize_requests ADD COLUMN upstream_state_hash text;
ALTER TABLE authorize_requests ADD COLUMN upstream_verifier text;
CREATE UNIQUE INDEX authorize_requests_upstream ON authorize_requests (upstream_state_hash);
`;
