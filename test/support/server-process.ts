// Cinder as a real process (src/main.ts through tsx), for tests of start-up, signals and crashes.
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
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
  'EMBEDDED_ENGINE',
  'REDIS_URL',
  'LOG_LEVEL',
  'CINDER_CONFIG',
  'JOB_CONCURRENCY',
  'JOB_LEASE_SECONDS',
  'JOB_PAUSE_MS',
  'EXPORT_PAGE_SIZE',
  'TRUST_PROXY',
  'WORKERS',
];
export const cleanEnv: Record<string, string | undefined> = Object.fromEntries(
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

export interface ServerProcess {
  child: ChildProcess;
  /** Everything the process wrote to stdout and stderr so far. */
  output(): string;
}

/**
 * Starts `node --import tsx src/main.ts`: node itself, as `npm start` runs it. (The `tsx` command runs a second
 * process and turns a signal into SIGKILL when that process does not acknowledge it within 30 ms, which a server
 * busy with a transaction cannot; and a SIGKILL to the `tsx` command leaves its server process running.)
 */
export function startServer(env: Record<string, string>, args: string[] = []): ServerProcess {
  let out = '';
  const child = spawn(process.execPath, ['--import', 'tsx', mainScript, ...args], {
    env: { ...cleanEnv, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

/** Waits for `/healthcheck`: a guard against a server that never starts, not a speed check (CI runs other files beside it). */
export async function waitHealthy(port: number, child: ChildProcess, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
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

/** GET on a new connection (no keep-alive pool): the status, or the connection error's code. */
export function probe(port: number, urlPath = '/healthcheck'): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: urlPath, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

/** A client_credentials access token from the server at port. */
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
