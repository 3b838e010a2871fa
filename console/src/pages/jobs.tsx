// The project's AsyncJobs (API.md §5): status, progress (the status endpoint's X-Progress), times, output files to
// download, a bulk export kick-off, and Cancel ($cancel) with the server's answer shown as it is, 400 included.
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { entries, when, type Bundle } from '../lib/fhir.js';
import { operationOf, outputFiles, type AsyncJob } from '../lib/jobs.js';
import { outcomeMessages } from '../lib/outcome.js';
import { ErrorBox, Notice, download, message } from '../ui.js';

export function JobsPage({ api }: PageProps) {
  const [jobs, setJobs] = useState<AsyncJob[]>([]);
  const [progress, setProgress] = useState<Record<string, string>>({});
  const [answers, setAnswers] = useState<Record<string, { status: number; text: string }>>({});
  const [error, setError] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [tick, setTick] = useState(0);

  const load = async () => {
    const r = await api.request<Bundle<AsyncJob>>('AsyncJob?_sort=-_lastUpdated&_count=50');
    const list = entries(r.body);
    setJobs(list);
    const running = list.filter((j) => j.status === 'accepted');
    const next: Record<string, string> = {};
    await Promise.all(
      running.map(async (j) => {
        const s = await api.request<AsyncJob>(`AsyncJob/${j.id ?? ''}`, { allowErrors: true });
        next[j.id ?? ''] = s.headers.get('x-progress') ?? (s.status === 202 ? 'running' : '');
      }),
    );
    setProgress(next);
    return running.length > 0;
  };

  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    load()
      .then((running) => {
        if (running) timer = setTimeout(() => setTick((t) => t + 1), 2000);
      })
      .catch((err: unknown) => setError(message(err)));
    return () => clearTimeout(timer);
  }, [tick]);

  const startExport = async () => {
    setError(undefined);
    setNotice(undefined);
    try {
      const r = await api.request('$export', { headers: { prefer: 'respond-async' } });
      const location = r.headers.get('content-location') ?? '';
      setNotice(`Export started: ${location.split('/').pop() ?? ''}`);
      setTick((t) => t + 1);
    } catch (err) {
      setError(message(err));
    }
  };

  const cancel = async (job: AsyncJob) => {
    const r = await api
      .request(`AsyncJob/${job.id ?? ''}/$cancel`, { method: 'POST', allowErrors: true })
      .catch((err: unknown) => ({ status: 0, body: undefined, error: message(err) }));
    const text = outcomeMessages(r.body).join(' ') || ('error' in r ? r.error : '');
    setAnswers({ ...answers, [job.id ?? '']: { status: r.status, text } });
    setTick((t) => t + 1);
  };

  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">Jobs</h1>
      <div class="toolbar">
        <button class="primary" onClick={() => void startExport()}>
          Start bulk export
        </button>
        <button onClick={() => setTick((t) => t + 1)}>Refresh</button>
      </div>
      <ErrorBox error={error} />
      {notice ? <Notice kind="ok">{notice}</Notice> : null}
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Asynchronous jobs, newest first</caption>
          <thead>
            <tr>
              <th scope="col">Job</th>
              <th scope="col">Status</th>
              <th scope="col">Progress</th>
              <th scope="col">Requested</th>
              <th scope="col">Finished</th>
              <th scope="col">Output</th>
              <th scope="col">Cancel</th>
            </tr>
          </thead>
          <tbody>
            {jobs.map((j) => {
              const id = j.id ?? '';
              const answer = answers[id];
              return (
                <tr data-job={id}>
                  <td>
                    <strong>{operationOf(j.request)}</strong>
                    <br />
                    <small class="wrap">{id}</small>
                  </td>
                  <td class={`status ${j.status ?? ''}`}>{j.status}</td>
                  <td class="progress">{j.status === 'accepted' ? (progress[id] ?? '…') : '—'}</td>
                  <td>{when(j.requestTime)}</td>
                  <td>{j.status === 'accepted' ? '—' : when(j.transactionTime ?? j.meta?.lastUpdated)}</td>
                  <td>
                    {outputFiles(j).map((f) => (
                      <button
                        class="link"
                        onClick={() =>
                          void download(api, f.url, f.name).catch((e: unknown) => setError(message(e)))
                        }
                      >
                        {f.name}
                      </button>
                    ))}
                  </td>
                  <td>
                    <button aria-label={`Cancel job ${id}`} onClick={() => void cancel(j)}>
                      Cancel
                    </button>
                    {answer ? (
                      <p class={`answer ${answer.status >= 400 ? 'bad' : 'good'}`} role="status">
                        {answer.status}: {answer.text}
                      </p>
                    ) : null}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      {jobs.length === 0 && !error ? <p>No jobs yet.</p> : null}
    </section>
  );
}
