// The console's HTTP client for the public API: bearer token from the session (refreshed once on a 401), JSON or
// text bodies, and failures thrown as ApiError with the OperationOutcome's message (outcome.ts).
import { refresh } from './auth.js';
import type { Env } from './env.js';
import { errorMessage } from './outcome.js';
import { clearSession, loadSession } from './session.js';

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body?: unknown,
  ) {
    super(message);
  }
}

export interface Answer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  /** A JSON body (sent as FHIR JSON unless `headers` say otherwise). */
  json?: unknown;
  /** Answer the body as text (CSV, NDJSON) instead of JSON. */
  text?: boolean;
  /** Answer the body as a Blob (downloads). */
  blob?: boolean;
  /** Answer failures too, instead of throwing (the Cancel button shows both). */
  allowErrors?: boolean;
}

/** Called when the session is gone for good (a 401 that a refresh does not cure): the app shows the sign-in page. */
let signedOut: () => void = () => undefined;
export const onSignedOut = (f: () => void): void => {
  signedOut = f;
};

/** Whether an absolute URL is this server's: same origin as {base} and a path under {base}'s (no credentials). */
export function underBase(env: Env, href: string): boolean {
  let url: URL;
  try {
    url = new URL(href);
  } catch {
    return false;
  }
  const base = new URL(env.base);
  return (
    url.origin === base.origin &&
    url.username === '' &&
    url.password === '' &&
    url.pathname.startsWith(base.pathname)
  );
}

export function createApi(env: Env) {
  /**
   * `path` is absolute (Bundle links, output URLs), rooted at {base} (`/admin/…`), or relative to {fhir}. An absolute
   * URL is taken only under this server's {base} (same origin, same base path): links and output URLs come from
   * answers a tenant can shape, and the console's bearer token must never leave for another origin.
   */
  const urlOf = (path: string): string => {
    if (path.startsWith('/')) return `${env.base}${path.slice(1)}`;
    if (!/^[a-z][a-z0-9+.-]*:/i.test(path)) return `${env.fhir}/${path}`;
    if (!underBase(env, path)) throw new ApiError(0, `Not a URL of this server: ${path.slice(0, 120)}`);
    return path;
  };

  async function send(path: string, o: RequestOptions, token: string | undefined): Promise<Response> {
    const url = urlOf(path);
    const headers: Record<string, string> = { accept: 'application/fhir+json', ...o.headers };
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | undefined;
    if (o.json !== undefined) {
      headers['content-type'] ??= 'application/fhir+json';
      body = JSON.stringify(o.json);
    }
    try {
      return await fetch(url, { method: o.method ?? 'GET', headers, ...(body ? { body } : {}) });
    } catch {
      throw new ApiError(0, errorMessage(0, undefined));
    }
  }

  async function request<T = unknown>(path: string, o: RequestOptions = {}): Promise<Answer<T>> {
    let res = await send(path, o, loadSession()?.accessToken);
    if (res.status === 401) {
      const renewed = await refresh(env);
      if (renewed) res = await send(path, o, renewed.accessToken);
      if (res.status === 401) {
        clearSession();
        signedOut();
      }
    }
    const ok = res.status < 400;
    let body: unknown;
    if (ok && o.blob) body = await res.blob();
    else if (ok && o.text) body = await res.text();
    else {
      const text = await res.text();
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
    }
    if (!ok && !o.allowErrors) throw new ApiError(res.status, errorMessage(res.status, body), body);
    return { status: res.status, headers: res.headers, body: body as T };
  }

  return { request, urlOf, env };
}

export type Api = ReturnType<typeof createApi>;
