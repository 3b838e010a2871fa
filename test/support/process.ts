// Cinder as a real child process (src/main.ts through tsx), for tests of start-up, restarts and crashes.
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';

export const tsx = path.resolve('node_modules/.bin/tsx');
export const mainScript = path.resolve('src/main.ts');

// The test runner's own environment (vite sets BASE_URL) must not leak into the server's configuration.
const CINDER_ENV = [
  'PORT',
  'HOST',
  'BASE_URL',
  'DATA_DIR',
  'DATABASE_URL',
  'REDIS_URL',
  'LOG_LEVEL',
  'CINDER_CONFIG',
];
export const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !CINDER_ENV.includes(k)),
);

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export function startServer(
  env: Record<string, string>,
  args: string[] = [],
): { child: ChildProcess; output: () => string } {
  let out = '';
  const child = spawn(tsx, [mainScript, ...args], {
    env: { ...cleanEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

export async function waitHealthy(port: number, child: ChildProcess): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthcheck`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('server did not become healthy');
}

export const exited = (child: ChildProcess): Promise<number | null> =>
  child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((r) => child.on('exit', (code) => r(code)));

/** A client_credentials access token from a server process. */
export async function clientToken(port: number, clientId: string, secret: string): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: clientId,
      client_secret: secret,
    }),
  });
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { access_token: string }).access_token;
}
