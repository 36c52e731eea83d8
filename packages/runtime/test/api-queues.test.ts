import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it, onTestFinished, vi } from "vitest";
import { CellRegistry, ManualClock, UlidSource, limits, type QueueCell } from "@celld/queue-cell";
import Database from "better-sqlite3";
import { apiLimits } from "../src/api/api-limits.ts";
import { Catalog } from "../src/api/catalog.ts";
import { defaultWorkerEnv, startApiServer } from "../src/api/index.ts";
import { QueueDirectory } from "../src/api/queue-directory.ts";
import { apiHarness, event, testEnv } from "./api-harness.ts";

describe("the queues collection", () => {
  it("creates a queue with defaults, a que_ id, and zero counts", async () => {
    const h = await apiHarness();
    const res = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "jobs" } });
    expect(res.status).toBe(201);
    expect(res.json).toEqual({
      name: `${testEnv}/queues/jobs`,
      id: expect.stringMatching(/^que_[0-9a-z]{6}[0-9A-HJKMNP-TV-Z]{26}$/),
      origin: "api",
      visibility_timeout: limits.visibilityTimeoutSecondsDefault,
      max_deliveries: limits.maxDeliveriesDefault,
      delivery_delay: 0,
      dead_letter_queue: null,
      dead_letter_policy: "set",
      retention: limits.retentionSeconds,
      delivery_paused: false,
      create_time: "2026-01-01T00:00:00.000Z",
      update_time: "2026-01-01T00:00:00.000Z",
      counts: { ready: 0, delayed: 0, leased: 0, dead: 0, moving_to_dead_letter_queue: 0, backlog_bytes: 0, oldest_message_time: null },
    });
    // The cell of an API queue is named by the queue's full name.
    expect(h.registry.openNames()).toContain(`${testEnv}/queues/jobs`);
  });

  it("creates with every setting, by short or full name, and applies them to the cell", async () => {
    const h = await apiHarness();
    await h.createQueue("dlq");
    const res = await h.call("POST", `/v1/${testEnv}/queues`, {
      body: { name: `${testEnv}/queues/jobs`, visibility_timeout: 60, max_deliveries: 2, delivery_delay: 5, dead_letter_queue: "dlq" },
    });
    expect(res.status).toBe(201);
    expect(res.json).toMatchObject({ visibility_timeout: 60, max_deliveries: 2, delivery_delay: 5, dead_letter_queue: `${testEnv}/queues/dlq`, dead_letter_policy: "queue" });
    const cell = await h.registry.open(`${testEnv}/queues/jobs`);
    expect(cell.queueConfig).toEqual({
      visibilityTimeoutSeconds: 60,
      maxDeliveries: 2,
      deliveryDelaySeconds: 5,
      deadLetter: { kind: "queue", queue: `${testEnv}/queues/dlq` },
      retentionSeconds: limits.retentionSeconds,
      deliveryPaused: false,
    });
  });

  it("refuses a duplicate, a missing or foreign dead-letter queue, and the queue as its own", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const dup = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "jobs" } });
    expect(dup.status).toBe(409);
    expect(dup.json.error).toMatchObject({ code: "already_exists", field: "name" });
    const missing = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "a", dead_letter_queue: "nope" } });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ code: "invalid_argument", field: "dead_letter_queue" });
    const foreign = await h.call("POST", `/v1/${testEnv}/queues`, {
      body: { name: "b", dead_letter_queue: "orgs/other/projects/shop/envs/prod/queues/jobs" },
    });
    expect(foreign.status).toBe(400);
    expect(foreign.json.error.field).toBe("dead_letter_queue");
    const self = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "c", dead_letter_queue: "c" } });
    expect(self.status).toBe(400);
    const foreignName = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "orgs/x/projects/y/envs/z/queues/d" } });
    expect(foreignName.status).toBe(400);
    expect(foreignName.json.error.field).toBe("name");
    // None of the refused creates left a queue behind.
    const list = await h.call("GET", `/v1/${testEnv}/queues`);
    expect(list.json.queues.map((q: { name: string }) => q.name)).toEqual([`${testEnv}/queues/jobs`]);
  });

  it("gets a queue with its counts: ready, delayed, leased, dead, backlog bytes, oldest message", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs", { max_deliveries: 1 });
    const path = h.queuePath("jobs");
    await h.call("POST", `${path}:send`, { body: { events: [event("a"), event("b"), event("c")] } });
    h.clock.advance(1000);
    await h.call("POST", `${path}:send`, { body: { events: [event("d")], delay: 60 } });
    const leased = await h.call("POST", `${path}:lease`, { body: { max_messages: 2 } });
    const [first] = leased.json.messages;
    await h.call("POST", `${path}:nack`, { body: { messages: [{ id: first.id, lease_generation: first.lease_generation }] } });
    const res = await h.call("GET", path);
    expect(res.status).toBe(200);
    const cell = await h.registry.open(`${testEnv}/queues/jobs`);
    const counts = await cell.counts();
    expect(res.json.counts).toEqual({
      ready: 1,
      delayed: 1,
      leased: 1,
      dead: 1,
      moving_to_dead_letter_queue: 0,
      backlog_bytes: counts.backlogBytes,
      oldest_message_time: "2026-01-01T00:00:00.000Z",
    });
    expect(counts.backlogBytes).toBeGreaterThan(0);
  });

  it("lists queues in pages, and refuses a token it did not issue", async () => {
    const h = await apiHarness();
    for (const name of ["e", "a", "d", "b", "c"]) await h.createQueue(name);
    const names: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const res = await h.call("GET", `/v1/${testEnv}/queues?page_size=2${token === undefined ? "" : `&page_token=${token}`}`);
      expect(res.status).toBe(200);
      for (const q of res.json.queues) {
        expect(q.counts).toBeUndefined();
        names.push(q.name.split("/").pop());
      }
      token = res.json.next_page_token;
      pages += 1;
    } while (token !== undefined);
    expect(names).toEqual(["a", "b", "c", "d", "e"]);
    expect(pages).toBe(3);
    const bad = await h.call("GET", `/v1/${testEnv}/queues?page_token=zzz`);
    expect(bad.status).toBe(400);
    expect(bad.json.error.field).toBe("page_token");
    const size = await h.call("GET", `/v1/${testEnv}/queues?page_size=0`);
    expect(size.json.error).toMatchObject({ code: "out_of_range", field: "page_size" });
    const unknown = await h.call("GET", `/v1/${testEnv}/queues?pagesize=2`);
    expect(unknown.json.error).toMatchObject({ code: "unknown_field", field: "pagesize" });
  });

  it("lists queues by short id compared byte by byte: -, digits, capitals, _, small letters", async () => {
    const h = await apiHarness();
    for (const name of ["b", "B", "a_b", "a-b", "9", "aB"]) await h.createQueue(name);
    const res = await h.call("GET", `/v1/${testEnv}/queues`);
    expect(res.json.queues.map((q: { name: string }) => q.name.split("/").pop())).toEqual(["9", "B", "a-b", "aB", "a_b", "b"]);
  });

  it("updates settings, and the cell applies them to later leases", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    await h.createQueue("dlq");
    h.clock.advance(5000);
    const res = await h.call("PATCH", h.queuePath("jobs"), { body: { visibility_timeout: 120, dead_letter_queue: "dlq" } });
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      visibility_timeout: 120,
      max_deliveries: limits.maxDeliveriesDefault,
      dead_letter_queue: `${testEnv}/queues/dlq`,
      update_time: "2026-01-01T00:00:05.000Z",
      create_time: "2026-01-01T00:00:00.000Z",
    });
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [event("a")] } });
    const leased = await h.call("POST", `${h.queuePath("jobs")}:lease`, { body: {} });
    expect(leased.json.messages[0].lease_expire_time).toBe("2026-01-01T00:02:05.000Z");
    const cleared = await h.call("PATCH", h.queuePath("jobs"), { body: { dead_letter_queue: null } });
    expect(cleared.json).toMatchObject({ dead_letter_queue: null, dead_letter_policy: "set" });
    const bad = await h.call("PATCH", h.queuePath("jobs"), { body: { max_deliveries: 0 } });
    expect(bad.status).toBe(400);
    const name = await h.call("PATCH", h.queuePath("jobs"), { body: { name: "x" } });
    expect(name.json.error).toMatchObject({ code: "unknown_field", field: "name" });
    expect((await h.call("GET", h.queuePath("jobs"))).json.visibility_timeout).toBe(120);
  });

  it("refuses a dead_letter_queue that would close a loop, and changes nothing", async () => {
    const h = await apiHarness();
    await h.createQueue("a");
    await h.createQueue("b");
    await h.createQueue("c");
    expect((await h.call("PATCH", h.queuePath("b"), { body: { dead_letter_queue: "a" } })).status).toBe(200);
    expect((await h.call("PATCH", h.queuePath("c"), { body: { dead_letter_queue: "b" } })).status).toBe(200);
    const loop = await h.call("PATCH", h.queuePath("a"), { body: { dead_letter_queue: "c" } });
    expect(loop.status).toBe(400);
    expect(loop.json.error).toMatchObject({
      code: "invalid_argument",
      field: "dead_letter_queue",
      bound: "a chain of dead-letter queues without loops",
    });
    expect(loop.json.error.message).toContain(
      `(${testEnv}/queues/a -> ${testEnv}/queues/c -> ${testEnv}/queues/b -> ${testEnv}/queues/a)`,
    );
    expect((await h.call("GET", h.queuePath("a"))).json.dead_letter_queue).toBeNull();
    // A chain that does not come back is fine.
    expect((await h.call("PATCH", h.queuePath("a"), { body: { dead_letter_queue: null } })).status).toBe(200);
  });

  it("deletes a queue with its messages and subscriptions; a new queue of that name starts empty", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [event("a")] } });
    await h.call("POST", `/v1/${testEnv}/subscriptions`, { body: { name: "all", queue: "jobs" } });
    const res = await h.call("DELETE", h.queuePath("jobs"));
    expect(res.status).toBe(200);
    expect((await h.call("GET", h.queuePath("jobs"))).status).toBe(404);
    expect((await h.call("GET", `/v1/${testEnv}/subscriptions/all`)).status).toBe(404);
    await h.createQueue("jobs");
    const again = await h.call("GET", h.queuePath("jobs"));
    expect(again.json.counts.ready).toBe(0);
    expect((await h.call("DELETE", `${h.queuePath("nope")}`)).status).toBe(404);
  });

  it("refuses to delete a queue that another queue dead-letters into", async () => {
    const h = await apiHarness();
    await h.createQueue("dlq");
    await h.createQueue("jobs", { dead_letter_queue: "dlq" });
    const res = await h.call("DELETE", h.queuePath("dlq"));
    expect(res.status).toBe(409);
    expect(res.json.error.code).toBe("failed_precondition");
    expect(res.json.error.message).toContain(`${testEnv}/queues/jobs`);
    expect((await h.call("GET", h.queuePath("dlq"))).status).toBe(200);
  });

  it("a delete ends a long poll waiting on the queue, and answers it empty", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    const polling = await h.whenWaiting(() => h.call("POST", `${h.queuePath("jobs")}:lease`, { body: { wait: 20 } }));
    expect((await h.call("DELETE", h.queuePath("jobs"))).status).toBe(200);
    const answered = await polling.result;
    expect(answered.status).toBe(200);
    expect(answered.json.messages).toEqual([]);
  });

  it("names: a bad queue id is a 400 naming the field", async () => {
    const h = await apiHarness();
    const res = await h.call("GET", h.queuePath("bad*name"));
    expect(res.status).toBe(400);
    expect(res.json.error).toMatchObject({ code: "invalid_argument", field: "queue" });
    const long = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "q".repeat(64) } });
    expect(long.json.error).toMatchObject({ code: "invalid_argument", field: "name" });
    expect((await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "q".repeat(63) } })).status).toBe(201);
  });

  it("a restarted server finds its queues, ids, settings and messages again", async () => {
    const h = await apiHarness();
    const created = await h.createQueue("jobs", { max_deliveries: 7 });
    await h.call("POST", `${h.queuePath("jobs")}:send`, { body: { events: [event("kept")] } });
    await h.server.close();
    await h.registry.closeAll();
    const again = await startApiServer({ registry: h.registry, keys: h.keys, dataDir: h.dataDir, clock: h.clock, port: 0 });
    try {
      const url = `${again.url}${h.queuePath("jobs")}`;
      const headers = { authorization: `Bearer ${h.defaultKey}`, "content-type": "application/json" };
      const got = (await (await fetch(url, { headers })).json()) as Record<string, unknown>;
      expect(got).toMatchObject({ id: created.json.id, max_deliveries: 7, counts: { ready: 1 } });
      const leased = (await (await fetch(`${url}:lease`, { method: "POST", headers, body: "{}" })).json()) as {
        messages: Array<{ event: unknown }>;
      };
      expect(leased.messages.map((m) => m.event)).toEqual([event("kept")]);
    } finally {
      await again.close();
    }
  });

  it("Workers queues: any plain-named cell when the host declares none, adopted with an id on first sight", async () => {
    const h = await apiHarness();
    const key = h.key(undefined, defaultWorkerEnv);
    const cell = await h.registry.open("mail");
    await cell.send([{ body: new TextEncoder().encode('{"to":"a"}'), contentType: "json" }]);
    const list = await h.call("GET", `/v1/${defaultWorkerEnv}/queues`, { key });
    expect(list.json.queues).toEqual([expect.objectContaining({ name: `${defaultWorkerEnv}/queues/mail`, origin: "workers", max_deliveries: limits.maxDeliveriesDefault })]);
    const got = await h.call("GET", `/v1/${defaultWorkerEnv}/queues/mail`, { key });
    expect(got.json.id).toBe(list.json.queues[0].id);
    expect(got.json.counts.ready).toBe(1);
    // Without the host's list, a Workers queue cannot be told from a stale one: it is kept.
    expect((await h.call("DELETE", `/v1/${defaultWorkerEnv}/queues/mail`, { key })).status).toBe(409);
  });

  it("a Workers queue the config no longer declares can be deleted over the API", async () => {
    const declared = ["legacy"];
    const h = await apiHarness({ workerQueues: { declared: () => declared } });
    const key = h.key(undefined, defaultWorkerEnv);
    await (await h.registry.open("legacy")).send([{ body: new Uint8Array([1]), contentType: "bytes" }]);
    const path = `/v1/${defaultWorkerEnv}/queues/legacy`;
    expect((await h.call("GET", path, { key })).json.origin).toBe("workers");
    expect((await h.call("DELETE", path, { key })).status).toBe(409);
    declared.length = 0;
    expect((await h.call("DELETE", path, { key })).status).toBe(200);
    expect(existsSync(h.registry.pathOf("legacy"))).toBe(false);
    expect((await h.call("GET", path, { key })).status).toBe(404);
  });

  it("an API queue in the Workers environment is the plain-named cell a Worker would use", async () => {
    const h = await apiHarness({ workerQueues: { declared: () => [] } });
    const key = h.key(undefined, defaultWorkerEnv);
    const res = await h.call("POST", `/v1/${defaultWorkerEnv}/queues`, { key, body: { name: "fresh", max_deliveries: 3 } });
    expect(res.json).toMatchObject({ origin: "api", max_deliveries: 3 });
    expect((await h.registry.open("fresh")).queueConfig.maxDeliveries).toBe(3);
  });

  it(`an environment holds at most ${apiLimits.queuesPerEnvMax} queues; the one past it is refused naming the bound`, async () => {
    const h = await apiHarness();
    // All but one place taken by rows written straight into the catalog: creating thousands of
    // cells through the API would only make the test slow.
    const db = new Database(join(h.dataDir, "api", "catalog.sqlite"));
    const insert = db.prepare(
      `INSERT INTO queues (name, env, queue, queue_id, origin, cell_name, settings, dead_letter_queue, create_ms, update_ms)
       VALUES (?, ?, ?, ?, 'api', ?, NULL, NULL, 0, 0)`,
    );
    db.transaction(() => {
      for (let i = 0; i < apiLimits.queuesPerEnvMax - 1; i++) {
        const name = `${testEnv}/queues/filler-${i}`;
        insert.run(name, testEnv, `filler-${i}`, `que_filler${i}`, name);
      }
    })();
    db.close();
    expect((await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "last" } })).status).toBe(201);
    const over = await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "over" } });
    expect(over.status).toBe(400);
    expect(over.json.error).toMatchObject({
      code: "out_of_range",
      message: `${testEnv} already has ${apiLimits.queuesPerEnvMax} queues`,
      field: "name",
      bound: `at most ${apiLimits.queuesPerEnvMax} queues per environment`,
    });
    expect(existsSync(h.registry.pathOf(`${testEnv}/queues/over`))).toBe(false);
    // The bound is per environment: another one still has room.
    const other = "orgs/acme/projects/shop/envs/dev";
    expect((await h.call("POST", `/v1/${other}/queues`, { key: h.key(undefined, other), body: { name: "over" } })).status).toBe(201);
    // A place freed is a place to create in again.
    expect((await h.call("DELETE", `/v1/${testEnv}/queues/last`)).status).toBe(200);
    expect((await h.call("POST", `/v1/${testEnv}/queues`, { body: { name: "over" } })).status).toBe(201);
  });
});

