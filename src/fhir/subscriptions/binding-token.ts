// Websocket binding tokens (API.md §8 "Websocket"; https://hl7.org/fhir/uv/subscriptions-backport/STU1.1/channels.html#websockets):
// short-lived JWTs signed with the server's key ring, so that every instance verifies them without a table.
import { errors, jwtVerify, SignJWT } from 'jose';
import { randomUUID } from 'node:crypto';
import { SIGNING_ALG, type KeyRing } from '../../auth/keys.js';
import { isValidId } from '../id.js';

/** How long a binding token may be used to bind a socket (a bound socket stays bound after it expires). */
export const BINDING_TOKEN_LIFETIME_SECONDS = 300;

/**
 * The JWT `typ` of a binding token. Access tokens are `at+jwt` and need `login_id` and `profile` claims, which a
 * binding token never has: neither kind of token is accepted as the other (test/api/subscription-websocket.test.ts).
 */
const BINDING_TYP = 'cinder-ws-binding+jwt';

/** What a binding token says: which subscription, in which project, was asked for by whom. */
export interface BindingClaims {
  subscriptionId: string;
  projectId: string;
  /** The caller: its profile or ClientApplication reference (`Practitioner/…`), else its membership id. */
  caller: string;
  membershipId?: string;
}

export interface IssuedBindingToken {
  token: string;
  expiration: Date;
}

export interface BindingTokens {
  issue(claims: BindingClaims, now: Date): Promise<IssuedBindingToken>;
  /** The claims of a token this server issued and that has not expired; else InvalidBindingTokenError. */
  verify(token: string, now: Date): Promise<BindingClaims>;
}

export class InvalidBindingTokenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidBindingTokenError';
  }
}

const seconds = (d: Date): number => Math.floor(d.getTime() / 1000);

/**
 * Binding tokens of this server: `issuer` is its base URL, `audience` the websocket URL the tokens are for (a token
 * of another server sharing no key, or of another endpoint, is refused).
 */
export function createBindingTokens(ring: KeyRing, issuer: string, audience: string): BindingTokens {
  return {
    async issue(claims, now) {
      const exp = seconds(now) + BINDING_TOKEN_LIFETIME_SECONDS;
      const token = await new SignJWT({
        subscription: claims.subscriptionId,
        project: claims.projectId,
        ...(claims.membershipId ? { membership: claims.membershipId } : {}),
      })
        .setProtectedHeader({ alg: SIGNING_ALG, kid: ring.current.kid, typ: BINDING_TYP })
        .setIssuer(issuer)
        .setAudience(audience)
        .setSubject(claims.caller)
        .setIssuedAt(seconds(now))
        .setExpirationTime(exp)
        .setJti(randomUUID())
        .sign(ring.current.privateKey);
      return { token, expiration: new Date(exp * 1000) };
    },
    async verify(token, now) {
      let payload;
      try {
        ({ payload } = await jwtVerify(
          token,
          (header) => {
            const key = header.kid ? ring.publicKeys.get(header.kid) : undefined;
            if (!key) throw new InvalidBindingTokenError('Unknown signing key');
            return key;
          },
          {
            issuer,
            audience,
            typ: BINDING_TYP,
            algorithms: [SIGNING_ALG],
            currentDate: now,
            requiredClaims: ['exp', 'sub', 'subscription', 'project'],
          },
        ));
      } catch (err) {
        if (err instanceof InvalidBindingTokenError) throw err;
        if (err instanceof errors.JWTExpired) throw new InvalidBindingTokenError('Binding token expired');
        throw new InvalidBindingTokenError('Invalid binding token');
      }
      const { subscription, project, membership, sub } = payload;
      if (
        typeof subscription !== 'string' ||
        !isValidId(subscription) ||
        typeof project !== 'string' ||
        typeof sub !== 'string'
      )
        throw new InvalidBindingTokenError('Invalid binding token');
      return {
        subscriptionId: subscription,
        projectId: project,
        caller: sub,
        ...(typeof membership === 'string' ? { membershipId: membership } : {}),
      };
    },
  };
}

/** Where the websocket endpoint is, below the server's base URL (the path Medplum uses too). */
export const WEBSOCKET_PATH = 'ws/subscriptions-r4';

/** The websocket URL of a server whose base URL is `baseUrl` (ending in `/`): http→ws, https→wss. */
export function websocketUrl(baseUrl: string): string {
  const url = new URL(WEBSOCKET_PATH, baseUrl);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}
