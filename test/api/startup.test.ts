// The server as a process (API.md §1): configuration file and env overrides, a bad value stops start-up with one
// line naming the key, data survives a restart, SIGTERM exits 0, and a second process on one dataDir is refused.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  clientToken,
  cleanEnv,
  exited,
  freePort,
  mainScript as main,
  startServer as start,
  tsx,
  waitHealthy,
} from '../support/server-process.js';

describe('the server process', () => {
  const dirs: string[] = [];
  afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

  it('stops on a bad configuration value with one line naming the key', () => {
    const r = spawnSync(tsx, [main], { env: { ...cleanEnv, PORT: 'eighty' }, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^Invalid configuration: port: /);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-cfg-'));
    dirs.push(dir);
    const file = path.join(dir, 'config.json');
    fs.writeFileSync(
      file,
      JSON.stringify({ externalAuthProviders: [{ issuer: 'https://idp', userInfoUrl: 'not a url' }] }),
    );
    const r2 = spawnSync(tsx, [main, '--config', file], { env: cleanEnv, encoding: 'utf8' });
    expect(r2.status).toBe(1);
    expect(r2.stderr).toMatch(/^Invalid configuration: externalAuthProviders\.0\.userInfoUrl: /);
  });

  it('keeps data across a restart, exits 0 on SIGTERM and refuses a second process on the same dataDir', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-data-'));
    dirs.push(dataDir);
    const port = await freePort();
    const configFile = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(
      configFile,
      JSON.stringify({ port: 1, admin: { clientId: 'boot-client', clientSecret: 'boot-secret-0123456789' } }),
    );
    // The env overrides the file's port.
    const env = { CINDER_CONFIG: configFile, DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'info' };
    const first = start(env);
    await waitHealthy(port, first.child);
    const login = async (): Promise<string> => {
      const res = await fetch(`http://127.0.0.1:${port}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials&client_id=boot-client&client_secret=boot-secret-0123456789',
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { access_token: string }).access_token;
    };
    const token = await login();
    const created = await fetch(`http://127.0.0.1:${port}/fhir/R4/Patient`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Durable' }] }),
    });
    expect(created.status).toBe(201);
    const id = ((await created.json()) as { id: string }).id;

    const second = start({ ...env, PORT: String(await freePort()) });
    expect(await exited(second.child)).not.toBe(0);
    expect(second.output()).toMatch(/lock|in use|another/i);

    first.child.kill('SIGTERM');
    expect(await exited(first.child)).toBe(0);

    const again = start(env);
    await waitHealthy(port, again.child);
    const read = await fetch(`http://127.0.0.1:${port}/fhir/R4/Patient/${id}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(read.status).toBe(200);
    expect(((await read.json()) as { name: { family: string }[] }).name[0]?.family).toBe('Durable');
    again.child.kill('SIGTERM');
    expect(await exited(again.child)).toBe(0);
  });

  it('refuses to start, with one line naming admin.clientId, when a tenant owns that ClientApplication id', async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cinder-boot-'));
    dirs.push(dataDir);
    const port = await freePort();
    const admin = { clientId: 'boot-admin', clientSecret: 'boot-admin-secret-0123456789' };
    const env = { DATA_DIR: dataDir, PORT: String(port) };
    const file = path.join(dataDir, 'cinder.json');
    fs.writeFileSync(file, JSON.stringify({ admin }));
    const first = start({ ...env, CINDER_CONFIG: file });
    await waitHealthy(port, first.child, 180_000);
    const token = await clientToken(port, admin.clientId, admin.clientSecret);
    const send = async (method: string, url: string, body: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}/fhir/R4/${url}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/fhir+json' },
        body: JSON.stringify(body),
      });
      expect(res.status).toBeLessThan(300);
      return (await res.json()) as { id: string };
    };
    const project = await send('POST', 'Project', { resourceType: 'Project', name: 'Tenant' });
    await send('PUT', 'ClientApplication/tenant-made', {
      resourceType: 'ClientApplication',
      id: 'tenant-made',
      meta: { project: project.id },
    });
    first.child.kill('SIGTERM');
    expect(await exited(first.child)).toBe(0);

    fs.writeFileSync(file, JSON.stringify({ admin: { ...admin, clientId: 'tenant-made' } }));
    const r = spawnSync(process.execPath, ['--import', 'tsx', main], {
      env: { ...cleanEnv, ...env, CINDER_CONFIG: file, LOG_LEVEL: 'silent' },
      encoding: 'utf8',
    });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/admin\.clientId: ClientApplication\/tenant-made belongs to another project/);
  }, 400_000);
});
