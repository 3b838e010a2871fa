// Builds the admin console (console/ → dist/console) with Vite when it is missing or older than its sources, so a
// fresh clone's `npm test` can drive it in a browser without running `npm run build` first.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const CONSOLE_SOURCE = path.join(ROOT, 'console');
export const CONSOLE_DIST = path.join(ROOT, 'dist', 'console');

function newestMtime(p: string): number {
  const stat = fs.statSync(p);
  if (!stat.isDirectory()) return stat.mtimeMs;
  let newest = stat.mtimeMs;
  for (const entry of fs.readdirSync(p)) newest = Math.max(newest, newestMtime(path.join(p, entry)));
  return newest;
}

/** Whether dist/console is missing or older than anything under console/. */
export function consoleBuildStale(): boolean {
  const index = path.join(CONSOLE_DIST, 'index.html');
  if (!fs.existsSync(index)) return true;
  return newestMtime(CONSOLE_SOURCE) > fs.statSync(index).mtimeMs;
}

/** Runs the same build as `npm run build:console` in this process, when needed; answers the output folder. */
export async function ensureConsoleBuilt(): Promise<string> {
  if (consoleBuildStale()) {
    const { build } = await import('vite');
    // Vitest sets NODE_ENV=test, which would give a development bundle: build exactly what `npm run build` serves.
    const env = process.env.NODE_ENV;
    process.env.NODE_ENV = 'production';
    try {
      await build({
        configFile: path.join(CONSOLE_SOURCE, 'vite.config.ts'),
        mode: 'production',
        logLevel: 'warn',
      });
    } finally {
      if (env === undefined) delete process.env.NODE_ENV;
      else process.env.NODE_ENV = env;
    }
  }
  return CONSOLE_DIST;
}
