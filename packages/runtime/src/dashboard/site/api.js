// The dashboard's only way to the data: the API's own routes, with the key the operator gave,
// so every call meets the same scope checks as any other client's.

export class ApiCallError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export class Api {
  constructor(key) {
    this.key = key;
  }

  async call(method, path, body) {
    const headers = { authorization: `Bearer ${this.key}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    const isJson = (res.headers.get("content-type") ?? "").startsWith("application/json");
    const json = isJson && text !== "" ? JSON.parse(text) : undefined;
    if (!res.ok) throw new ApiCallError(res.status, json?.error?.code, json?.error?.message ?? `${res.status} ${res.statusText}`);
    return json ?? text;
  }

  whoami() {
    return this.call("GET", "/v1/key");
  }

  listQueues(env) {
    return this.call("GET", `/v1/${env}/queues?page_size=50`);
  }

  /** `name`: the queue's full name, orgs/.../queues/{queue}. */
  getQueue(name) {
    return this.call("GET", `/v1/${name}`);
  }

  peek(name) {
    return this.call("GET", `/v1/${name}/messages?page_size=100`);
  }

  deadLetters(name) {
    return this.call("GET", `/v1/${name}/dead-letters?page_size=100`);
  }

  send(name, events) {
    return this.call("POST", `/v1/${name}:send`, { events });
  }

  replay(name, range) {
    return this.call("POST", `/v1/${name}:replay`, range);
  }

  purge(name, scope) {
    return this.call("POST", `/v1/${name}:purge`, { scope });
  }

  /** Pauses (true) or resumes (false) delivery: consumers and leases take nothing while paused. */
  setPaused(name, paused) {
    return this.call("PATCH", `/v1/${name}`, { delivery_paused: paused });
  }

  metrics() {
    return this.call("GET", "/metrics");
  }
}

/** `{queue: value}` of one per-queue series of a Prometheus text answer, for `environment`. */
export function seriesByQueue(text, name, environment) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const close = line.lastIndexOf("}");
    const labels = {};
    for (const m of line.slice(name.length + 1, close).matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    if (labels.environment === environment) out[labels.queue] = Number(line.slice(close + 1).trim());
  }
  return out;
}