describe("admin calls that meet", () => {
  /** A directory over a fresh data dir, driven directly so a test can hold one call at an await. */
  function directoryHarness() {
    const dir = mkdtempSync(join(tmpdir(), "celld-directory-"));
    const clock = new ManualClock();
    const registry = new CellRegistry({ dataDir: dir, clock, durability: "off" });
    const catalog = Catalog.open(dir);
    const directory = new QueueDirectory(catalog, registry, clock, new UlidSource());
    onTestFinished(async () => {
      await registry.closeAll();
      catalog.close();
      rmSync(dir, { recursive: true, force: true });
    });
    return { registry, catalog, directory };
  }

  const settings = { visibilityTimeout: 30, maxDeliveries: 1, deliveryDelay: 0, deadLetterQueue: null };
  const source = `${testEnv}/queues/rsrc0`;
  const target = `${testEnv}/queues/rtgt0`;

  /** Holds the next call of `method` on `cell` until release(); `reached` resolves once it is made. */
  function holdNext(cell: QueueCell, method: "configure" | "close") {
    const original = cell[method].bind(cell) as (...args: unknown[]) => Promise<unknown>;
    let entered!: () => void;
    let release!: () => void;
    const reached = new Promise<void>((resolve) => (entered = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    vi.spyOn(cell, method).mockImplementationOnce((async (...args: unknown[]) => {
      entered();
      await gate;
      return original(...args);
    }) as never);
    return { reached, release };
  }

  /** Lets the other call go as far as it can while one is held: its checks come before any I/O. */
  const stepsRun = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  it("a delete of a queue waits for an update pointing dead letters at it, then is refused", async () => {
    const { registry, catalog, directory } = directoryHarness();
    await directory.create(testEnv, "rsrc0", settings);
    await directory.create(testEnv, "rtgt0", settings);
    const held = holdNext(await registry.open(source), "configure");
    const updating = directory.update(source, { deadLetterQueue: target });
    await held.reached;
    const removing = directory.remove(target);
    removing.catch(() => undefined);
    await stepsRun();
    held.release();
    expect((await updating).settings?.deadLetterQueue).toBe(target);
    await expect(removing).rejects.toMatchObject({ code: "failed_precondition", field: "name" });
    expect(catalog.getQueue(target)).toBeDefined();
    expect(existsSync(registry.pathOf(target))).toBe(true);
  });

  it("two updates that would close a loop between them do not both pass the loop check", async () => {
    const { registry, catalog, directory } = directoryHarness();
    await directory.create(testEnv, "rsrc0", settings);
    await directory.create(testEnv, "rtgt0", settings);
    const held = holdNext(await registry.open(source), "configure");
    const first = directory.update(source, { deadLetterQueue: target });
    await held.reached;
    const second = directory.update(target, { deadLetterQueue: source });
    second.catch(() => undefined);
    await stepsRun();
    held.release();
    await first;
    await expect(second).rejects.toMatchObject({ code: "invalid_argument", bound: "a chain of dead-letter queues without loops" });
    expect(catalog.getQueue(target)?.settings?.deadLetterQueue).toBeNull();
  });

  it("an update naming a queue whose delete is under way waits for it, then is refused", async () => {
    const { registry, catalog, directory } = directoryHarness();
    await directory.create(testEnv, "rsrc0", settings);
    await directory.create(testEnv, "rtgt0", settings);
    // The delete waits at its cell's close; the update arrives meanwhile.
    const held = holdNext(await registry.open(target), "close");
    const removing = directory.remove(target);
    await held.reached;
    const updating = directory.update(source, { deadLetterQueue: target });
    updating.catch(() => undefined);
    await stepsRun();
    held.release();
    await removing;
    await expect(updating).rejects.toMatchObject({ code: "invalid_argument", field: "dead_letter_queue" });
    expect(catalog.getQueue(source)?.settings?.deadLetterQueue).toBeNull();
    expect((await registry.open(source)).queueConfig.deadLetter).toEqual({ kind: "set" });
  });
});
