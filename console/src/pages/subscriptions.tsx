// The project's Subscriptions (API.md §8): what each asks for and where it sends, its delivery state from `$status`
// (status, events, pending, last delivery, last error) and a "Send test notification" button ($test-notification).
import { useEffect, useState } from 'preact/hooks';
import type { PageProps } from '../app.js';
import { entries, linkOf, when, type Bundle } from '../lib/fhir.js';
import { errorMessage, outcomeMessages } from '../lib/outcome.js';
import {
  parseSubscriptionStatus,
  summarize,
  type Subscription,
  type SubscriptionStatusInfo,
  type SubscriptionSummary,
} from '../lib/subscriptions.js';
import { ErrorBox, Notice, message } from '../ui.js';

const PAGE = 100;

/** A row's `$status`: what it said, or why it could not be read. */
interface StatusCell {
  info?: SubscriptionStatusInfo;
  problem?: string;
}

interface Answer {
  status: number;
  text: string;
}

const dash = (v: number | undefined): string => (v === undefined ? '—' : String(v));

function What({ s }: { s: SubscriptionSummary }) {
  return (
    <td>
      <small>{s.form === 'topic' ? 'Topic' : 'Criteria'}</small>
      <br />
      <span class="wrap">{s.criteria || '—'}</span>
      {s.filters.length ? (
        <ul class="filters" aria-label={`Filters of subscription ${s.id}`}>
          {s.filters.map((f) => (
            <li class="wrap">{f}</li>
          ))}
        </ul>
      ) : null}
    </td>
  );
}

function Channel({ s }: { s: SubscriptionSummary }) {
  return (
    <td>
      <strong>{s.channelType || '—'}</strong>
      {s.endpoint ? (
        <>
          <br />
          <small class="wrap">{s.endpoint}</small>
        </>
      ) : null}
      {s.content ? (
        <>
          <br />
          <small>{s.content}</small>
        </>
      ) : null}
    </td>
  );
}

export function SubscriptionsPage({ api, me, projectId }: PageProps) {
  const [subs, setSubs] = useState<Subscription[]>([]);
  const [statuses, setStatuses] = useState<Record<string, StatusCell>>({});
  const [answers, setAnswers] = useState<Record<string, Answer>>({});
  const [sending, setSending] = useState<string>();
  const [more, setMore] = useState(false);
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<string>();
  const [tick, setTick] = useState(0);

  const load = async () => {
    const r = await api.request<Bundle<Subscription>>(`Subscription?_count=${PAGE}&_sort=-_lastUpdated`);
    // A super administrator reads every project's: show those of the project administered, as Applications does.
    const list = entries(r.body).filter((s) => !me.project.superAdmin || s.meta?.project === projectId);
    setSubs(list);
    setMore(linkOf(r.body, 'next') !== undefined);
    const next: Record<string, StatusCell> = {};
    await Promise.all(
      list.map(async (s) => {
        const id = s.id ?? '';
        try {
          const a = await api.request(`Subscription/${id}/$status`, { allowErrors: true });
          const info = a.status < 400 ? parseSubscriptionStatus(a.body, id) : undefined;
          next[id] = info
            ? { info }
            : { problem: a.status < 400 ? 'The answer is not a status.' : errorMessage(a.status, a.body) };
        } catch (err) {
          next[id] = { problem: message(err) };
        }
      }),
    );
    setStatuses(next);
  };

  useEffect(() => {
    setError(undefined);
    load()
      .catch((err: unknown) => setError(message(err)))
      .finally(() => setLoaded(true));
  }, [tick, projectId]);

  const sendTest = async (id: string) => {
    setSending(id);
    const r = await api
      .request(`Subscription/${id}/$test-notification`, { method: 'POST', allowErrors: true })
      .catch((err: unknown) => ({ status: 0, body: undefined, error: message(err) }));
    const said = outcomeMessages(r.body).join(' ');
    const text =
      'error' in r
        ? r.error
        : r.status < 400
          ? said || 'Test notification queued.'
          : said || errorMessage(r.status, r.body);
    setAnswers((a) => ({ ...a, [id]: { status: r.status, text } }));
    setSending(undefined);
    // A sent test changes the pending count; after a refusal the row stays as it is (with the answer beside it).
    if (r.status > 0 && r.status < 400) setTick((t) => t + 1);
  };

  return (
    <section aria-labelledby="subscriptions-title">
      <h1 id="subscriptions-title">Subscriptions</h1>
      <div class="toolbar">
        <button onClick={() => setTick((t) => t + 1)}>Refresh</button>
      </div>
      <ErrorBox error={error} />
      {more ? <Notice>Showing the {PAGE} most recently changed subscriptions.</Notice> : null}
      <div class="table-wrap">
        <table>
          <caption class="sr-only">Subscriptions of the project, most recently changed first</caption>
          <thead>
            <tr>
              <th scope="col">Subscription</th>
              <th scope="col">Criteria or topic</th>
              <th scope="col">Channel</th>
              <th scope="col">Status</th>
              <th scope="col">Events</th>
              <th scope="col">Pending</th>
              <th scope="col">Last delivery</th>
              <th scope="col">Last error</th>
              <th scope="col">Test</th>
            </tr>
          </thead>
          <tbody>
            {subs.map((sub) => {
              const s = summarize(sub);
              const cell = statuses[s.id];
              const info = cell?.info;
              const status = info?.status || s.status;
              const lastError = info?.errors.length ? info.errors.join('; ') : s.error;
              const answer = answers[s.id];
              return (
                <tr data-subscription={s.id}>
                  <td>
                    <small class="wrap">{s.id}</small>
                    {sub.reason ? (
                      <>
                        <br />
                        {sub.reason}
                      </>
                    ) : null}
                  </td>
                  <What s={s} />
                  <Channel s={s} />
                  <td>
                    <span class={`status sub-${status}`}>{status || '—'}</span>
                    {cell?.problem ? (
                      <p class="answer bad">Delivery state unavailable: {cell.problem}</p>
                    ) : null}
                  </td>
                  <td class="events">{dash(info?.events)}</td>
                  <td class="pending">{dash(info?.pending)}</td>
                  <td class="last-delivery">{when(info?.lastDelivery)}</td>
                  <td class="last-error">{lastError || '—'}</td>
                  <td>
                    <button
                      aria-label={`Send test notification for subscription ${s.id}`}
                      disabled={sending === s.id}
                      onClick={() => void sendTest(s.id)}
                    >
                      Send test notification
                    </button>
                    {answer ? (
                      <p
                        class={`answer ${answer.status >= 400 || answer.status === 0 ? 'bad' : 'good'}`}
                        role="status"
                      >
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
      {loaded && subs.length === 0 && !error ? <p>No subscriptions yet.</p> : null}
    </section>
  );
}
