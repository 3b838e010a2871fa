// The URLs the console works with, all derived from where it is served: `{base}console/` → `{base}` (OAuth, admin),
// `{base}fhir/R4` (FHIR). The console's client id is the one the server ensures at start (src/auth/console-client.ts).

export const CONSOLE_CLIENT_ID = 'cinder-console';

export interface Env {
  /** `{base}`, with its trailing slash. */
  base: string;
  /** `{base}console/`: the redirect URI registered for the console. */
  consoleBase: string;
  /** `{base}fhir/R4`, without a trailing slash. */
  fhir: string;
}

/** The environment of a console page whose URL is `href` (any path under `…/console/`). */
export function envFrom(href: string): Env {
  const url = new URL(href);
  const i = url.pathname.indexOf('/console/');
  const basePath = i >= 0 ? url.pathname.slice(0, i + 1) : '/';
  const base = `${url.origin}${basePath}`;
  return { base, consoleBase: `${base}console/`, fhir: `${base}fhir/R4` };
}

/** The client route of a console URL: the path after `console/`, without slashes at its ends. */
export function routeOf(env: Env, href: string): string {
  const url = new URL(href);
  const path = `${url.origin}${url.pathname}`;
  return path.startsWith(env.consoleBase) ? path.slice(env.consoleBase.length).replace(/\/+$/, '') : '';
}
