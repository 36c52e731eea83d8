import { h } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import htm from "htm";
import { seriesByQueue } from "./api.js";
import { BacklogChart } from "./chart.js";
import { age, rate, shortName } from "./format.js";

const html = htm.bind(h);
export const pollMs = 2000;
const historySeconds = 3600;
const chartQueuesMax = 8;

/** Polls `load` every pollMs while mounted; the first call at once. */
export function usePoll(load, deps) {
  useEffect(() => {
    let stopped = false;
    let timer;
    const tick = async () => {
      try {
        await load();
      } finally {
        if (!stopped) timer = setTimeout(tick, pollMs);
      }
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, deps);
}

/** The environment's queues with their counts, rates from /metrics when the key may read it. */
export function QueuesPage({ session }) {
  const { api, me } = session;
  const [rows, setRows] = useState(undefined);
  const [error, setError] = useState(undefined);
  const history = useRef({ times: [], backlog: new Map() });
  const lastTotals = useRef(undefined);
  const canReadMetrics = me.scopes.includes("metrics:read");

  usePoll(async () => {
    try {
      const { queues } = await api.listQueues(me.env);
      const full = await Promise.all(queues.map((q) => api.getQueue(q.name)));
      const nowSeconds = Date.now() / 1000;
      const rates = canReadMetrics ? await readRates(api, me.env, nowSeconds, lastTotals) : {};
      remember(history.current, nowSeconds, full);
      setRows(full.map((q) => ({ q, rates: rates[shortName(q.name)] })));
      setError(undefined);
    } catch (e) {
      setError(e.message);
    }
  }, [api]);

  if (rows === undefined) return error ? html`<p class="error" role="alert">${error}</p>` : html`<p class="note">Loading queues…</p>`;
  const h0 = history.current;
  const charted = rows.slice(0, chartQueuesMax).map(({ q }) => ({ label: shortName(q.name), values: h0.backlog.get(q.name) ?? [] }));
  return html`
    ${error && html`<p class="error" role="alert">${error}</p>`}
    <section>
      <h2>Backlog</h2>
      <p class="note">Since this page opened, up to the last hour; every ${pollMs / 1000} s.</p>
      ${charted.length > 0 && html`<${BacklogChart} times=${h0.times} series=${charted} />`}
    </section>
    <section>
      <h2>Queues</h2>
      <table data-testid="queues">
        <thead>
          <tr>
            <th>queue</th><th class="num">backlog</th><th class="num">oldest</th><th class="num">in flight</th>
            <th class="num">dead letters</th><th class="num">sent/s</th><th class="num">acked/s</th>
          </tr>
        </thead>
        <tbody>
          ${rows.map(({ q, rates }) => {
            const c = q.counts;
            const oldest = c.oldest_message_time === null ? null : Math.max(0, (Date.now() - Date.parse(c.oldest_message_time)) / 1000);
            return html`<tr data-queue=${shortName(q.name)}>
              <td><a href=${`#/queues/${encodeURIComponent(shortName(q.name))}`}>${shortName(q.name)}</a></td>
              <td class="num" data-col="backlog">${c.ready + c.delayed + c.leased}</td>
              <td class="num" data-col="oldest">${age(oldest)}</td>
              <td class="num" data-col="in-flight">${c.leased}</td>
              <td class="num" data-col="dead">${c.dead}</td>
              <td class="num" data-col="sent-rate">${rate(rates?.sent)}</td>
              <td class="num" data-col="acked-rate">${rate(rates?.acked)}</td>
            </tr>`;
          })}
        </tbody>
      </table>
      ${rows.length === 0 && html`<p class="note">No queues in ${me.env} yet.</p>`}
      ${!canReadMetrics && html`<p class="note">Rates need a key with metrics:read.</p>`}
    </section>`;
}

function remember(history, nowSeconds, queues) {
  history.times.push(nowSeconds);
  for (const q of queues) {
    if (!history.backlog.has(q.name)) history.backlog.set(q.name, history.times.slice(0, -1).map(() => null));
  }
  const now = new Map(queues.map((q) => [q.name, q.counts.ready + q.counts.delayed + q.counts.leased]));
  // Every line as long as the times, a queue gone meanwhile with a gap.
  for (const [name, values] of history.backlog) values.push(now.get(name) ?? null);
  while (history.times.length > 0 && history.times[0] < nowSeconds - historySeconds) {
    history.times.shift();
    for (const values of history.backlog.values()) values.shift();
  }
}

async function readRates(api, env, nowSeconds, last) {
  const text = await api.metrics();
  const totals = {
    at: nowSeconds,
    sent: seriesByQueue(text, "celld_queue_messages_sent_total", env),
    acked: seriesByQueue(text, "celld_queue_messages_acked_total", env),
  };
  const before = last.current;
  last.current = totals;
  if (before === undefined) return {};
  const dt = totals.at - before.at;
  const rates = {};
  for (const queue of new Set([...Object.keys(totals.sent), ...Object.keys(totals.acked)])) {
    rates[queue] = {
      sent: ((totals.sent[queue] ?? 0) - (before.sent[queue] ?? 0)) / dt,
      acked: ((totals.acked[queue] ?? 0) - (before.acked[queue] ?? 0)) / dt,
    };
  }
  return rates;
}
