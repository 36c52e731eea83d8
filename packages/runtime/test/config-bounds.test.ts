import { limits } from "@celld/queue-cell";
import { describe, expect, test } from "vitest";
import {
  isConfigError,
  parseDeployment,
  type ConfigIssue,
  type Deployment,
  type WorkerConfig,
} from "../src/config/index.ts";

const file = "bounds/wrangler.json";
const base = { name: "w", main: "index.js", compatibility_date: "2024-03-18" };

function load(config: object): Deployment {
  return parseDeployment([{ path: file, text: JSON.stringify({ ...base, ...config }) }], { fileExists: () => true });
}

function issuesOf(config: object): ConfigIssue[] {
  try {
    load(config);
  } catch (error) {
    if (isConfigError(error)) return [...error.issues];
    throw error;
  }
  throw new Error("expected a ConfigError");
}

const producerWith = (extra: object) => ({ queues: { producers: [{ binding: "Q", queue: "q", ...extra }] } });
const consumerWith = (extra: object) => ({ queues: { consumers: [{ queue: "q", ...extra }] } });
const only = <T>(items: T[]): T => {
  expect(items).toHaveLength(1);
  return items[0]!;
};

interface Bound {
  key: string;
  section: "producers" | "consumers";
  min: number;
  max: number;
  unit: string;
  read: (worker: WorkerConfig) => number;
}

const bounds: Bound[] = [
  {
    key: "delivery_delay",
    section: "producers",
    min: 0,
    max: limits.delaySecondsMax,
    unit: " seconds",
    read: (w) => only(w.producers).deliveryDelaySeconds,
  },
  {
    key: "max_batch_size",
    section: "consumers",
    min: limits.maxBatchSizeMin,
    max: limits.maxBatchSizeMax,
    unit: "",
    read: (w) => only(w.consumers).maxBatchSize,
  },
  {
    key: "max_batch_timeout",
    section: "consumers",
    min: 0,
    max: limits.batchTimeoutSecondsMax,
    unit: " seconds",
    read: (w) => only(w.consumers).maxBatchTimeoutSeconds,
  },
  {
    key: "max_retries",
    section: "consumers",
    min: 0,
    max: limits.maxRetriesMax,
    unit: "",
    read: (w) => only(w.consumers).maxRetries,
  },
  {
    key: "retry_delay",
    section: "consumers",
    min: 0,
    max: limits.delaySecondsMax,
    unit: " seconds",
    read: (w) => only(w.consumers).retryDelaySeconds,
  },
  {
    key: "max_concurrency",
    section: "consumers",
    min: limits.maxConcurrencyMin,
    max: limits.maxConcurrencyMax,
    unit: "",
    read: (w) => only(w.consumers).maxConcurrency,
  },
];

const entryWith = (b: Bound, value: unknown) =>
  b.section === "producers" ? producerWith({ [b.key]: value }) : consumerWith({ [b.key]: value });

describe("every numeric bound of a wrangler config", () => {
  test.each(bounds)("$key (in $section) is accepted at its min and its max", (b) => {
    for (const value of [b.min, b.max]) {
      expect(b.read(only(load(entryWith(b, value)).workers))).toBe(value);
    }
  });

  test.each(bounds)("$key (in $section) is refused one past either end, naming file, path, value and bound", (b) => {
    for (const value of [b.min - 1, b.max + 1]) {
      expect(issuesOf(entryWith(b, value))).toEqual([
        {
          file,
          path: `queues.${b.section}[0].${b.key}`,
          message: `must be from ${b.min} to ${b.max}${b.unit}, got ${value}`,
        },
      ]);
    }
  });

  test.each(bounds)("$key (in $section) takes whole numbers only", (b) => {
    const value = b.min + 0.5;
    expect(issuesOf(entryWith(b, value))).toEqual([
      {
        file,
        path: `queues.${b.section}[0].${b.key}`,
        message: `must be a whole number from ${b.min} to ${b.max}${b.unit}, got ${value}`,
      },
    ]);
  });

  test.each(bounds)("$key (in $section) must be a number, not a string", (b) => {
    expect(only(issuesOf(entryWith(b, String(b.max)))).message).toBe(
      `must be a number from ${b.min} to ${b.max}${b.unit}, got "${b.max}"`,
    );
  });

  test("the error message lists the problem as file: path: message", () => {
    try {
      load(consumerWith({ max_batch_size: limits.maxBatchSizeMax + 1 }));
      expect.unreachable();
    } catch (error) {
      expect(isConfigError(error) && error.code).toBe("ERR_CONFIG");
      const { maxBatchSizeMin: min, maxBatchSizeMax: max } = limits;
      expect((error as Error).message).toBe(
        `${file}: queues.consumers[0].max_batch_size: must be from ${min} to ${max}, got ${max + 1}`,
      );
    }
  });
});

describe("defaults", () => {
  test("a consumer that names only its queue gets Cloudflare's defaults", () => {
    const [worker] = load(consumerWith({})).workers;
    expect(worker?.consumers).toEqual([
      {
        queue: "q",
        type: "worker",
        maxBatchSize: limits.maxBatchSizeDefault,
        maxBatchTimeoutSeconds: limits.batchTimeoutSecondsDefault,
        maxRetries: limits.maxRetriesDefault,
        retryDelaySeconds: 0,
        deadLetterQueue: undefined,
        maxConcurrency: limits.maxConcurrencyMax,
      },
    ]);
  });

  test("a producer without delivery_delay sends without delay; lists and tables default to empty", () => {
    const [worker] = load(producerWith({})).workers;
    expect(worker).toMatchObject({
      producers: [{ binding: "Q", queue: "q", deliveryDelaySeconds: 0 }],
      consumers: [],
      compatibilityFlags: [],
      vars: {},
      kvNamespaces: [],
      d1Databases: [],
      r2Buckets: [],
      durableObjects: [],
      services: [],
    });
  });
});

describe("queue names", () => {
  const longest = "q".repeat(limits.queueNameCharsMax);

  test.each(["jobs", "jobs-dlq-2", "7", longest])("%s is accepted as producer, consumer and dead-letter queue", (name) => {
    const config = {
      queues: {
        producers: [{ binding: "Q", queue: name }],
        consumers: [{ queue: name, dead_letter_queue: `${name.slice(1)}x` }],
      },
    };
    expect(load(config).queues).toContain(name);
  });

  test.each(["Jobs", "jobs_1", "jobs.dlq", "", "q".repeat(limits.queueNameCharsMax + 1)])("%j is refused", (name) => {
    const issue = only(issuesOf(consumerWith({ queue: "ok", dead_letter_queue: name })));
    expect(issue.path).toBe("queues.consumers[0].dead_letter_queue");
    expect(issue.message).toContain(`1 to ${limits.queueNameCharsMax} lowercase letters, digits or dashes`);
    expect(issue.message).toContain(JSON.stringify(name.length > 60 ? `${name.slice(0, 60)}…` : name));
  });
});
