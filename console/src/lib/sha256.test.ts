// The plain SHA-256 fallback gives the same digests as Web Crypto, at every padding boundary.
import { describe, expect, it } from 'vitest';
import { sha256 } from './sha256.js';

const hex = (b: Uint8Array): string => [...b].map((x) => x.toString(16).padStart(2, '0')).join('');

describe('sha256', () => {
  it('matches the FIPS 180-4 examples', () => {
    expect(hex(sha256(new TextEncoder().encode('abc')))).toBe(
      'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    );
    expect(hex(sha256(new Uint8Array(0)))).toBe(
      'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    );
  });

  it('matches Web Crypto for lengths around the 55/56/64-byte block boundaries and beyond', async () => {
    for (const n of [1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000]) {
      const data = new Uint8Array(n).map((_, i) => (i * 31 + n) & 0xff);
      const expected = new Uint8Array(await crypto.subtle.digest('SHA-256', data));
      expect(hex(sha256(data)), String(n)).toBe(hex(expected));
    }
  });
});
