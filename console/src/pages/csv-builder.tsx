// The CSV builder (API.md §6): a resource type, columns from its search parameters or typed FHIRPath, filters, a
// preview of the first rows of `$csv`, the download of export.csv, and the CSV bulk export for more than 1000 rows.
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { loadTypes, type TypeInfo } from '../lib/capabilities.js';
import { csvExportPath, csvPath, parseCsv, type Filter } from '../lib/csv.js';
import { ErrorBox, Field, Notice, download, message } from '../ui.js';

/** $csv's own row limit: more matches need the bulk export. */
const CSV_LIMIT = 1000;
const PREVIEW_ROWS = 20;
/** Types `$csv` refuses (their rows hold secrets). */
const UNSUPPORTED = new Set(['User', 'ClientApplication', 'Login']);

export function CsvPage({ api, navigate }: PageProps) {
  const [types, setTypes] = useState<TypeInfo[]>([]);
  const [type, setType] = useState('Patient');
  const [columns, setColumns] = useState<string[]>(['id', 'name', 'birthdate']);
  const [path, setPath] = useState('');
  const [filters, setFilters] = useState<Filter[]>([]);
  const [preview, setPreview] = useState<{ rows: string[][]; total: number }>();
  const [error, setError] = useState<string>();
  const [notice, setNotice] = useState<string>();

  useEffect(() => {
    loadTypes(api)
      .then((t) => setTypes(t.filter((x) => !UNSUPPORTED.has(x.type))))
      .catch((err: unknown) => setError(message(err)));
  }, []);

  const info = types.find((t) => t.type === type);
  const params = info?.searchParams ?? [];

  const pickType = (t: string) => {
    setType(t);
    setColumns(['id']);
    setFilters([]);
    setPreview(undefined);
  };
  const toggle = (name: string, on: boolean) =>
    setColumns(on ? [...columns, name] : columns.filter((c) => c !== name));
  const addPath = (e: Event) => {
    e.preventDefault();
    if (path.trim()) setColumns([...columns, path.trim()]);
    setPath('');
  };

  const run = async (what: 'preview' | 'download' | 'export') => {
    setError(undefined);
    setNotice(undefined);
    try {
      if (what === 'preview') {
        const r = await api.request<string>(csvPath(type, columns, filters), {
          text: true,
          headers: { accept: 'text/csv' },
        });
        const rows = parseCsv(r.body);
        setPreview({ rows, total: Number(r.headers.get('x-total-count') ?? rows.length - 1) });
      } else if (what === 'download') {
        await download(api, csvPath(type, columns, filters), 'export.csv');
      } else {
        const r = await api.request(csvExportPath(type, columns, filters), {
          headers: { prefer: 'respond-async' },
        });
        const job = (r.headers.get('content-location') ?? '').split('/').pop() ?? '';
        setNotice(
          `CSV export started as AsyncJob ${job}: its file appears on the Jobs page when it completes.`,
        );
      }
    } catch (err) {
      setError(message(err));
    }
  };

  const [head, ...body] = preview?.rows ?? [];
  return (
    <section aria-labelledby="csv-title">
      <h1 id="csv-title">CSV builder</h1>
      <div class="card">
        <Field label="Resource type">
          {(id) => (
            <select id={id} value={type} onChange={(e) => pickType(e.currentTarget.value)}>
              {(types.length ? types.map((t) => t.type) : [type]).map((t) => (
                <option>{t}</option>
              ))}
            </select>
          )}
        </Field>
        <h2 id="columns-title">Columns</h2>
        <ol class="chips" aria-labelledby="columns-title">
          {columns.map((c, i) => (
            <li>
              <code>{c}</code>
              <button
                class="small"
                aria-label={`Remove column ${c}`}
                onClick={() => setColumns(columns.filter((_, j) => j !== i))}
              >
                ×
              </button>
            </li>
          ))}
        </ol>
        <details>
          <summary>Search parameters of {type} as columns</summary>
          <div class="checks">
            {params.map((p) => (
              <label>
                <input
                  type="checkbox"
                  checked={columns.includes(p.name)}
                  onChange={(e) => toggle(p.name, e.currentTarget.checked)}
                />{' '}
                {p.name}
              </label>
            ))}
          </div>
        </details>
        <form class="inline" onSubmit={addPath}>
          <Field
            label="FHIRPath column"
            hint="e.g. name.given.first() or telecom.where(system='phone').value"
          >
            {(id) => <input id={id} value={path} onInput={(e) => setPath(e.currentTarget.value)} />}
          </Field>
          <button type="submit">Add column</button>
        </form>
        <h2>Filters</h2>
        {filters.map((f, i) => (
          <div class="filter">
            <Field label={`Filter ${i + 1} parameter`}>
              {(id) => (
                <select
                  id={id}
                  value={f.param}
                  onChange={(e) =>
                    setFilters(filters.map((g, j) => (j === i ? { ...g, param: e.currentTarget.value } : g)))
                  }
                >
                  {['_id', '_lastUpdated', ...params.map((p) => p.name)].map((n) => (
                    <option>{n}</option>
                  ))}
                </select>
              )}
            </Field>
            <Field label={`Filter ${i + 1} value`}>
              {(id) => (
                <input
                  id={id}
                  value={f.value}
                  onInput={(e) =>
                    setFilters(filters.map((g, j) => (j === i ? { ...g, value: e.currentTarget.value } : g)))
                  }
                />
              )}
            </Field>
            <button
              aria-label={`Remove filter ${i + 1}`}
              onClick={() => setFilters(filters.filter((_, j) => j !== i))}
            >
              Remove
            </button>
          </div>
        ))}
        <button onClick={() => setFilters([...filters, { param: params[0]?.name ?? '_id', value: '' }])}>
          Add filter
        </button>
      </div>
      <div class="toolbar">
        <button class="primary" onClick={() => void run('preview')}>
          Preview
        </button>
        <button onClick={() => void run('download')}>Download export.csv</button>
        <button onClick={() => void run('export')}>Start CSV bulk export</button>
      </div>
      <ErrorBox error={error} />
      {notice ? (
        <Notice kind="ok">
          {notice}{' '}
          <button class="link" onClick={() => navigate('jobs')}>
            Open Jobs
          </button>
        </Notice>
      ) : null}
      {preview ? (
        <div class="card">
          <h2>Preview</h2>
          <p role="status">
            {preview.total} matching {type} resources
            {preview.total > CSV_LIMIT
              ? `; export.csv holds the first ${CSV_LIMIT}: start the CSV bulk export for all of them.`
              : '.'}{' '}
            Showing {Math.min(PREVIEW_ROWS, body.length)} rows.
          </p>
          <div class="table-wrap">
            <table class="preview">
              <caption class="sr-only">First rows of the CSV</caption>
              <thead>
                <tr>
                  {(head ?? []).map((h) => (
                    <th scope="col">{h}</th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {body.slice(0, PREVIEW_ROWS).map((row) => (
                  <tr>
                    {row.map((cell) => (
                      <td>{cell}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </div>
      ) : null}
    </section>
  );
}
