// Binding tokens (binding-token.ts): what they carry, how long they last, and that access tokens are not them.
import { exportJWK, generateKeyPair, type CryptoKey } from 'jose';
import { describe, expect, it } from 'vitest';
import { createTokenIssuer } from '../../auth/access-token.js';
import { SIGNING_ALG, type KeyRing } from '../../auth/keys.js';
import {
  BINDING_TOKEN_LIFETIME_SECONDS,
  createBindingTokens,
  InvalidBindingTokenError,
  websocketUrl,
} from './binding-token.js';

async function ring(): Promise<KeyRing> {
  const { privateKey, publicKey } = await generateKeyPair(SIGNING_ALG, { extractable: true });
  return {
    current: { kid: 'k1', privateKey, publicJwk: await exportJWK(publicKey) },
    publicKeys: new Map<string, CryptoKey>([['k1', publicKey]]),
    jwks: { keys: [] },
  };
}

const BASE = 'https://cinder.example/';
const claims = { subscriptionId: 's1', projectId: 'p1', caller: 'Practitioner/x', membershipId: 'm1' };

describe('binding tokens', () => {
  it('carry the subscription, project and caller, for BINDING_TOKEN_LIFETIME_SECONDS', async () => {
    const tokens = createBindingTokens(await ring(), BASE, websocketUrl(BASE));
    const now = new Date('2026-01-01T00:00:00Z');
    const { token, expiration } = await tokens.issue(claims, now);
    expect(expiration.getTime() - now.getTime()).toBe(BINDING_TOKEN_LIFETIME_SECONDS * 1000);
    expect(await tokens.verify(token, new Date(expiration.getTime() - 1000))).toEqual(claims);
    await expect(tokens.verify(token, expiration)).rejects.toThrow(/expired/);
    await expect(tokens.verify('not.a.token', now)).rejects.toThrow(InvalidBindingTokenError);
  });

  it('are not access tokens, and access tokens are not binding tokens', async () => {
    const keys = await ring();
    const tokens = createBindingTokens(keys, BASE, websocketUrl(BASE));
    const access = createTokenIssuer(keys, BASE);
    const now = Math.floor(Date.now() / 1000);
    const binding = (await tokens.issue(claims, new Date())).token;
    await expect(access.verify(binding, now)).rejects.toThrow();
    const at = await access.sign({ sub: 'u', login_id: 'l', profile: 'Practitioner/x', scope: '' }, 60, now);
    await expect(tokens.verify(at, new Date())).rejects.toThrow(InvalidBindingTokenError);
  });

  it('the websocket URL follows the base URL: http→ws, https→wss, its path kept', () => {
    expect(websocketUrl('http://localhost:8103/')).toBe('ws://localhost:8103/ws/subscriptions-r4');
    expect(websocketUrl('https://example.org/cinder/')).toBe('wss://example.org/cinder/ws/subscriptions-r4');
  });
});
