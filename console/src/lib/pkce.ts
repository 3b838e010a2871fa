// PKCE for the console's sign-in (RFC 7636 §4.1–4.2, S256): a random verifier and its base64url SHA-256 challenge,
// and the random `state` of the authorization request (RFC 6749 §10.12).
import { sha256 } from './sha256.js';

export function base64url(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** 32 random bytes as base64url: 43 characters of the unreserved set RFC 7636 §4.1 allows. */
export function randomToken(): string {
  return base64url(crypto.getRandomValues(new Uint8Array(32)));
}

/** BASE64URL(SHA256(ASCII(verifier))), with Web Crypto where the page has it and the plain implementation elsewhere. */
export async function s256Challenge(verifier: string): Promise<string> {
  const data = new TextEncoder().encode(verifier);
  const digest = globalThis.crypto?.subtle
    ? new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', data))
    : sha256(data);
  return base64url(digest);
}
