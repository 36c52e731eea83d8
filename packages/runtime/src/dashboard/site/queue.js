import { h } from "preact";
import { useState } from "preact/hooks";
import htm from "htm";
import { age, preview } from "./format.js";
import { usePoll } from "./queues.js";

const html = htm.bind(h);

/**
 * One queue: its settings and counts, its waiting messages (browsed without leasing them), a test
 * send, and its dead letters. What a key may not do is not offered; every change asks first.
 */
export function QueuePage({ session, queue }) {
  const { api, me } = session;
  const name = `${me.env}/queues/${queue}`;
  const can = (scope) => me.scopes.includes(scope);
  const [info, setInfo] = useState(undefined);
  const [error, setError] = useState(undefined);
  const [notice, setNotice] = useState(undefined);
  const [messages, setMessages] = useState(undefined);
  const [dead, setDead] = useState(undefined);

  const loadDead = async () => setDead((await api.deadLetters(name)).dead_letters);
  usePoll(async () => {
    try {
      setInfo(await api.getQueue(name));
      if (can("events:write")) await loadDead();
      setError(undefined);
    } catch (e) {
      setError(e.message);
    }
  }, [api, name]);

  /** Runs a change once confirmed, then says what it did. */
  const act = async (question, run, done) => {
    if (!confirm(question)) return;
    try {
      const result = await run();
      setNotice(done(result));
      setError(undefined);
      setInfo(await api.getQueue(name));
      if (can("events:write")) await loadDead();
    } catch (e) {
      setError(e.message);
    }
  };

  if (info === undefined) return error ? html`<p class="error" role="alert">${error}</p>` : html`<p class="note">Loading ${queue}…</p>`;
  const c = info.counts;
  const oldest = c.oldest_message_time === null ? null : (Date.now() - Date.parse(c.oldest_message_time)) / 1000;
  return html`
    <p><a href="#/">← queues</a></p>
    <h2 data-testid="queue-name">${queue}</h2>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${notice && html`<p class="note" role="status" data-testid="notice">${notice}</p>`}
    <section class="card">
      <table data-testid="counts">
        <tr><th>ready</th><td class="num" data-col="ready">${c.ready}</td><th>delayed</th><td class="num">${c.delayed}</td>
          <th>in flight</th><td class="num" data-col="in-flight">${c.leased}</td><th>dead letters</th><td class="num" data-col="dead">${c.dead}</td>
          <th>oldest</th><td class="num">${age(oldest)}</td></tr>
      </table>
      <table data-testid="settings">
        <tr><th>origin</th><td>${info.origin}</td><th>max deliveries</th><td>${info.max_deliveries}</td>
          <th>visibility timeout</th><td>${info.visibility_timeout} s</td><th>delivery delay</th><td>${info.delivery_delay} s</td>
          <th>dead letters go to</th><td>${info.dead_letter_policy === "queue" ? info.dead_letter_queue : info.dead_letter_policy === "delete" ? "nowhere (deleted)" : "its own set"}</td>
          <th>delivery</th><td data-col="delivery">${info.delivery_paused ? "paused" : "running"}</td></tr>
      </table>
    </section>
    ${can("events:write") && html`<section>
      <h2>Queue</h2>
      <div class="actions">
        ${info.delivery_paused
          ? html`<button type="button" data-action="resume" onClick=${() =>
              act(`Resume delivery of ${queue}?`, () => api.setPaused(name, false), () => "Delivery resumed.")}>Resume delivery</button>`
          : html`<button type="button" data-action="pause" onClick=${() =>
              act(`Pause delivery of ${queue}? Consumers and leases take nothing until it is resumed; sends still arrive.`, () => api.setPaused(name, true), () => "Delivery paused.")}>Pause delivery</button>`}
        <button type="button" class="danger" data-action="purge-queue" onClick=${() =>
          act(`Delete every message of ${queue}, leased ones and dead letters included? This cannot be undone.`, () => api.purge(name, "all"), (r) => `Purged ${r.purged} message(s).`)}>Purge queue</button>
      </div>
    </section>`}
    ${can("events:publish") && html`<${SendTest} onSend=${(data) =>
      act(`Send a test message to ${queue}?`, () => api.send(name, [testEvent(data)]), (r) => `Sent message ${r.message_ids[0]}.`)} />`}
    <section>
      <h2>Waiting messages</h2>
      ${can("events:write")
        ? html`<div class="actions"><button type="button" data-action="browse" onClick=${async () => {
            try {
              setMessages((await api.peek(name)).messages);
            } catch (e) {
              setError(e.message);
            }
          }}>Browse the first 100</button><span class="note">Not leased: nothing is delivered or counted.</span></div>
          ${messages && html`<${MessageTable} messages=${messages} testid="messages" />`}`
        : html`<p class="note">Browsing messages and changing this queue need a key with events:write.</p>`}
    </section>
    ${can("events:write") && html`<section>
      <h2>Dead letters</h2>
      <${ReplayControls} count=${c.dead} onReplay=${(range, words) =>
        act(`Replay ${words} of ${queue}? They return to ready with a fresh delivery count.`, () => api.replay(name, range), (r) => `Replayed ${r.replayed} dead letter(s).`)}
        onPurge=${() => act(`Delete every dead letter of ${queue}? This cannot be undone.`, () => api.purge(name, "dead_letters"), (r) => `Purged ${r.purged} dead letter(s).`)} />
      ${dead && html`<${MessageTable} messages=${dead} testid="dead-letters" dead=${true} />`}
    </section>`}`;
}

