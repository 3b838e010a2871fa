// The project's audit trail (API.md §10): the AuditEvents the server records for every request, newest first, as
// who did what to which resources and patients and how it ended, filtered by days, agent and patient; "Load more"
// follows the searchset's `next` link.
import { useEffect, useRef, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import {
  NO_FILTERS,
  auditQuery,
  auditRow,
  filtersProblem,
  newestFirst,
  type AuditEvent,
  type AuditFilters,
  type AuditRow,
} from '../lib/audit.js';
import { entries, linkOf, when, type Bundle } from '../lib/fhir.js';
import { ErrorBox, Field, Notice, message } from '../ui.js';

const PAGE = 50;

function List({ items, label }: { items: string[]; label: string }) {
  if (!items.length) return <>—</>;
  if (items.length === 1) return <span class="wrap">{items[0]}</span>;
  return (
    <ul class="refs" aria-label={label}>
      {items.map((i) => (
        <li class="wrap">{i}</li>
      ))}
    </ul>
  );
}

function Row({ r }: { r: AuditRow }) {
  return (
    <tr data-audit={r.id}>
      <td class="time">{when(r.recorded)}</td>
      <td class="who">
        <strong class="wrap">{r.who}</strong>
        {r.whoDetail ? (
          <>
            <br />
            <small class="wrap">{r.whoDetail}</small>
          </>
        ) : null}
        {r.address ? (
          <>
            <br />
            <small>from {r.address}</small>
          </>
        ) : null}
      </td>
      <td class="what">
        {r.what}
        {r.action ? (
          <>
            <br />
            <small>{r.action}</small>
          </>
        ) : null}
      </td>
      <td class="resources">
        {r.resources.length || r.query === undefined ? (
          <List items={r.resources} label={`Resources of event ${r.id}`} />
        ) : null}
        {r.query !== undefined ? (
          <>
            {r.resources.length ? <br /> : null}
            <small class="wrap">Query: {r.query || '(none)'}</small>
          </>
        ) : null}
      </td>
      <td class="patients">
        <List items={r.patients} label={`Patients of event ${r.id}`} />
      </td>
      <td class="outcome">
        <span class={`outcome-${r.outcome}`}>{r.outcomeText}</span>
        {r.outcomeDesc ? (
          <>
            <br />
            <small class="wrap">{r.outcomeDesc}</small>
          </>
        ) : null}
      </td>
    </tr>
  );
}

export function AuditPage({ api, me, projectId }: PageProps) {
  const [filters, setFilters] = useState<AuditFilters>(NO_FILTERS);
  const [applied, setApplied] = useState<AuditFilters>(NO_FILTERS);
  const [rows, setRows] = useState<AuditRow[]>([]);
  const [next, setNext] = useState<string>();
  const [loading, setLoading] = useState(false);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<string>();
  const [tick, setTick] = useState(0);
  /** The latest load: an answer to an older one (filters changed meanwhile) is dropped. */
  const generation = useRef(0);
  const superAdmin = me.project.superAdmin === true;

  const fetchPage = async (url: string, append: boolean) => {
    const mine = ++generation.current;
    setLoading(true);
    setError(undefined);
    try {
      const r = await api.request<Bundle<AuditEvent>>(url);
      if (mine !== generation.current) return;
      const page = entries(r.body, true).map(auditRow);
      setRows((old) => newestFirst(append ? [...old, ...page] : page));
      setNext(linkOf(r.body, 'next'));
    } catch (err) {
      if (mine === generation.current) setError(message(err));
    } finally {
      if (mine === generation.current) {
        setLoading(false);
        setLoaded(true);
      }
    }
  };

  useEffect(() => {
    setRows([]);
    setNext(undefined);
    void fetchPage(`AuditEvent?${auditQuery(applied, PAGE)}`, false);
  }, [applied, tick, projectId]);

  const set = (key: keyof AuditFilters) => (e: Event) =>
    setFilters({ ...filters, [key]: (e.currentTarget as HTMLInputElement).value });

  const apply = (e: Event) => {
    e.preventDefault();
    const problem = filtersProblem(filters);
    if (problem) {
      setError(problem);
      return;
    }
    setApplied({ ...filters });
  };

  const clear = () => {
    setFilters(NO_FILTERS);
    setApplied(NO_FILTERS);
  };

  const filtered = Object.values(applied).some((v) => v.trim() !== '');

  return (
    <section aria-labelledby="audit-title">
      <h1 id="audit-title">Audit</h1>
      <p>
        Every request to the FHIR API, sign-ins and admin actions are recorded as audit events: who asked,
        what they did, which resources and patients it touched, and how it ended. Newest first; times are
        local.
      </p>
      {superAdmin ? (
        <Notice>
          As a super administrator you see the audit events of every project: the server offers no way to
          limit the search to the project selected above.
        </Notice>
      ) : null}
      <form class="inline card audit-filters" aria-label="Filter audit events" onSubmit={apply}>
        <Field label="From">
          {(id) => <input id={id} type="date" value={filters.from} onInput={set('from')} />}
        </Field>
        <Field label="To">
          {(id) => <input id={id} type="date" value={filters.to} onInput={set('to')} />}
        </Field>
        <Field label="Agent" hint="Practitioner/…, Patient/…, ClientApplication/…">
          {(id) => (
            <input
              id={id}
              value={filters.agent}
              onInput={set('agent')}
              placeholder="Practitioner/123"
              autocomplete="off"
              spellcheck={false}
            />
          )}
        </Field>
        <Field label="Patient" hint="Patient/… or the patient's id">
          {(id) => (
            <input
              id={id}
              value={filters.patient}
              onInput={set('patient')}
              placeholder="Patient/456"
              autocomplete="off"
              spellcheck={false}
            />
          )}
        </Field>
        <div class="toolbar full">
          <button type="submit" class="primary">
            Apply filters
          </button>
          <button type="button" onClick={clear}>
            Clear filters
          </button>
          <button type="button" onClick={() => setTick((t) => t + 1)}>
            Refresh
          </button>
        </div>
      </form>
      <ErrorBox error={error} />
      <p class="count" role="status">
        {loading && !rows.length
          ? 'Loading audit events…'
          : loaded
            ? `${rows.length} ${rows.length === 1 ? 'event' : 'events'} shown${next ? ', more to load' : ''}${filtered ? ' (filtered)' : ''}.`
            : ''}
      </p>
      <div class="table-wrap">
        <table class="audit" aria-busy={loading ? 'true' : undefined}>
          <caption class="sr-only">Audit events, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Who</th>
              <th scope="col">What</th>
              <th scope="col">Resources</th>
              <th scope="col">Patients</th>
              <th scope="col">Outcome</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <Row r={r} />
            ))}
          </tbody>
        </table>
      </div>
      {loaded && !loading && rows.length === 0 && !error ? (
        <p>{filtered ? 'No audit events match these filters.' : 'No audit events yet.'}</p>
      ) : null}
      {next ? (
        <div class="toolbar">
          <button disabled={loading} onClick={() => void fetchPage(next, true)}>
            {loading ? 'Loading…' : 'Load more'}
          </button>
        </div>
      ) : null}
    </section>
  );
}
