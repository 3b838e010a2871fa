// What the auth functions need, passed in by the app (never read from globals).
import type { Db } from '../storage/db.js';
import type { TokenIssuer } from './access-token.js';
import type { ExternalValidator } from './external/validate-external-token.js';
import type { PrincipalCache } from './principal-cache.js';

export interface AuthDeps {
  db: Db;
  tokens: TokenIssuer;
  clock: () => Date;
  newId: () => string;
  accessTokenLifetime: number;
  principals: PrincipalCache;
  /** Validator of external identity providers' JWTs (API.md §4); absent when none is configured. */
  external?: ExternalValidator;
  /**
   * Config `allowedOutboundHosts`: hosts a tenant's URLs (token exchange userinfo, jwksUri) may name even when they
   * resolve to loopback or private addresses (API.md §2). Absent: none.
   */
  allowedOutboundHosts?: readonly string[];
}

export const nowSeconds = (deps: Pick<AuthDeps, 'clock'>): number =>
  Math.floor(deps.clock().getTime() / 1000);
