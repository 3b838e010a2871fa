// OAuth 2.0 error responses (RFC 6749 §5.2): `{error, error_description}` with 400, or 401 for invalid_client;
// `temporarily_unavailable` (RFC 6749 §4.1.2.1) with 429 and Retry-After when the client is throttled.
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'temporarily_unavailable'
  // Authorization endpoint errors (RFC 6749 §4.1.2.1), sent back to the client's redirect_uri.
  | 'access_denied'
  | 'unsupported_response_type'
  | 'server_error';

export class OAuthError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    opts: { status?: number; headers?: Record<string, string> } = {},
  ) {
    super(description);
    this.name = 'OAuthError';
    this.status = opts.status ?? (error === 'invalid_client' ? 401 : 400);
    this.headers = opts.headers ?? {};
  }

  toJSON(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}