function testEvent(data) {
  let parsed;
  try {
    parsed = JSON.parse(data);
  } catch {
    parsed = data;
  }
  return { specversion: "1.0", id: crypto.randomUUID(), source: "/celld/dashboard", type: "celld.dashboard.test", data: parsed };
}

function SendTest({ onSend }) {
  const [data, setData] = useState('{"hello": "from the dashboard"}');
  return html`<section>
    <h2>Send a test message</h2>
    <textarea aria-label="test message data" data-testid="test-data" value=${data} onInput=${(e) => setData(e.currentTarget.value)}></textarea>
    <div class="actions"><button type="button" data-action="send" onClick=${() => onSend(data)}>Send test message</button>
      <span class="note">JSON, or else sent as a string.</span></div>
  </section>`;
}

function ReplayControls({ count, onReplay, onPurge }) {
  const [from, setFrom] = useState("");
  const [to, setTo] = useState("");
  const range = () => ({ ...(from && { from: new Date(from).toISOString() }), ...(to && { to: new Date(to).toISOString() }) });
  return html`<div class="actions">
    <button type="button" data-action="replay-all" disabled=${count === 0} onClick=${() => onReplay({}, "all dead letters")}>Replay all</button>
    <label>from <input type="datetime-local" value=${from} onInput=${(e) => setFrom(e.currentTarget.value)} /></label>
    <label>to <input type="datetime-local" value=${to} onInput=${(e) => setTo(e.currentTarget.value)} /></label>
    <button type="button" data-action="replay-range" disabled=${count === 0 || (!from && !to)} onClick=${() => onReplay(range(), "the dead letters of that time range")}>Replay range</button>
    <button type="button" class="danger" data-action="purge-dead" disabled=${count === 0} onClick=${onPurge}>Purge dead letters</button>
  </div>`;
}

function MessageTable({ messages, testid, dead }) {
  if (messages.length === 0) return html`<p class="note" data-testid=${testid}>None.</p>`;
  return html`<table data-testid=${testid}>
    <thead><tr><th>id</th><th>${dead ? "dead since" : "state"}</th><th>sent</th><th class="num">deliveries</th><th>body</th></tr></thead>
    <tbody>${messages.map((m) => html`<tr data-id=${m.id}>
      <td class="preview">${m.id}</td>
      <td>${dead ? new Date(m.dead_letter_time).toLocaleString() : m.state}</td>
      <td>${new Date(m.send_time).toLocaleString()}</td>
      <td class="num">${m.delivery_count}</td>
      <td class="preview" data-col="body">${preview(m)}</td>
    </tr>`)}</tbody>
  </table>`;
}
