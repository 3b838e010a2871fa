// The console's URLs and sign-in request come from where it is served, under any base path.
import { describe, expect, it } from 'vitest';
import { authorizeUrl, CONSOLE_SCOPE } from './auth.js';
import { envFrom, routeOf } from './env.js';
import { displayName, entries, linkOf, type Bundle } from './fhir.js';
import { operationOf, outputFiles } from './jobs.js';

describe('env', () => {
  it('derives base, console and FHIR URLs from a deep client route under a base path', () => {
    const env = envFrom('https://fhir.example.org/cinder/console/resources/Patient/1?x=1');
    expect(env).toEqual({
      base: 'https://fhir.example.org/cinder/',
      consoleBase: 'https://fhir.example.org/cinder/console/',
      fhir: 'https://fhir.example.org/cinder/fhir/R4',
    });
    expect(routeOf(env, 'https://fhir.example.org/cinder/console/resources/Patient/1/?x=1')).toBe(
      'resources/Patient/1',
    );
    expect(routeOf(env, 'https://fhir.example.org/cinder/console/?code=1')).toBe('');
  });

  it('asks the authorize endpoint for a code with PKCE S256, the console redirect URI and the FHIR base as aud', () => {
    const env = envFrom('http://localhost:8103/console/');
    const url = new URL(authorizeUrl(env, 'st', 'ch'));
    expect(`${url.origin}${url.pathname}`).toBe('http://localhost:8103/oauth2/authorize');
    expect(Object.fromEntries(url.searchParams)).toEqual({
      response_type: 'code',
      client_id: 'cinder-console',
      redirect_uri: 'http://localhost:8103/console/',
      scope: CONSOLE_SCOPE,
      state: 'st',
      aud: 'http://localhost:8103/fhir/R4',
      code_challenge: 'ch',
      code_challenge_method: 'S256',
    });
  });
});

describe('fhir and job readers', () => {
  it('reads Bundle matches, links and names', () => {
    const b: Bundle = {
      resourceType: 'Bundle',
      link: [{ relation: 'next', url: 'http://x/fhir/R4/Patient?_cursor=2' }],
      entry: [
        { resource: { resourceType: 'Patient', id: 'p', name: [{ given: ['Ann'], family: 'Lee' }] } },
        { resource: { resourceType: 'Practitioner', id: 'd' }, search: { mode: 'include' } },
      ],
    };
    expect(entries(b, true).map((r) => r.id)).toEqual(['p']);
    expect(entries(b).map((r) => r.id)).toEqual(['p', 'd']);
    expect(linkOf(b, 'next')).toBe('http://x/fhir/R4/Patient?_cursor=2');
    expect(linkOf(b, 'previous')).toBeUndefined();
    expect(displayName(entries(b)[0])).toBe('Ann Lee');
    expect(displayName(entries(b)[1])).toBe('Practitioner/d');
    expect(displayName({ resourceType: 'Project', id: 'x', name: 'Demo' })).toBe('Demo');
  });

  it("lists a completed job's output files and names its operation", () => {
    const job = {
      resourceType: 'AsyncJob',
      request: 'http://x/fhir/R4/Patient/$export?_type=Patient',
      output: {
        parameter: [
          {
            name: 'output',
            part: [
              { name: 'type', valueCode: 'Patient' },
              { name: 'url', valueUri: 'http://x/fhir/R4/AsyncJob/j/output/Patient.ndjson' },
            ],
          },
          { name: 'transactionTime' },
        ],
      },
    };
    expect(outputFiles(job)).toEqual([
      { name: 'Patient.ndjson', url: 'http://x/fhir/R4/AsyncJob/j/output/Patient.ndjson' },
    ]);
    expect(operationOf(job.request)).toBe('$export');
    expect(operationOf(undefined)).toBe('—');
  });
});
