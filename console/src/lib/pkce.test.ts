// PKCE S256 as RFC 7636 Appendix B computes it, with and without Web Crypto, and verifiers of the allowed shape.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { base64url, randomToken, s256Challenge } from './pkce.js';

const RFC_VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const RFC_CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

describe('pkce', () => {
  afterEach(() => vi.unstubAllGlobals());

  it('computes the RFC 7636 Appendix B challenge with Web Crypto', async () => {
    expect(await s256Challenge(RFC_VERIFIER)).toBe(RFC_CHALLENGE);
  });

  it('computes the same challenge where crypto.subtle is missing (plain http, not localhost)', async () => {
    vi.stubGlobal('crypto', { getRandomValues: globalThis.crypto.getRandomValues.bind(globalThis.crypto) });
    expect(globalThis.crypto.subtle).toBeUndefined();
    expect(await s256Challenge(RFC_VERIFIER)).toBe(RFC_CHALLENGE);
  });

  it('makes 43-character unreserved verifiers that differ each time', () => {
    const a = randomToken();
    expect(a).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(randomToken()).not.toBe(a);
    expect(base64url(new Uint8Array([0xfb, 0xff]))).toBe('-_8');
  });
});
