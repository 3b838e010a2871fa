// The admin console's static files at {base}console/ (issue 17): the few files Vite built into dist/console are read
// into memory once, when the app is built, and served from that map only, so no request path ever reaches the file
// system (no traversal to guard against); client routes fall back to index.html (a single-page app).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { FhirError } from '../../fhir/outcome.js';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json; charset=utf-8',
  '.txt': 'text/plain; charset=utf-8',
  '.woff2': 'font/woff2',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.svg', '.json', '.txt']);

/**
 * The console talks only to this server's API (connect-src 'self'), runs only its own script files, and is never
 * framed. `no-referrer`: the authorization code in the redirect URL never leaks through a Referer header.
 */
const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'",
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

interface StaticFile {
  body: Buffer;
  gzip?: Buffer;
  type: string;
  etag: string;
  /** Hashed build assets never change under their name; index.html must be revalidated. */
  immutable: boolean;
}

/** Where `npm run build` puts the console: dist/console, seen from dist/http/routes or from src/http/routes. */
export function defaultConsoleDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const candidates = [path.resolve(here, '../../console'), path.resolve(here, '../../../dist/console')];
  return candidates.find((d) => fs.existsSync(path.join(d, 'index.html'))) ?? (candidates[1] as string);
}

/** Every regular file under `dir`, keyed by its `/`-separated relative path. */
export function loadConsoleFiles(dir: string, assetBase = './'): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  if (!fs.existsSync(path.join(dir, 'index.html'))) return files;
  const walk = (sub: string) => {
    for (const entry of fs.readdirSync(path.join(dir, sub), { withFileTypes: true })) {
      const rel = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(rel);
      else if (entry.isFile()) {
        const ext = path.extname(entry.name).toLowerCase();
        const type = TYPES[ext];
        if (!type) continue; // source maps and anything unexpected are not served
        let body = fs.readFileSync(path.join(dir, rel));
        // Vite writes relative asset URLs; index.html is also the answer to deep client routes (console/jobs/…), where
        // `./assets/` would resolve elsewhere, so they are made absolute under the server's base path.
        if (rel === 'index.html')
          body = Buffer.from(body.toString('utf8').replace(/(["'])\.\/assets\//g, `$1${assetBase}assets/`));
        const gzip = COMPRESSIBLE.has(ext) && body.length > 512 ? gzipSync(body, { level: 9 }) : undefined;
        const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
        files.set(rel, { body, ...(gzip ? { gzip } : {}), type, etag, immutable: rel.startsWith('assets/') });
      }
    }
  };
  try {
    walk('');
  } catch (err) {
    // A build replacing the folder while it is read (a test building the console beside other tests): serve what
    // was read rather than fail the start; a missing index.html then answers "not built".
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return files;
}

function send(request: FastifyRequest, reply: FastifyReply, file: StaticFile): FastifyReply {
  for (const [k, v] of Object.entries(SECURITY_HEADERS)) reply.header(k, v);
  reply
    .header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
    .header('etag', file.etag)
    .header('vary', 'accept-encoding')
    .type(file.type);
  const inm = request.headers['if-none-match'];
  if (inm && inm.split(',').some((t) => t.trim() === file.etag || t.trim() === `W/${file.etag}`)) {
    return reply.code(304).send();
  }
  if (file.gzip && /\bgzip\b/.test(request.headers['accept-encoding'] ?? '')) {
    return reply.header('content-encoding', 'gzip').send(file.gzip);
  }
  return reply.send(file.body);
}

export function consoleRoutes(app: FastifyInstance, opts: { baseUrl: string; dir?: string }): void {
  const basePath = new URL(opts.baseUrl).pathname; // e.g. `/` or `/cinder/`
  const files = loadConsoleFiles(opts.dir ?? defaultConsoleDir(), `${basePath}console/`);
  const route = { config: { public: true } };

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const urlPath = (request.url.split('?')[0] ?? '').replace(/^\/+/, '/');
    // The router ignores trailing slashes; the page's relative asset URLs need the one of `console/`.
    if (urlPath === '/console') {
      const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
      return reply.redirect(`${basePath}console/${query}`, 301);
    }
    const index = files.get('index.html');
    if (!index) {
      throw new FhirError(
        'not-found',
        'The admin console is not built: run `npm run build` (it builds dist/console)',
        'console.not-built',
      );
    }
    let rel: string;
    try {
      rel = decodeURIComponent(urlPath.slice('/console/'.length));
    } catch {
      rel = '';
    }
    const file = files.get(rel);
    if (file) return send(request, reply, file);
    // A missing asset is a 404 (a stale page asking for an old bundle must not get HTML as script); any other path
    // is a client route of the single-page app.
    if (rel.startsWith('assets/') || /\.[A-Za-z0-9]{1,5}$/.test(rel)) {
      throw new FhirError('not-found', 'No such console file', 'console.no-file');
    }
    return send(request, reply, index);
  };
  app.get('/console', route, handler);
  app.get('/console/*', route, handler);
}
