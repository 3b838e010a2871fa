// ClientApplications of the project: the list, and a new one (name, redirectUri, jwksUri, identityProvider) whose
// generated secret is shown once, optionally with its ProjectMembership so it can log in (API.md §2, §3).
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { entries, type Bundle, type Resource } from '../lib/fhir.js';
import { ErrorBox, Field, Notice, message } from '../ui.js';

interface ClientApplication extends Resource {
  name?: string;
  secret?: string;
  redirectUri?: string;
  jwksUri?: string;
  status?: string;
  identityProvider?: { authorizeUrl?: string; tokenUrl?: string; userInfoUrl?: string; clientId?: string };
}

const EMPTY = {
  name: '',
  redirectUri: '',
  jwksUri: '',
  idpAuthorizeUrl: '',
  idpTokenUrl: '',
  idpUserInfoUrl: '',
  idpClientId: '',
  idpClientSecret: '',
  idpUseSubject: false,
  membership: 'none',
};

function CreateClient({ api, me, projectId, onCreated }: PageProps & { onCreated: () => void }) {
  const [form, setForm] = useState(EMPTY);
  const [error, setError] = useState<string>();
  const [created, setCreated] = useState<{ id: string; secret?: string }>();
  const set = (k: keyof typeof EMPTY, v: string | boolean) => setForm({ ...form, [k]: v });

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setCreated(undefined);
    const idp = form.idpUserInfoUrl.trim()
      ? {
          identityProvider: {
            authorizeUrl: form.idpAuthorizeUrl.trim(),
            tokenUrl: form.idpTokenUrl.trim(),
            userInfoUrl: form.idpUserInfoUrl.trim(),
            clientId: form.idpClientId.trim(),
            ...(form.idpClientSecret ? { clientSecret: form.idpClientSecret } : {}),
            ...(form.idpUseSubject ? { useSubject: true } : {}),
          },
        }
      : {};
    const body = {
      resourceType: 'ClientApplication',
      ...(me.project.superAdmin ? { meta: { project: projectId } } : {}),
      name: form.name.trim(),
      ...(form.redirectUri.trim() ? { redirectUri: form.redirectUri.trim() } : {}),
      ...(form.jwksUri.trim() ? { jwksUri: form.jwksUri.trim() } : {}),
      ...idp,
    };
    try {
      const r = await api.request<ClientApplication>('ClientApplication', { method: 'POST', json: body });
      const id = r.body.id ?? '';
      if (form.membership !== 'none') {
        await api.request('ProjectMembership', {
          method: 'POST',
          json: {
            resourceType: 'ProjectMembership',
            ...(me.project.superAdmin ? { meta: { project: projectId } } : {}),
            project: { reference: `Project/${projectId}` },
            user: { reference: `ClientApplication/${id}` },
            profile: { reference: `ClientApplication/${id}` },
            ...(form.membership === 'admin' ? { admin: true } : {}),
          },
        });
      }
      setCreated({ id, ...(r.body.secret ? { secret: r.body.secret } : {}) });
      setForm(EMPTY);
      onCreated();
    } catch (err) {
      setError(message(err));
    }
  };

  const input =
    (k: keyof typeof EMPTY, type: 'text' | 'url' | 'password' = 'text') =>
    (id: string) => (
      <input
        id={id}
        type={type as 'text'}
        value={form[k] as string}
        onInput={(e) => set(k, e.currentTarget.value)}
      />
    );

  return (
    <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="new-client-title">
      <h2 id="new-client-title">New application</h2>
      <div class="grid">
        <Field label="Name">
          {(id) => (
            <input id={id} required value={form.name} onInput={(e) => set('name', e.currentTarget.value)} />
          )}
        </Field>
        <Field label="Redirect URI" hint="For browser apps (authorization code flow), compared exactly">
          {input('redirectUri', 'url')}
        </Field>
        <Field label="JWKS URI" hint="For SMART Backend Services (signed assertions)">
          {input('jwksUri', 'url')}
        </Field>
        <Field label="Membership" hint="Without one the application cannot log in with its secret">
          {(id) => (
            <select
              id={id}
              value={form.membership}
              onChange={(e) => set('membership', e.currentTarget.value)}
            >
              <option value="none">None</option>
              <option value="member">Member</option>
              <option value="admin">Project administrator</option>
            </select>
          )}
        </Field>
      </div>
      <fieldset>
        <legend>Identity provider (token exchange, optional)</legend>
        <div class="grid">
          <Field label="Authorize URL">{input('idpAuthorizeUrl', 'url')}</Field>
          <Field label="Token URL">{input('idpTokenUrl', 'url')}</Field>
          <Field label="Userinfo URL">{input('idpUserInfoUrl', 'url')}</Field>
          <Field label="Client id at the provider">{input('idpClientId')}</Field>
          <Field label="Client secret at the provider" hint="Write-only: never shown again">
            {input('idpClientSecret', 'password')}
          </Field>
          <div class="field check">
            <input
              id="idp-use-subject"
              type="checkbox"
              checked={form.idpUseSubject}
              onChange={(e) => set('idpUseSubject', e.currentTarget.checked)}
            />
            <label for="idp-use-subject">Identify users by subject (externalId)</label>
          </div>
        </div>
      </fieldset>
      <ErrorBox error={error} />
      {created ? (
        <Notice kind="ok">
          <p>
            Created ClientApplication/<strong>{created.id}</strong>.
          </p>
          {created.secret ? (
            <p>
              Its secret, shown this once only — copy it now: <code class="secret">{created.secret}</code>
            </p>
          ) : null}
        </Notice>
      ) : null}
      <button class="primary" type="submit">
        Create application
      </button>
    </form>
  );
}

export function ClientsPage(props: PageProps) {
  const { api, projectId, me } = props;
  const [clients, setClients] = useState<ClientApplication[]>([]);
  const [error, setError] = useState<string>();
  const [reload, setReload] = useState(0);

  useEffect(() => {
    setError(undefined);
    api
      .request<Bundle<ClientApplication>>(`ClientApplication?_count=200&_sort=name`)
      .then((r) =>
        setClients(entries(r.body).filter((c) => !me.project.superAdmin || c.meta?.project === projectId)),
      )
      .catch((err: unknown) => setError(message(err)));
  }, [projectId, reload]);

  return (
    <section aria-labelledby="clients-title">
      <h1 id="clients-title">Applications</h1>
      <div class="card">
        <h2>Client applications</h2>
        <ErrorBox error={error} />
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Client applications of the project</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Client id</th>
                <th scope="col">Redirect URI</th>
                <th scope="col">JWKS URI</th>
                <th scope="col">Identity provider</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {clients.map((c) => (
                <tr>
                  <td>{c.name ?? ''}</td>
                  <td>
                    <code>{c.id}</code>
                  </td>
                  <td class="wrap">{c.redirectUri ?? ''}</td>
                  <td class="wrap">{c.jwksUri ?? ''}</td>
                  <td class="wrap">{c.identityProvider?.userInfoUrl ?? ''}</td>
                  <td>{c.status ?? 'active'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {clients.length === 0 && !error ? <p>No applications.</p> : null}
      </div>
      <CreateClient {...props} onCreated={() => setReload(reload + 1)} />
      {me.project.superAdmin ? (
        <div class="card">
          <h2>External identity providers</h2>
          <p>
            The server's <code>externalAuthProviders</code> are set in its configuration file; the public API
            does not list them, so the console cannot show them. Ask the operator, or read the configuration.
          </p>
        </div>
      ) : null}
    </section>
  );
}
