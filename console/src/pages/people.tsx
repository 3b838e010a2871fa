// Projects and people: the project's memberships (with their profiles), inviting a Practitioner or Patient
// (POST {base}admin/projects/<id>/invite, API.md §3) and deactivating or reactivating a membership.
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { displayName, entries, refOf, type Bundle, type Resource } from '../lib/fhir.js';
import { ErrorBox, Field, Notice, message } from '../ui.js';

interface Membership extends Resource {
  profile?: { reference?: string; display?: string };
  user?: { reference?: string };
  externalId?: string;
  admin?: boolean;
  active?: boolean;
}

function InviteForm({ api, projectId, onInvited }: PageProps & { onInvited: () => void }) {
  const [form, setForm] = useState({
    resourceType: 'Practitioner',
    firstName: '',
    lastName: '',
    email: '',
    externalId: '',
    admin: false,
  });
  const [error, setError] = useState<string>();
  const [done, setDone] = useState<string>();
  const set = (k: keyof typeof form, v: string | boolean) => setForm({ ...form, [k]: v });

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setDone(undefined);
    try {
      const body = {
        resourceType: form.resourceType,
        firstName: form.firstName,
        lastName: form.lastName,
        ...(form.email.trim() ? { email: form.email.trim() } : {}),
        ...(form.externalId.trim() ? { externalId: form.externalId.trim() } : {}),
        ...(form.admin ? { admin: true } : {}),
      };
      const r = await api.request<Membership>(`/admin/projects/${projectId}/invite`, {
        method: 'POST',
        json: body,
        headers: { 'content-type': 'application/json' },
      });
      setDone(`Invited ${form.firstName} ${form.lastName}: ProjectMembership/${r.body.id ?? ''}`);
      setForm({ ...form, firstName: '', lastName: '', email: '', externalId: '', admin: false });
      onInvited();
    } catch (err) {
      setError(message(err));
    }
  };

  return (
    <form class="card" onSubmit={(e) => void submit(e)} aria-labelledby="invite-title">
      <h2 id="invite-title">Invite</h2>
      <div class="grid">
        <Field label="Profile type">
          {(id) => (
            <select
              id={id}
              value={form.resourceType}
              onChange={(e) => set('resourceType', e.currentTarget.value)}
            >
              <option>Practitioner</option>
              <option>Patient</option>
            </select>
          )}
        </Field>
        <Field label="First name">
          {(id) => (
            <input
              id={id}
              required
              value={form.firstName}
              onInput={(e) => set('firstName', e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Last name">
          {(id) => (
            <input
              id={id}
              required
              value={form.lastName}
              onInput={(e) => set('lastName', e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="Email" hint="Optional: links or creates the User with this email">
          {(id) => (
            <input
              id={id}
              type="email"
              value={form.email}
              onInput={(e) => set('email', e.currentTarget.value)}
            />
          )}
        </Field>
        <Field label="External id" hint="Optional: the identity provider's subject (unique on the server)">
          {(id) => (
            <input
              id={id}
              value={form.externalId}
              onInput={(e) => set('externalId', e.currentTarget.value)}
            />
          )}
        </Field>
        <div class="field check">
          <input
            id="invite-admin"
            type="checkbox"
            checked={form.admin}
            onChange={(e) => set('admin', e.currentTarget.checked)}
          />
          <label for="invite-admin">Project administrator</label>
        </div>
      </div>
      <ErrorBox error={error} />
      {done ? <Notice kind="ok">{done}</Notice> : null}
      <button class="primary" type="submit">
        Invite
      </button>
    </form>
  );
}

/** Super administrators only: a new project (POST {fhir}/Project, API.md §3), which the console then administers. */
function NewProject({ api, reloadProjects }: PageProps) {
  const [name, setName] = useState('');
  const [error, setError] = useState<string>();
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      const r = await api.request<Resource>('Project', {
        method: 'POST',
        json: { resourceType: 'Project', name },
      });
      setName('');
      await reloadProjects(r.body.id);
    } catch (err) {
      setError(message(err));
    }
  };
  return (
    <form class="card inline" onSubmit={(e) => void submit(e)} aria-labelledby="new-project-title">
      <h2 id="new-project-title" class="full">
        New project
      </h2>
      <Field label="Project name">
        {(id) => <input id={id} required value={name} onInput={(e) => setName(e.currentTarget.value)} />}
      </Field>
      <button type="submit">Create project</button>
      <ErrorBox error={error} />
    </form>
  );
}

/** Super administrators only: the password of an invited user (POST {base}admin/users/<id>/password). */
function SetPassword({ api, users }: PageProps & { users: { id: string; label: string }[] }) {
  const [user, setUser] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string>();
  const [done, setDone] = useState<string>();
  const chosen = user || users[0]?.id || '';
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setDone(undefined);
    try {
      await api.request(`/admin/users/${chosen}/password`, {
        method: 'POST',
        json: { password },
        headers: { 'content-type': 'application/json' },
      });
      setPassword('');
      setDone(`Password set for ${users.find((u) => u.id === chosen)?.label ?? chosen}.`);
    } catch (err) {
      setError(message(err));
    }
  };
  if (!users.length) return null;
  return (
    <form class="card inline" onSubmit={(e) => void submit(e)} aria-labelledby="password-title">
      <h2 id="password-title" class="full">
        Set a user's password
      </h2>
      <Field label="User">
        {(id) => (
          <select id={id} value={chosen} onChange={(e) => setUser(e.currentTarget.value)}>
            {users.map((u) => (
              <option value={u.id}>{u.label}</option>
            ))}
          </select>
        )}
      </Field>
      <Field label="New password">
        {(id) => (
          <input
            id={id}
            type="password"
            autocomplete="new-password"
            required
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        )}
      </Field>
      <button type="submit">Set password</button>
      <ErrorBox error={error} />
      {done ? <Notice kind="ok">{done}</Notice> : null}
    </form>
  );
}

export function PeoplePage(props: PageProps) {
  const { api, projectId } = props;
  const [members, setMembers] = useState<Membership[]>([]);
  const [profiles, setProfiles] = useState<Map<string, Resource>>(new Map());
  const [error, setError] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [reload, setReload] = useState(0);

  useEffect(() => {
    setError(undefined);
    api
      .request<Bundle>(
        `ProjectMembership?project=Project/${projectId}&_include=ProjectMembership:profile&_count=200`,
      )
      .then((r) => {
        const all = entries(r.body);
        setMembers(all.filter((x): x is Membership => x.resourceType === 'ProjectMembership'));
        setProfiles(new Map(all.map((x) => [`${x.resourceType}/${x.id ?? ''}`, x])));
      })
      .catch((err: unknown) => setError(message(err)));
  }, [projectId, reload]);

  const setActive = async (m: Membership, active: boolean) => {
    setError(undefined);
    setNotice(undefined);
    try {
      const current = await api.request<Membership>(`ProjectMembership/${m.id ?? ''}`);
      await api.request(`ProjectMembership/${m.id ?? ''}`, {
        method: 'PUT',
        json: { ...current.body, active },
      });
      setNotice(`${active ? 'Reactivated' : 'Deactivated'} ProjectMembership/${m.id ?? ''}`);
      setReload(reload + 1);
    } catch (err) {
      setError(message(err));
    }
  };

  return (
    <section aria-labelledby="people-title">
      <h1 id="people-title">People</h1>
      <div class="card">
        <h2>Memberships</h2>
        <ErrorBox error={error} />
        {notice ? <Notice kind="ok">{notice}</Notice> : null}
        <div class="table-wrap">
          <table>
            <caption class="sr-only">Memberships of the project</caption>
            <thead>
              <tr>
                <th scope="col">Profile</th>
                <th scope="col">User</th>
                <th scope="col">External id</th>
                <th scope="col">Admin</th>
                <th scope="col">Status</th>
                <th scope="col">Action</th>
              </tr>
            </thead>
            <tbody>
              {members.map((m) => {
                const ref = refOf(m.profile);
                const active = m.active !== false;
                return (
                  <tr>
                    <td>
                      {displayName(profiles.get(ref)) || ref}
                      <br />
                      <small>{ref}</small>
                    </td>
                    <td>{refOf(m.user)}</td>
                    <td>{m.externalId ?? ''}</td>
                    <td>{m.admin ? 'yes' : 'no'}</td>
                    <td>{active ? 'active' : 'inactive'}</td>
                    <td>
                      <button
                        aria-label={`${active ? 'Deactivate' : 'Reactivate'} ${displayName(profiles.get(ref)) || ref}`}
                        onClick={() => void setActive(m, !active)}
                      >
                        {active ? 'Deactivate' : 'Reactivate'}
                      </button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
        {members.length === 0 && !error ? <p>No memberships.</p> : null}
      </div>
      <InviteForm {...props} onInvited={() => setReload(reload + 1)} />
      {props.me.project.superAdmin ? (
        <>
          <SetPassword
            {...props}
            users={members
              .filter((m) => refOf(m.user).startsWith('User/'))
              .map((m) => ({
                id: refOf(m.user).slice('User/'.length),
                label: `${displayName(profiles.get(refOf(m.profile))) || refOf(m.profile)} (${refOf(m.user)})`,
              }))}
          />
          <NewProject {...props} />
        </>
      ) : null}
    </section>
  );
}
