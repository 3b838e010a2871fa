// Issue 25 point 8: the console's bearer token goes to this server only. Bundle links and job output URLs come from
// answers a tenant can shape; an absolute URL elsewhere is refused before anything is sent.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createApi, underBase } from './api.js';
import { envFrom } from './env.js';
import { saveSession } from './session.js';

describe('console API client', () => {
  const env = envFrom('https://fhir.example.org/cinder/console/jobs');
  const sent: { url: string; authorization: string | undefined }[] = [];

  beforeEach(() => {
    const items = new Map<string, string>();
    vi.stubGlobal('sessionStorage', {
      getItem: (k: string) => items.get(k) ?? null,
      setItem: (k: string, v: string) => void items.set(k, v),
      removeItem: (k: string) => void items.delete(k),
    });
    vi.stubGlobal('fetch', (url: string, init: { headers: Record<string, string> }) => {
      sent.push({ url, authorization: init.headers.authorization });
      return Promise.resolve(new Response('{}', { status: 200 }));
    });
    saveSession({ accessToken: 'the-token', expiresAt: Date.now() + 60_000 });
    sent.length = 0;
  });
  afterEach(() => vi.unstubAllGlobals());

  it('sends the token with relative paths and absolute URLs under its base', async () => {
    const api = createApi(env);
    await api.request('Patient?_count=1');
    await api.request('/admin/projects');
    await api.request('https://fhir.example.org/cinder/fhir/R4/AsyncJob/1/output/Patient.ndjson');
    expect(sent).toEqual([
      { url: 'https://fhir.example.org/cinder/fhir/R4/Patient?_count=1', authorization: 'Bearer the-token' },
      { url: 'https://fhir.example.org/cinder/admin/projects', authorization: 'Bearer the-token' },
      {
        url: 'https://fhir.example.org/cinder/fhir/R4/AsyncJob/1/output/Patient.ndjson',
        authorization: 'Bearer the-token',
      },
    ]);
  });

  it('refuses any other origin or path, and sends nothing', async () => {
    const api = createApi(env);
    for (const url of [
      'https://attacker.example/fhir/R4/Patient',
      'http://fhir.example.org/cinder/fhir/R4/Patient', // another scheme is another origin
      'https://fhir.example.org:8443/cinder/fhir/R4/Patient',
      'https://fhir.example.org/other/fhir/R4/Patient', // another base path on the same host
      'https://user:pw@fhir.example.org/cinder/fhir/R4/Patient',
      'HTTPS://attacker.example/x',
      'javascript:alert(1)',
    ]) {
      await expect(api.request(url), url).rejects.toThrow(/Not a URL of this server/);
    }
    expect(sent).toEqual([]);
    expect(underBase(env, 'https://fhir.example.org/cinder/../other/fhir/R4')).toBe(false);
  });
});
