/**
 * Golden test: every user-visible error string and the code → status table, pinned. A change here
 * is a change clients see; make it on purpose.
 */
import { describe, expect, it } from "vitest";
import { CellError, limits } from "@celld/queue-cell";
import { apiErrorStatus } from "../src/api/index.ts";
import { toApiError } from "../src/api/errors.ts";
import { apiHarness, event, testEnv } from "./api-harness.ts";

describe("error codes", () => {
  it("map to these HTTP statuses", () => {
    expect(apiErrorStatus).toEqual({
      invalid_argument: 400,
      unknown_field: 400,
      out_of_range: 400,
      message_too_large: 400,
      batch_too_large: 400,
      malformed_body: 400,
      unauthenticated: 401,
      permission_denied: 403,
      not_found: 404,
      method_not_allowed: 405,
      not_acceptable: 406,
      already_exists: 409,
      failed_precondition: 409,
      body_too_large: 413,
      unsupported_media_type: 415,
      headers_too_large: 431,
      overloaded: 429,
      internal: 500,
      unavailable: 503,
    });
  });

  it("cell refusals keep their meaning, say what the call left behind, and when to retry", () => {
    const answer = (error: unknown) => {
      const api = toApiError(error);
      return [api.status, api.retryAfterSeconds, api.toJSON()];
    };
    const overloaded = new CellError("ERR_CELL_OVERLOADED", `queue "q" is busy: ${limits.producerCallsInFlightMax} producer calls are in flight; retry shortly`, {
      field: "queue",
      bound: `at most ${limits.producerCallsInFlightMax} calls in flight`,
    });
    expect(answer(overloaded)).toEqual([
      429,
      1,
      {
        error: {
          code: "overloaded",
          message: 'queue "q" is busy: 256 producer calls are in flight; retry shortly; nothing of this call was written',
          field: "queue",
          bound: "at most 256 calls in flight",
        },
      },
    ]);
    expect(answer(new CellError("ERR_CELL_CLOSED", 'queue "q" is closed: every queue is closing'))).toEqual([
      503,
      1,
      { error: { code: "unavailable", message: 'queue "q" is closed: every queue is closing; nothing of this call was written' } },
    ]);

    // The cell's words go out as they are; its facts decide the Retry-After (words as in
    // packages/queue-cell/test/storage-failure.test.ts).
    const facts = { queue: "q", cause: "disk-full", detail: "SQLITE_FULL: database or disk is full" } as const;
    const diskFull =
      "the queue's storage failed: database or disk is full (SQLITE_FULL); nothing of this call was written, " +
      "and writes resume by themselves once the disk has free space";
    expect(answer(new CellError("ERR_STORAGE", diskFull, { storage: { ...facts, mayHaveTakenEffect: false, writesStopped: false } }))).toEqual([
      503,
      10,
      { error: { code: "unavailable", message: diskFull } },
    ]);
    const mayHaveTakenEffect =
      "the queue's storage failed: flushing its log to disk failed (ENOSPC: no space left on device, fdatasync); " +
      "this call may or may not have taken effect, and the queue takes no more writes until celld is restarted";
    expect(
      answer(new CellError("ERR_STORAGE", mayHaveTakenEffect, { storage: { ...facts, mayHaveTakenEffect: true, writesStopped: true } })),
    ).toEqual([503, undefined, { error: { code: "unavailable", message: mayHaveTakenEffect } }]);
    const stopped =
      "the queue's storage failed: flushing its log to disk failed earlier (EIO: i/o error, fdatasync), so it takes no more " +
      "writes until celld is restarted; what was answered before that failure is on disk; nothing of this call was written";
    expect(
      answer(new CellError("ERR_STORAGE", stopped, { storage: { ...facts, cause: "io-error", mayHaveTakenEffect: false, writesStopped: true } })),
    ).toEqual([503, undefined, { error: { code: "unavailable", message: stopped } }]);

    const bug = toApiError(new TypeError("x is undefined"));
    expect([bug.status, bug.toJSON()]).toEqual([500, { error: { code: "internal", message: "internal error" } }]);
  });
});

