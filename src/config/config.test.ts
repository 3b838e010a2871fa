// Configuration (API.md §1): defaults, file + env overrides, one clear line naming a bad key.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig } from './config.js';

describe('configuration', () => {
  it('has the documented defaults', () => {
    const c = parseConfig({});
    expect(c).toMatchObject({
      port: 8103,
      host: '0.0.0.0',
      baseUrl: 'http://localhost:8103/',
      dataDir: './data',
      accessTokenLifetime: 3600,
      externalAuthProviders: [],
    });
    expect(c.admin.email).toBe('admin@example.com');
    expect(c.databaseUrl).toBeUndefined();
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('takes embedded PostgreSQL settings, but none of where it listens', () => {
    expect(parseConfig({}).embeddedPostgresSettings).toEqual({});
    expect(
      parseConfig({ embeddedPostgresSettings: { shared_buffers: '256MB', work_mem: 8192 } })
        .embeddedPostgresSettings,
    ).toEqual({ shared_buffers: '256MB', work_mem: '8192' });
    for (const bad of ['listen_addresses', 'unix_socket_permissions', 'port', 'Shared Buffers', 'a;b'])
      expect(() => parseConfig({ embeddedPostgresSettings: { [bad]: 'x' } })).toThrow(ConfigError);
  });

  it('has the documented reliability defaults, and TRUST_PROXY as a boolean or addresses', () => {
    expect(parseConfig({})).toMatchObject({
      maxHeaderSize: 16_384,
      databasePoolSize: 20,
      databaseConnectTimeout: 5000,
      redisTimeout: 2000,
      externalAuthTimeout: 5000,
      shutdownTimeout: 30_000,
      trustProxy: false,
      rateLimit: { failedLogins: 10, failedLoginWindow: 900, authRequests: 300, authRequestWindow: 60 },
    });
    expect(parseConfig({ rateLimit: { failedLogins: 0 } }).rateLimit).toEqual({
      failedLogins: 0,
      failedLoginWindow: 900,
      authRequests: 300,
      authRequestWindow: 60,
    });
    expect(loadConfig([], { TRUST_PROXY: 'true' }).trustProxy).toBe(true);
    expect(loadConfig([], { TRUST_PROXY: '10.0.0.0/8,127.0.0.1' }).trustProxy).toBe('10.0.0.0/8,127.0.0.1');
    expect(() => parseConfig({ rateLimit: { perMinute: 5 } })).toThrow(/^Invalid configuration: rateLimit: /);
  });

  it('counts search totals up to searchCountLimit (SEARCH_COUNT_LIMIT), 0 for none', () => {
    expect(parseConfig({}).searchCountLimit).toBe(50_000);
    expect(loadConfig([], { SEARCH_COUNT_LIMIT: '0' }).searchCountLimit).toBe(0);
    expect(() => parseConfig({ searchCountLimit: -1 })).toThrow(/^Invalid configuration: searchCountLimit: /);
  });

  it('splits export files at exportFileResources (EXPORT_FILE_RESOURCES), at least 1', () => {
    expect(parseConfig({}).exportFileResources).toBe(100_000);
    expect(loadConfig([], { EXPORT_FILE_RESOURCES: '250' }).exportFileResources).toBe(250);
    expect(() => parseConfig({ exportFileResources: 0 })).toThrow(
      /^Invalid configuration: exportFileResources: /,
    );
  });

  it('keeps no metrics by default; metricsToken (METRICS_TOKEN) turns them on, 32 characters at least, no spaces', () => {
    expect(parseConfig({}).metricsToken).toBeUndefined();
    const token = 'm'.repeat(32);
    expect(loadConfig([], { METRICS_TOKEN: token }).metricsToken).toBe(token);
    expect(() => parseConfig({ metricsToken: 'm'.repeat(31) })).toThrow(
      /^Invalid configuration: metricsToken: /,
    );
    expect(() => parseConfig({ metricsToken: `${token} x` })).toThrow(
      /^Invalid configuration: metricsToken: /,
    );
  });

  it('caps raw Binary uploads at binaryMaxBytes (BINARY_MAX_BYTES), 50 MiB by default, at least 1', () => {
    expect(parseConfig({}).binaryMaxBytes).toBe(50 * 1024 * 1024);
    expect(loadConfig([], { BINARY_MAX_BYTES: '1024' }).binaryMaxBytes).toBe(1024);
    expect(() => parseConfig({ binaryMaxBytes: 0 })).toThrow(/^Invalid configuration: binaryMaxBytes: /);
  });

  it('allows any CORS origin by default; corsOrigins (CORS_ORIGINS, a comma list) names origins', () => {
    expect(parseConfig({}).corsOrigins).toEqual(['*']);
    expect(
      loadConfig([], { CORS_ORIGINS: 'https://app.example.org, http://localhost:3000' }).corsOrigins,
    ).toEqual(['https://app.example.org', 'http://localhost:3000']);
    for (const bad of [[], ['app.example.org'], ['https://app.example.org/path']])
      expect(() => parseConfig({ corsOrigins: bad })).toThrow(/^Invalid configuration: corsOrigins/);
  });

  it('adds the trailing slash to baseUrl and derives it from the port', () => {
    expect(parseConfig({ port: 9000 }).baseUrl).toBe('http://localhost:9000/');
    expect(parseConfig({ baseUrl: 'https://fhir.example.org/base' }).baseUrl).toBe(
      'https://fhir.example.org/base/',
    );
  });

  it('reads --config and CINDER_CONFIG, and lets env override single keys', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-config-'));
    const file = path.join(dir, 'c.json');
    fs.writeFileSync(file, JSON.stringify({ port: 7000, dataDir: '/tmp/x', accessTokenLifetime: 600 }));
    expect(loadConfig(['--config', file], {}).port).toBe(7000);
    expect(loadConfig([], { CINDER_CONFIG: file }).accessTokenLifetime).toBe(600);
    const c = loadConfig(['--config', file], {
      PORT: '7001',
      DATABASE_URL: 'postgres://u@h/db',
      REDIS_URL: 'redis://h:6379',
    });
    expect(c).toMatchObject({
      port: 7001,
      dataDir: '/tmp/x',
      databaseUrl: 'postgres://u@h/db',
      redisUrl: 'redis://h:6379',
    });
    fs.rmSync(dir, { recursive: true });
  });

  it.each([
    [{ port: 'abc' }, /^Invalid configuration: port: /],
    [{ port: 70000 }, /^Invalid configuration: port: /],
    [{ databaseUrl: 'mysql://x' }, /^Invalid configuration: databaseUrl: /],
    [
      { externalAuthProviders: [{ issuer: 'https://a', userInfoUrl: 'ftp://x' }] },
      /^Invalid configuration: externalAuthProviders\.0\.userInfoUrl: /,
    ],
    [
      {
        externalAuthProviders: [
          { issuer: 'https://a', userInfoUrl: 'https://a/u' },
          { issuer: 'https://a', userInfoUrl: 'https://b/u' },
        ],
      },
      /^Invalid configuration: externalAuthProviders\.1\.issuer: duplicate/,
    ],
    [{ admin: { clientId: 'has space' } }, /^Invalid configuration: admin\.clientId: /],
    [{ unknownKey: 1 }, /^Invalid configuration: /],
  ])('rejects %j with one line naming the key', (input, message) => {
    let err: unknown;
    try {
      parseConfig(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain('\n');
  });

  it('names an unreadable or malformed file', () => {
    expect(() => loadConfig(['--config', '/nonexistent/c.json'], {})).toThrow(
      /Cannot read configuration file/,
    );
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-config-'));
    const file = path.join(dir, 'bad.json');
    fs.writeFileSync(file, '{ nope');
    expect(() => loadConfig(['--config', file], {})).toThrow(/not valid JSON/);
    fs.rmSync(dir, { recursive: true });
  });
});
