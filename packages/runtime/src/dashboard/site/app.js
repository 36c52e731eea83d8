import { h, render } from "preact";
import { useEffect, useState } from "preact/hooks";
import htm from "htm";
import { Api } from "./api.js";
import { QueuesPage } from "./queues.js";
import { QueuePage } from "./queue.js";

const html = htm.bind(h);
// The key lives in this tab's session only: gone when the tab closes, never in a cookie.
const keyItem = "celld.key";

function SignIn({ onSignIn, error }) {
  const [key, setKey] = useState("");
  const submit = (e) => {
    e.preventDefault();
    onSignIn(key.trim());
  };
  return html`<form class="signin card" onSubmit=${submit}>
    <h2>Sign in to celld</h2>
    <label for="key">API key</label>
    <input id="key" name="key" type="password" autocomplete="off" value=${key} onInput=${(e) => setKey(e.currentTarget.value)} />
    <button type="submit">Sign in</button>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    <p class="note">Create a key with <code>celld keys create</code>. It is kept in this tab's session only.</p>
  </form>`;
}

function useHashRoute() {
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const changed = () => setHash(location.hash);
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  const m = /^#\/queues\/([^/]+)$/.exec(hash);
  return m === null ? { page: "queues" } : { page: "queue", queue: decodeURIComponent(m[1]) };
}

function App() {
  const [session, setSession] = useState(undefined);
  const [error, setError] = useState(undefined);
  const route = useHashRoute();

  const signIn = async (key) => {
    try {
      const api = new Api(key);
      const me = await api.whoami();
      sessionStorage.setItem(keyItem, key);
      setError(undefined);
      setSession({ api, me });
    } catch (e) {
      sessionStorage.removeItem(keyItem);
      setError(e.status === 401 ? "That key is not valid: it is unknown, revoked or mistyped." : e.message);
      setSession(null);
    }
  };
  useEffect(() => {
    const saved = sessionStorage.getItem(keyItem);
    if (saved === null) setSession(null);
    else void signIn(saved);
  }, []);
  const signOut = () => {
    sessionStorage.removeItem(keyItem);
    setSession(null);
  };

  if (session === undefined) return html`<p class="note">Loading…</p>`;
  if (session === null) return html`<${SignIn} onSignIn=${signIn} error=${error} />`;
  const { me } = session;
  return html`
    <header>
      <h1><a href="#/">celld</a></h1>
      <span class="who" data-testid="who">${me.env} · ${me.name || me.id} · ${me.scopes.join(", ")}</span>
      <button type="button" onClick=${signOut}>Sign out</button>
    </header>
    <main>
      ${route.page === "queue"
        ? html`<${QueuePage} session=${session} queue=${route.queue} />`
        : html`<${QueuesPage} session=${session} />`}
    </main>`;
}

render(html`<${App} />`, document.getElementById("app"));