describe("error bodies, word for word", () => {
  it("as the API answers them", async () => {
    const h = await apiHarness();
    await h.createQueue("jobs");
    await h.createQueue("dlq");
    await h.createQueue("uses-dlq", { dead_letter_queue: "dlq" });
    const q = h.queuePath("jobs");
    const readOnly = h.key(["events:read"]);
    const foreign = h.key(undefined, "orgs/acme/projects/shop/envs/staging");
    const big = "x".repeat(limits.messageBytesMax);
    const half = "x".repeat(limits.messageBytesMax - 200);

    const answers: Record<string, [number, unknown]> = {};
    const record = async (name: string, method: string, path: string, opts: Parameters<typeof h.call>[2] = {}) => {
      const res = await h.call(method, path, opts);
      answers[name] = [res.status, res.json];
    };
    await record("no key", "GET", q, { key: null });
    await record("bad key", "GET", q, { key: "ck_nope" });
    await record("other env", "GET", q, { key: foreign });
    await record("missing scope", "POST", `${q}:lease`, { key: readOnly, body: {} });
    await record("no route", "GET", "/v2/queues");
    await record("wrong method", "PUT", q, { body: {} });
    await record("unknown queue", "GET", h.queuePath("nope"));
    await record("unknown subscription", "GET", `/v1/${testEnv}/subscriptions/nope`);
    await record("bad queue id", "GET", h.queuePath("no!"));
    await record("queue exists", "POST", `/v1/${testEnv}/queues`, { body: { name: "jobs" } });
    await record("dead-letter queue in use", "DELETE", h.queuePath("dlq"));
    await record("unknown field", "POST", `${q}:lease`, { body: { maxMessages: 5 } });
    await record("out of range", "POST", `${q}:lease`, { body: { max_messages: 500 } });
    await record("not a whole number", "POST", `${q}:lease`, { body: { wait: 2.5 } });
    await record("no events", "POST", `${q}:send`, { body: { events: [] } });
    await record("bad specversion", "POST", `${q}:send`, { body: { events: [event("a", 1, { specversion: "2.0" })] } });
    await record("bad extension name", "POST", `${q}:send`, { body: { events: [event("a", 1, { Ext: 1 })] } });
    await record("bad time", "POST", `${q}:send`, { body: { events: [event("a", 1, { time: "now" })] } });
    await record("non-JSON data", "POST", `${q}:send`, { body: { events: [event("a", [1], { datacontenttype: "text/csv" })] } });
    await record("message too large", "POST", `${q}:send`, { body: { events: [event("a", big, { datacontenttype: "text/plain" })] } });
    await record("batch too large", "POST", `${q}:send`, {
      body: { events: [0, 1, 2].map((i) => event(`e${i}`, half, { datacontenttype: "text/plain" })) },
    });
    await record("bad message id", "POST", `${q}:ack`, { body: { messages: [{ id: "abc", lease_generation: 1 }] } });
    await record("required null", "POST", `${q}:ack`, { body: { messages: [{ id: "01KDVDNA000000000000000000", lease_generation: null }] } });
    await record("bad JSON", "POST", `${q}:lease`, { raw: "{", headers: { "content-type": "application/json" } });
    await record("too deep", "POST", `${q}:send`, { raw: "[".repeat(40), headers: { "content-type": "application/json" } });
    await record("wrong media type", "POST", `${q}:lease`, { raw: "x", headers: { "content-type": "text/plain" } });
    await record("not acceptable", "POST", `${q}:lease`, { body: {}, headers: { accept: "text/html" } });
    await record("purge scope", "POST", `${q}:purge`, { body: { scope: "dead" } });
    await record("replay range", "POST", `${q}:replay`, { body: { from: "2026-01-02T00:00:00Z", to: "2026-01-01T00:00:00Z" } });
    await record("replay not a time", "POST", `${q}:replay`, { body: { from: "yesterday" } });
    await record("replay before 1970", "POST", `${q}:replay`, { body: { to: "1969-07-20T20:17:40Z" } });

    expect(answers).toEqual({
      "no key": [401, { error: { code: "unauthenticated", message: "no API key: send the header Authorization: Bearer <key>" } }],
      "bad key": [401, { error: { code: "unauthenticated", message: "the API key is not valid: it is malformed, unknown or revoked" } }],
      "other env": [
        403,
        {
          error: {
            code: "permission_denied",
            message: "this API key is bound to orgs/acme/projects/shop/envs/staging and cannot act in orgs/acme/projects/shop/envs/prod",
            key_env: "orgs/acme/projects/shop/envs/staging",
          },
        },
      ],
      "missing scope": [
        403,
        { error: { code: "permission_denied", message: "this API key lacks the scope events:write, which this call needs", required_scope: "events:write" } },
      ],
      "no route": [404, { error: { code: "not_found", message: "no route for GET /v2/queues" } }],
      "wrong method": [
        405,
        {
          error: {
            code: "method_not_allowed",
            message: "/v1/orgs/acme/projects/shop/envs/prod/queues/jobs takes GET, PATCH, DELETE, not PUT",
            allowed_methods: ["GET", "PATCH", "DELETE"],
          },
        },
      ],
      "unknown queue": [404, { error: { code: "not_found", message: "queue orgs/acme/projects/shop/envs/prod/queues/nope does not exist" } }],
      "unknown subscription": [
        404,
        { error: { code: "not_found", message: "subscription orgs/acme/projects/shop/envs/prod/subscriptions/nope does not exist" } },
      ],
      "bad queue id": [
        400,
        {
          error: {
            code: "invalid_argument",
            message: 'queue must be 1 to 63 characters: letters, digits, "-" and "_", starting with a letter or digit, got "no!"',
            field: "queue",
            bound: '1 to 63 characters: letters, digits, "-" and "_", starting with a letter or digit',
          },
        },
      ],
      "queue exists": [
        409,
        { error: { code: "already_exists", message: "queue orgs/acme/projects/shop/envs/prod/queues/jobs already exists", field: "name" } },
      ],
      "dead-letter queue in use": [
        409,
        {
          error: {
            code: "failed_precondition",
            message:
              "queue orgs/acme/projects/shop/envs/prod/queues/dlq is the dead_letter_queue of orgs/acme/projects/shop/envs/prod/queues/uses-dlq; point those elsewhere first",
            field: "name",
          },
        },
      ],
      "unknown field": [
        400,
        {
          error: {
            code: "unknown_field",
            message: "unknown field maxMessages; known fields here: max_messages, visibility_timeout, wait",
            field: "maxMessages",
            bound: "one of: max_messages, visibility_timeout, wait",
          },
        },
      ],
      "out of range": [400, { error: { code: "out_of_range", message: "max_messages must be from 1 to 100, got 500", field: "max_messages", bound: "1 to 100" } }],
      "not a whole number": [
        400,
        { error: { code: "invalid_argument", message: "wait must be a whole number from 0 to 20 seconds, got 2.5", field: "wait", bound: "0 to 20 seconds" } },
      ],
      "no events": [400, { error: { code: "out_of_range", message: "events must hold 1 to 100 events, got 0", field: "events", bound: "1 to 100 events" } }],
      "bad specversion": [
        400,
        { error: { code: "invalid_argument", message: 'events[0].specversion must be "1.0", got "2.0"', field: "events[0].specversion", bound: '"1.0"' } },
      ],
      "bad extension name": [
        400,
        {
          error: {
            code: "unknown_field",
            message: "unknown field events[0].Ext; a CloudEvent extension attribute is named with 1 to 128 lowercase letters or digits",
            field: "events[0].Ext",
            bound: "1 to 128 lowercase letters or digits",
          },
        },
      ],
      "bad time": [
        400,
        {
          error: {
            code: "invalid_argument",
            message: 'events[0].time must be an RFC 3339 timestamp such as 2026-01-01T00:00:00Z, got "now"',
            field: "events[0].time",
            bound: "an RFC 3339 timestamp",
          },
        },
      ],
      "non-JSON data": [
        400,
        {
          error: {
            code: "invalid_argument",
            message: 'events[0].data must be a string when datacontenttype is "text/csv" (not JSON); send binary data as data_base64',
            field: "events[0].data",
            bound: "a string",
          },
        },
      ],
      "message too large": [
        400,
        {
          error: {
            code: "message_too_large",
            message: "events[0] is 128099 bytes (data plus attributes); a message may be at most 128000 bytes",
            field: "events[0]",
            bound: "at most 128000 bytes",
          },
        },
      ],
      "batch too large": [
        400,
        {
          error: {
            code: "batch_too_large",
            message: "the events of one call are 383700 bytes together (data plus attributes); the bound is 256000 bytes",
            field: "events",
            bound: "at most 256000 bytes",
          },
        },
      ],
      "bad message id": [
        400,
        {
          error: {
            code: "invalid_argument",
            message: 'messages[0].id must be a message id (26 characters, as returned by send), got "abc"',
            field: "messages[0].id",
            bound: "a 26-character message id",
          },
        },
      ],
      "required null": [
        400,
        {
          error: {
            code: "invalid_argument",
            message: "messages[0].lease_generation is required",
            field: "messages[0].lease_generation",
            bound: "1 to 9007199254740991",
          },
        },
      ],
      "bad JSON": [400, { error: { code: "malformed_body", message: "the request body is not valid JSON" } }],
      "too deep": [
        400,
        {
          error: {
            code: "out_of_range",
            message: `the JSON at ${"[0]".repeat(32)} is nested more than 32 levels deep`,
            field: "[0]".repeat(32),
            bound: "at most 32 levels of nesting",
          },
        },
      ],
      "wrong media type": [
        415,
        {
          error: {
            code: "unsupported_media_type",
            message: "this route takes application/json or application/x-protobuf, not text/plain",
            field: "Content-Type",
            bound: "application/json or application/x-protobuf",
          },
        },
      ],
      "not acceptable": [
        406,
        {
          error: {
            code: "not_acceptable",
            message: "this route answers with application/json or application/x-protobuf; Accept allows neither",
            field: "Accept",
            bound: "application/json or application/x-protobuf",
          },
        },
      ],
      "purge scope": [
        400,
        { error: { code: "invalid_argument", message: 'scope must be "dead_letters" or "all", got "dead"', field: "scope", bound: '"dead_letters" or "all"' } },
      ],
      "replay range": [
        400,
        {
          error: {
            code: "out_of_range",
            message: "to (2026-01-01T00:00:00Z) is before from (2026-01-02T00:00:00Z)",
            field: "to",
            bound: "at or after from",
          },
        },
      ],
      "replay not a time": [
        400,
        {
          error: {
            code: "invalid_argument",
            message: 'from must be an RFC 3339 timestamp such as 2026-01-01T00:00:00Z, got "yesterday"',
            field: "from",
            bound: "an RFC 3339 timestamp at or after 1970-01-01T00:00:00Z",
          },
        },
      ],
      "replay before 1970": [
        400,
        {
          error: {
            code: "out_of_range",
            message: "to must be at or after 1970-01-01T00:00:00Z, got 1969-07-20T20:17:40Z",
            field: "to",
            bound: "at or after 1970-01-01T00:00:00Z",
          },
        },
      ],
    });
  });
});
