// OAuth 2.0 error responses (RFC 6749 §5.2): `{error, error_description}` with 400, or 401 for invalid_client.
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope';

export class OAuthError extends Error {
  readonly status: number;
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
  ) {
    super(description);
    this.name = 'OAuthError';
    this.status = error === 'invalid_client' ? 401 : 400;
  }

  toJSON(): { error: string; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}
