// Shared pieces of the console's pages: the error and notice boxes (read out by screen readers), a labelled field,
// and the download of an authenticated URL.
import type { ComponentChildren } from 'preact';
import { useMemo } from 'preact/hooks';
import type { Api } from './lib/api.js';

export function ErrorBox({ error }: { error: string | undefined }) {
  if (!error) return null;
  return (
    <div class="error" role="alert">
      {error.split('\n').map((line) => (
        <p>{line}</p>
      ))}
    </div>
  );
}

export function Notice({ children, kind = 'info' }: { children: ComponentChildren; kind?: 'info' | 'ok' }) {
  return (
    <div class={`notice ${kind}`} role="status">
      {children}
    </div>
  );
}

let fieldIds = 0;
/** A label and its control; `control` gets the id that the label names. */
export function Field({
  label,
  hint,
  children,
}: {
  label: string;
  hint?: string;
  children: (id: string) => ComponentChildren;
}) {
  const id = useMemo(() => `f${++fieldIds}`, []);
  return (
    <div class="field">
      <label for={id}>{label}</label>
      {children(id)}
      {hint ? <small>{hint}</small> : null}
    </div>
  );
}

export const message = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** Fetches `url` with the session's token and saves it as `filename` (a link cannot carry the bearer token). */
export async function download(api: Api, url: string, filename: string): Promise<void> {
  const res = await api.request<Blob>(url, { blob: true, headers: { accept: '*/*' } });
  const href = URL.createObjectURL(res.body);
  const a = document.createElement('a');
  a.href = href;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}
