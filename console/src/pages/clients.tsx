// ClientApplications of the project: the list, and a new one (name, redirectUri, launchUri, jwksUri, identityProvider)
// whose generated secret is shown once, optionally with its ProjectMembership so it can log in (API.md §2, §3); and a
// SMART EHR launch of one of them for a patient (`ClientApplication/<id>/$launch`, API.md §11).
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { entries, type Bundle, type Resource } from '../lib/fhir.js';
import { ErrorBox, Field, Notice, message } from '../ui.js';

interface ClientApplication extends Resource {
  name?: string;
  secret?: string;
  redirectUri?: string;
  launchUri?: string;
  jwksUri?: string;
  status?: string;
  identityProvider?: { authorizeUrl?: string; tokenUrl?: string; userInfoUrl?: string; clientId?: string };
}

const EMPTY = {
  name: '',
  redirectUri: '',
  launchUri: '',
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
      ...(form.launchUri.trim() ? { launchUri: form.launchUri.trim() } : {}),
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
        <Field label="Launch URI" hint="For SMART EHR launch: the app's launch page">
          {input('launchUri', 'url')}
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

/** A SMART EHR launch (API.md §11): the app's launch page opened with `iss` and a one-time `launch` for a patient. */
function LaunchClient({ api, clients }: PageProps & { clients: ClientApplication[] }) {
  const launchable = clients.filter((c) => c.launchUri);
  const [client, setClient] = useState('');
  const [patient, setPatient] = useState('');
  const [error, setError] = useState<string>();
  const [url, setUrl] = useState<string>();
  if (launchable.length === 0) return null;
  const chosen = client || (launchable[0]?.id ?? '');

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setUrl(undefined);
    const id = patient.trim().replace(/^Patient\//, '');
    try {
      const r = await api.request<{ parameter?: { name: string; valueUrl?: string }[] }>(
        `ClientApplication/${encodeURIComponent(chosen)}/$launch`,
        {
          method: 'POST',
          json: {
            resourceType: 'Parameters',
            parameter: [{ name: 'patient', valueReference: { reference: `Patient/${id}` } }],
          },
        },
      );
      const launchUrl = r.body.parameter?.find((p) => p.name === 'launch-url')?.valueUrl;
      if (!launchUrl || !/^https?:/i.test(launchUrl)) throw new Error('The server answered no launch URL');
      setUrl(launchUrl);
    } catch (err) {
      setError(message(err));
    }
  };

  return (
    <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="launch-title">
      <h2 id="launch-title">Launch an application</h2>
      <div class="grid">
        <Field label="Application">
          {(id) => (
            <select id={id} value={chosen} onChange={(e) => setClient(e.currentTarget.value)}>
              {launchable.map((c) => (
                <option value={c.id}>{c.name ?? c.id}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Patient id" hint="The patient in context; the launch is valid 5 minutes, once">
          {(id) => (
            <input id={id} required value={patient} onInput={(e) => setPatient(e.currentTarget.value)} />
          )}
        </Field>
      </div>
      <ErrorBox error={error} />
      {url ? (
        <Notice kind="ok">
          <p>
            <a href={url} target="_blank" rel="noopener noreferrer" id="launch-link">
              Open the application
            </a>
          </p>
        </Notice>
      ) : null}
      <button class="primary" type="submit">
        Launch
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
      <LaunchClient {...props} clients={clients} />
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
