// Browse and search any resource type with the server's paging links, view one resource as JSON, and its history
// (FHIR RESTful API: search, read, history, https://hl7.org/fhir/R4/http.html), and what $validate says of it against a
// chosen profile (API.md §9).
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { loadTypes } from '../lib/capabilities.js';
import { displayName, entries, linkOf, when, type Bundle, type Resource } from '../lib/fhir.js';
import { profileChoices, validateBody, validationRows, type ValidationRow } from '../lib/validation.js';
import { ErrorBox, Field, message } from '../ui.js';

function SearchView({ api, navigate, type, ...rest }: PageProps & { type: string }) {
  const [types, setTypes] = useState<string[]>([]);
  const [query, setQuery] = useState('_count=20');
  const [bundle, setBundle] = useState<Bundle>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    loadTypes(api)
      .then((t) => setTypes(t.map((x) => x.type)))
      .catch((err: unknown) => setError(message(err)));
  }, []);

  const open = async (url: string) => {
    setError(undefined);
    try {
      setBundle((await api.request<Bundle>(url)).body);
    } catch (err) {
      setBundle(undefined);
      setError(message(err));
    }
  };
  useEffect(() => {
    if (type) void open(`${type}?${query}`);
  }, [type]);

  const search = (e: Event) => {
    e.preventDefault();
    void open(`${type}?${query.replace(/^\?/, '')}`);
  };
  const prev = linkOf(bundle, 'previous') ?? linkOf(bundle, 'prev');
  const next = linkOf(bundle, 'next');
  const found = entries(bundle, true);

  return (
    <>
      <form class="card inline" onSubmit={search}>
        <Field label="Resource type">
          {(id) => (
            <select id={id} value={type} onChange={(e) => navigate(`resources/${e.currentTarget.value}`)}>
              <option value="">Choose a type…</option>
              {types.map((t) => (
                <option>{t}</option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Search parameters" hint="e.g. name=smith&_sort=-_lastUpdated&_count=20">
          {(id) => <input id={id} value={query} onInput={(e) => setQuery(e.currentTarget.value)} />}
        </Field>
        <button type="submit" class="primary" disabled={!type}>
          Search
        </button>
      </form>
      <ErrorBox error={error} />
      {type ? <CreateResource api={api} navigate={navigate} type={type} {...rest} /> : null}
      {bundle ? (
        <div class="card">
          <p role="status">
            {bundle.total !== undefined ? `${bundle.total} found; ` : ''}
            {found.length} on this page.
          </p>
          <div class="table-wrap">
            <table>
              <caption class="sr-only">Search results</caption>
              <thead>
                <tr>
                  <th scope="col">Id</th>
                  <th scope="col">Name</th>
                  <th scope="col">Last updated</th>
                </tr>
              </thead>
              <tbody>
                {found.map((r) => (
                  <tr>
                    <td>
                      <a
                        href={`${api.env.consoleBase}resources/${r.resourceType}/${r.id ?? ''}`}
                        onClick={(e) => {
                          e.preventDefault();
                          navigate(`resources/${r.resourceType}/${r.id ?? ''}`);
                        }}
                      >
                        {r.id}
                      </a>
                    </td>
                    <td>{displayName(r)}</td>
                    <td>{when(r.meta?.lastUpdated)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <div class="toolbar">
            <button disabled={!prev} onClick={() => prev && void open(prev)}>
              Previous page
            </button>
            <button disabled={!next} onClick={() => next && void open(next)}>
              Next page
            </button>
          </div>
        </div>
      ) : null}
    </>
  );
}

/** A new resource from its JSON (POST {fhir}/<type>); the server's validation issues are shown as they come. */
function CreateResource({ api, navigate, type, me, projectId }: PageProps & { type: string }) {
  const [text, setText] = useState(`{\n  "resourceType": "${type}"\n}`);
  const [error, setError] = useState<string>();
  useEffect(() => setText(`{\n  "resourceType": "${type}"\n}`), [type]);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      setError(`The text is not JSON: ${message(err)}`);
      return;
    }
    try {
      // A super administrator's resource goes to the project the console administers, not to the Super Admin one.
      const r0 = json as Resource;
      const body =
        me.project.superAdmin && !r0.meta?.project ? { ...r0, meta: { ...r0.meta, project: projectId } } : r0;
      const r = await api.request<Resource>(type, { method: 'POST', json: body });
      navigate(`resources/${type}/${r.body.id ?? ''}`);
    } catch (err) {
      setError(message(err));
    }
  };
  return (
    <details class="card">
      <summary>New {type}</summary>
      <form onSubmit={(e) => void submit(e)}>
        <Field label={`${type} as JSON`}>
          {(id) => (
            <textarea
              id={id}
              rows={8}
              spellcheck={false}
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
            />
          )}
        </Field>
        <ErrorBox error={error} />
        <button type="submit" class="primary">
          Create {type}
        </button>
      </form>
    </details>
  );
}

/** `$validate` of the version shown against a profile chosen from those it declares, the base and the server's. */
function ValidateCard({
  api,
  type,
  resource,
}: Pick<PageProps, 'api'> & { type: string; resource: Resource }) {
  const [known, setKnown] = useState<string[]>([]);
  const [profile, setProfile] = useState('');
  const [rows, setRows] = useState<ValidationRow[]>();
  const [error, setError] = useState<string>();
  const choices = profileChoices(resource, known);

  useEffect(() => {
    setProfile(choices[0] ?? '');
    setRows(undefined);
    api
      .request<Bundle>(`StructureDefinition?type=${encodeURIComponent(type)}&_elements=url&_count=200`)
      .then((r) =>
        setKnown(
          entries(r.body)
            .map((sd) => sd.url)
            .filter((u): u is string => typeof u === 'string'),
        ),
      )
      .catch(() => setKnown([]));
  }, [type, resource]);

  const run = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    try {
      const answer = await api.request(`${type}/${resource.id ?? ''}/$validate`, {
        method: 'POST',
        json: validateBody(resource, profile),
      });
      setRows(validationRows(answer.body));
    } catch (err) {
      setRows(undefined);
      setError(message(err));
    }
  };

  return (
    <form class="card" aria-labelledby="validate-title" onSubmit={(e) => void run(e)}>
      <h3 id="validate-title">Validate</h3>
      <Field
        label="Profile"
        hint="A canonical URL: the resource's own profiles and the server's are suggested"
      >
        {(fid) => (
          <>
            <input
              id={fid}
              list={`${fid}-profiles`}
              value={profile}
              onInput={(e) => setProfile((e.target as HTMLInputElement).value)}
            />
            <datalist id={`${fid}-profiles`}>
              {choices.map((c) => (
                <option value={c} />
              ))}
            </datalist>
          </>
        )}
      </Field>
      <button type="submit">Validate</button>
      <ErrorBox error={error} />
      {rows ? (
        <div class="table-wrap">
          <table aria-label="Validation issues">
            <thead>
              <tr>
                <th scope="col">Severity</th>
                <th scope="col">Issue</th>
                <th scope="col">Where</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr class={`issue-${r.severity}`}>
                  <td>{r.severity}</td>
                  <td>{r.text}</td>
                  <td>
                    <code>{r.expression}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </form>
  );
}

function ResourceView({ api, navigate, type, id }: PageProps & { type: string; id: string }) {
  const [resource, setResource] = useState<Resource>();
  const [history, setHistory] = useState<Resource[]>();
  const [shown, setShown] = useState<Resource>();
  const [error, setError] = useState<string>();

  useEffect(() => {
    setHistory(undefined);
    api
      .request<Resource>(`${type}/${id}`)
      .then((r) => {
        setResource(r.body);
        setShown(r.body);
      })
      .catch((err: unknown) => setError(message(err)));
  }, [type, id]);

  const loadHistory = async () => {
    try {
      setHistory(entries((await api.request<Bundle>(`${type}/${id}/_history?_count=50`)).body));
    } catch (err) {
      setError(message(err));
    }
  };

  return (
    <>
      <p>
        <a
          href={`${api.env.consoleBase}resources/${type}`}
          onClick={(e) => {
            e.preventDefault();
            navigate(`resources/${type}`);
          }}
        >
          ← {type} search
        </a>
      </p>
      <h2>
        {type}/{id}
        {shown?.meta?.versionId ? ` (version ${shown.meta.versionId})` : ''}
      </h2>
      <ErrorBox error={error} />
      <div class="toolbar">
        <button onClick={() => void loadHistory()}>Show history</button>
        {shown !== resource ? <button onClick={() => setShown(resource)}>Show current version</button> : null}
      </div>
      {history ? (
        <div class="card">
          <h3>History</h3>
          <ul class="history">
            {history.map((v) => (
              <li>
                <button class="link" onClick={() => setShown(v)}>
                  Version {v.meta?.versionId ?? '?'}
                </button>{' '}
                {when(v.meta?.lastUpdated)}
              </li>
            ))}
          </ul>
        </div>
      ) : null}
      {shown ? <ValidateCard api={api} type={type} resource={shown} /> : null}
      {shown ? (
        <pre class="json" tabIndex={0} aria-label={`${type}/${id} as JSON`}>
          {JSON.stringify(shown, null, 2)}
        </pre>
      ) : null}
    </>
  );
}

export function ResourcesPage(props: PageProps) {
  const [, type = '', id = ''] = props.route.split('/');
  return (
    <section aria-labelledby="resources-title">
      <h1 id="resources-title">Resources</h1>
      {id ? <ResourceView {...props} type={type} id={id} /> : <SearchView {...props} type={type} />}
    </section>
  );
}
