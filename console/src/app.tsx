// The console's shell: sign-in state, the signed-in user (GET {base}auth/me), the project being administered, the
// navigation and the client-side routes (paths under {base}console/, served index.html by the server's fallback).
import { useEffect, useState } from 'preact/hooks';
import { createApi, onSignedOut, type Api } from './lib/api.js';
import { completeSignIn, signOut, startSignIn } from './lib/auth.js';
import { routeOf, type Env } from './lib/env.js';
import { displayName, entries, type Bundle, type Resource } from './lib/fhir.js';
import { loadSession } from './lib/session.js';
import { AuditPage } from './pages/audit.js';
import { CsvPage } from './pages/csv-builder.js';
import { JobsPage } from './pages/jobs.js';
import { ClientsPage } from './pages/clients.js';
import { PeoplePage } from './pages/people.js';
import { ResourcesPage } from './pages/resources.js';
import { SubscriptionsPage } from './pages/subscriptions.js';
import { ErrorBox, message } from './ui.js';

export interface Me {
  profile: Resource;
  project: Resource & { name?: string; superAdmin?: boolean };
  membership: Resource & { admin?: boolean };
}

export interface PageProps {
  api: Api;
  me: Me;
  /** The project administered: the user's own, or for a super administrator any project. */
  projectId: string;
  route: string;
  navigate: (route: string) => void;
  /** For a super administrator: every project, and a way to switch to one (e.g. a new one). */
  projects: Resource[];
  reloadProjects: (select?: string) => Promise<void>;
}

const NAV: { route: string; label: string }[] = [
  { route: 'people', label: 'People' },
  { route: 'clients', label: 'Applications' },
  { route: 'jobs', label: 'Jobs' },
  { route: 'subscriptions', label: 'Subscriptions' },
  { route: 'csv', label: 'CSV builder' },
  { route: 'resources', label: 'Resources' },
  { route: 'audit', label: 'Audit' },
];

function SignIn({ env, error, route }: { env: Env; error?: string; route: string }) {
  return (
    <main id="main" class="signin">
      <h1>Cinder console</h1>
      <p>
        Administer a Cinder FHIR server: people, applications, export jobs, subscriptions, CSV exports,
        resources and the audit trail.
      </p>
      <ErrorBox error={error} />
      <button class="primary" onClick={() => void startSignIn(env, route)}>
        Sign in
      </button>
    </main>
  );
}

export function App({ env }: { env: Env }) {
  const [api] = useState(() => createApi(env));
  const [route, setRoute] = useState(() => routeOf(env, location.href));
  const [signedIn, setSignedIn] = useState(() => loadSession() !== undefined);
  const [me, setMe] = useState<Me>();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(true);
  const [projectId, setProjectId] = useState('');
  const [projects, setProjects] = useState<Resource[]>([]);

  const reloadProjects = async (select?: string) => {
    const list = await api.request<Bundle>('Project?_count=200&_sort=name');
    setProjects(entries(list.body));
    if (select) setProjectId(select);
  };

  const navigate = (to: string) => {
    history.pushState(null, '', `${env.consoleBase}${to}`);
    setRoute(to);
    document.getElementById('main')?.focus();
  };

  useEffect(() => {
    onSignedOut(() => {
      setSignedIn(false);
      setMe(undefined);
      setError('Your session has ended. Sign in again.');
    });
    const onPop = () => setRoute(routeOf(env, location.href));
    addEventListener('popstate', onPop);
    const params = new URLSearchParams(location.search);
    if (params.has('code') || params.has('error')) {
      completeSignIn(env, params)
        .then((to) => {
          history.replaceState(null, '', `${env.consoleBase}${to}`);
          setRoute(to);
          setSignedIn(true);
        })
        .catch((err: unknown) => {
          history.replaceState(null, '', env.consoleBase);
          setError(message(err));
          setBusy(false);
        });
    }
    return () => removeEventListener('popstate', onPop);
  }, []);

  useEffect(() => {
    if (!signedIn) {
      if (!new URLSearchParams(location.search).has('code')) setBusy(false);
      return;
    }
    setBusy(true);
    api
      .request<Me>('/auth/me', { headers: { accept: 'application/json' } })
      .then(async (r) => {
        setMe(r.body);
        setProjectId(r.body.project.id ?? '');
        if (r.body.project.superAdmin) await reloadProjects();
      })
      .catch((err: unknown) => setError(message(err)))
      .finally(() => setBusy(false));
  }, [signedIn]);

  if (busy) return <p class="loading">Loading…</p>;
  if (!signedIn || !me) return <SignIn env={env} route={route} {...(error ? { error } : {})} />;

  const section = route.split('/')[0] || 'people';
  const props: PageProps = { api, me, projectId, route, navigate, projects, reloadProjects };
  const superAdmin = me.project.superAdmin === true;
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header>
        <div class="brand">Cinder console</div>
        <nav aria-label="Sections">
          <ul>
            {NAV.map((n) => (
              <li>
                <a
                  href={`${env.consoleBase}${n.route}`}
                  aria-current={section === n.route ? 'page' : undefined}
                  onClick={(e) => {
                    e.preventDefault();
                    navigate(n.route);
                  }}
                >
                  {n.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="who">
          <span>
            {displayName(me.profile)} · {me.project.name ?? me.project.id}
            {superAdmin ? ' (super admin)' : me.membership.admin ? ' (admin)' : ''}
          </span>
          {superAdmin && projects.length > 0 ? (
            <>
              <label for="project-select">Project</label>
              <select
                id="project-select"
                value={projectId}
                onChange={(e) => setProjectId(e.currentTarget.value)}
              >
                {projects.map((p) => (
                  <option value={p.id}>{displayName(p)}</option>
                ))}
              </select>
            </>
          ) : null}
          <button
            onClick={() =>
              void signOut(env).then(() => {
                setSignedIn(false);
                setMe(undefined);
                setError(undefined);
              })
            }
          >
            Sign out
          </button>
        </div>
      </header>
      <main id="main" tabIndex={-1}>
        <ErrorBox error={error} />
        {section === 'people' ? <PeoplePage {...props} /> : null}
        {section === 'clients' ? <ClientsPage {...props} /> : null}
        {section === 'jobs' ? <JobsPage {...props} /> : null}
        {section === 'subscriptions' ? <SubscriptionsPage {...props} /> : null}
        {section === 'csv' ? <CsvPage {...props} /> : null}
        {section === 'resources' ? <ResourcesPage {...props} /> : null}
        {section === 'audit' ? <AuditPage {...props} /> : null}
        {!NAV.some((n) => n.route === section) ? <p>No such page.</p> : null}
      </main>
    </>
  );
}
