import { mkdirSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { readApiStoreFormat, stampApiStoreFormat } from "./store-format.ts";

/**
 * What the API knows about queues and subscriptions beyond the cells themselves: ids, times,
 * settings and routing, in `<dataDir>/api/catalog.sqlite`. A queue's messages live only in its
 * cell; the catalog never holds a message.
 */
export interface ApiQueueSettings {
  visibilityTimeout: number;
  maxDeliveries: number;
  deliveryDelay: number;
  /** Full name of the queue that takes this queue's dead letters, or null for its own set. */
  deadLetterQueue: string | null;
  /** Absent in rows written before it existed: limits.retentionSeconds. */
  retentionSeconds?: number;
  /** Absent in rows written before it existed: false. */
  deliveryPaused?: boolean;
}

export type QueueOrigin = "api" | "workers";

export interface QueueRow {
  /** `orgs/{org}/projects/{project}/envs/{env}/queues/{queue}` */
  name: string;
  env: string;
  queue: string;
  /** `que_<cell><ulid>` */
  queueId: string;
  /** `workers`: declared by the Workers config, which owns its settings. */
  origin: QueueOrigin;
  cellName: string;
  /** The settings the API applied; null for a Workers queue, whose cell holds them. */
  settings: ApiQueueSettings | null;
  createMs: number;
  updateMs: number;
}

/** A consumer added through Cloudflare's REST API. Settings are Cloudflare's, as sent (snake_case). */
export interface ConsumerRow {
  consumerId: string;
  /** Full name of the queue it consumes. */
  queue: string;
  type: "worker" | "http_pull";
  script: string | null;
  settings: Record<string, number>;
  /** Full name of the dead-letter queue, or null. */
  deadLetterQueue: string | null;
  createMs: number;
}

interface ConsumerRecord {
  consumer_id: string;
  queue: string;
  type: "worker" | "http_pull";
  script: string | null;
  settings: string;
  dead_letter_queue: string | null;
  create_ms: number;
}

/** A queue's last purge through Cloudflare's API. */
export interface PurgeRow {
  /** Full name of the queue. */
  queue: string;
  startedMs: number;
  /** The purge's cut (Cell.purgeCut): messages after it are not its own. */
  seqAtMost: number;
  /** Null while it runs, or if a stop interrupted it. */
  completedMs: number | null;
}

export interface SubscriptionRow {
  name: string;
  env: string;
  subscription: string;
  subscriptionId: string;
  /** Full name of the target queue, in the same environment. */
  queue: string;
  types: string[];
  sources: string[];
  createMs: number;
  updateMs: number;
}

interface QueueRecord {
  name: string;
  env: string;
  queue: string;
  queue_id: string;
  origin: QueueOrigin;
  cell_name: string;
  settings: string | null;
  dead_letter_queue: string | null;
  create_ms: number;
  update_ms: number;
}

interface SubscriptionRecord {
  name: string;
  env: string;
  subscription: string;
  subscription_id: string;
  queue: string;
  types: string;
  sources: string;
  create_ms: number;
  update_ms: number;
}

const schema = `
CREATE TABLE IF NOT EXISTS queues (
  name TEXT PRIMARY KEY,
  env TEXT NOT NULL,
  queue TEXT NOT NULL,
  queue_id TEXT NOT NULL UNIQUE,
  origin TEXT NOT NULL,
  cell_name TEXT NOT NULL UNIQUE,
  settings TEXT,
  -- Kept beside settings so "which queues send their dead letters here" is one index lookup.
  dead_letter_queue TEXT,
  create_ms INTEGER NOT NULL,
  update_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS queues_by_env ON queues (env, queue);
CREATE INDEX IF NOT EXISTS queues_by_dead_letter_queue ON queues (dead_letter_queue);
CREATE TABLE IF NOT EXISTS subscriptions (
  name TEXT PRIMARY KEY,
  env TEXT NOT NULL,
  subscription TEXT NOT NULL,
  subscription_id TEXT NOT NULL UNIQUE,
  queue TEXT NOT NULL,
  types TEXT NOT NULL,
  sources TEXT NOT NULL,
  create_ms INTEGER NOT NULL,
  update_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS subscriptions_by_env ON subscriptions (env, subscription);
CREATE INDEX IF NOT EXISTS subscriptions_by_queue ON subscriptions (queue);
-- Consumers added through Cloudflare's REST API (wrangler queues consumer add); those of the
-- Workers config are the config's and never stored here.
CREATE TABLE IF NOT EXISTS consumers (
  consumer_id TEXT PRIMARY KEY,
  queue TEXT NOT NULL,
  type TEXT NOT NULL,
  script TEXT,
  settings TEXT NOT NULL,
  dead_letter_queue TEXT,
  create_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS consumers_by_queue ON consumers (queue);
-- The last purge of each queue through Cloudflare's API, for its status call: kept across restarts,
-- with its cut so that one a stop interrupted is finished at the next start.
CREATE TABLE IF NOT EXISTS purges (
  queue TEXT PRIMARY KEY,
  started_ms INTEGER NOT NULL,
  seq_at_most INTEGER NOT NULL,
  completed_ms INTEGER
) WITHOUT ROWID;
`;

export class Catalog {
  private readonly db: Database.Database;
  private readonly stmt;

  private constructor(path: string) {
    this.db = new Database(path);
    try {
      const version = readApiStoreFormat(this.db, "api/catalog.sqlite");
      this.db.pragma("journal_mode = WAL");
      this.db.pragma("synchronous = FULL");
      this.db.exec(schema);
      stampApiStoreFormat(this.db, version);
    } catch (error) {
      this.db.close();
      throw error;
    }
    const db = this.db;
    this.stmt = {
      queue: db.prepare("SELECT * FROM queues WHERE name = ?"),
      queueById: db.prepare("SELECT * FROM queues WHERE queue_id = ?"),
      consumersOf: db.prepare("SELECT * FROM consumers WHERE queue = ? ORDER BY create_ms, consumer_id"),
      allConsumers: db.prepare("SELECT * FROM consumers ORDER BY create_ms, consumer_id"),
      insertConsumer: db.prepare(
        `INSERT INTO consumers (consumer_id, queue, type, script, settings, dead_letter_queue, create_ms)
         VALUES (@consumer_id, @queue, @type, @script, @settings, @dead_letter_queue, @create_ms)`,
      ),
      updateConsumer: db.prepare("UPDATE consumers SET settings = ?, dead_letter_queue = ? WHERE consumer_id = ?"),
      deleteConsumer: db.prepare("DELETE FROM consumers WHERE consumer_id = ? AND queue = ?"),
      deleteConsumersOf: db.prepare("DELETE FROM consumers WHERE queue = ?"),
      purge: db.prepare("SELECT * FROM purges WHERE queue = ?"),
      unfinishedPurges: db.prepare("SELECT * FROM purges WHERE completed_ms IS NULL ORDER BY started_ms"),
      startPurge: db.prepare("INSERT OR REPLACE INTO purges (queue, started_ms, seq_at_most, completed_ms) VALUES (?, ?, ?, NULL)"),
      completePurge: db.prepare("UPDATE purges SET completed_ms = ? WHERE queue = ? AND started_ms = ?"),
      deletePurgesOf: db.prepare("DELETE FROM purges WHERE queue = ?"),
      insertQueue: db.prepare(
        `INSERT OR IGNORE INTO queues (name, env, queue, queue_id, origin, cell_name, settings, dead_letter_queue, create_ms, update_ms)
         VALUES (@name, @env, @queue, @queue_id, @origin, @cell_name, @settings, @dead_letter_queue, @create_ms, @update_ms)`,
      ),
      updateQueue: db.prepare(
        "UPDATE queues SET settings = ?, dead_letter_queue = ?, update_ms = ? WHERE name = ?",
      ),
      deleteQueue: db.prepare("DELETE FROM queues WHERE name = ?"),
      touchQueue: db.prepare("UPDATE queues SET update_ms = ? WHERE name = ?"),
      markWorkers: db.prepare(
        "UPDATE queues SET origin = 'workers', settings = NULL, dead_letter_queue = NULL, update_ms = ? WHERE name = ?",
      ),
      listQueues: db.prepare("SELECT * FROM queues WHERE env = ? AND queue > ? ORDER BY queue LIMIT ?"),
      countQueues: db.prepare("SELECT count(*) AS n FROM queues WHERE env = ?"),
      deadLetterUsers: db.prepare("SELECT name FROM queues WHERE dead_letter_queue = ? ORDER BY name"),
      subscription: db.prepare("SELECT * FROM subscriptions WHERE name = ?"),
      insertSubscription: db.prepare(
        `INSERT OR IGNORE INTO subscriptions (name, env, subscription, subscription_id, queue, types, sources, create_ms, update_ms)
         VALUES (@name, @env, @subscription, @subscription_id, @queue, @types, @sources, @create_ms, @update_ms)`,
      ),
      updateSubscription: db.prepare(
        "UPDATE subscriptions SET queue = ?, types = ?, sources = ?, update_ms = ? WHERE name = ?",
      ),
      deleteSubscription: db.prepare("DELETE FROM subscriptions WHERE name = ?"),
      deleteSubscriptionsOf: db.prepare("DELETE FROM subscriptions WHERE queue = ?"),
      listSubscriptions: db.prepare(
        "SELECT * FROM subscriptions WHERE env = ? AND subscription > ? ORDER BY subscription LIMIT ?",
      ),
      envSubscriptions: db.prepare("SELECT * FROM subscriptions WHERE env = ? ORDER BY subscription"),
      countSubscriptions: db.prepare("SELECT count(*) AS n FROM subscriptions WHERE env = ?"),
    };
  }

  static open(dataDir: string): Catalog {
    const dir = join(dataDir, "api");
    mkdirSync(dir, { recursive: true });
    return new Catalog(join(dir, "catalog.sqlite"));
  }

  getQueue(name: string): QueueRow | undefined {
    const record = this.stmt.queue.get(name) as QueueRecord | undefined;
    return record === undefined ? undefined : toQueueRow(record);
  }

  getQueueById(queueId: string): QueueRow | undefined {
    const record = this.stmt.queueById.get(queueId) as QueueRecord | undefined;
    return record === undefined ? undefined : toQueueRow(record);
  }

  consumersOf(queue: string): ConsumerRow[] {
    return (this.stmt.consumersOf.all(queue) as ConsumerRecord[]).map(toConsumerRow);
  }

  /** Every consumer added through the API, of every queue. */
  allConsumers(): ConsumerRow[] {
    return (this.stmt.allConsumers.all() as ConsumerRecord[]).map(toConsumerRow);
  }

  insertConsumer(row: ConsumerRow): void {
    this.stmt.insertConsumer.run({
      consumer_id: row.consumerId,
      queue: row.queue,
      type: row.type,
      script: row.script,
      settings: JSON.stringify(row.settings),
      dead_letter_queue: row.deadLetterQueue,
      create_ms: row.createMs,
    });
  }

  updateConsumer(row: ConsumerRow): void {
    this.stmt.updateConsumer.run(JSON.stringify(row.settings), row.deadLetterQueue, row.consumerId);
  }

  deleteConsumer(queue: string, consumerId: string): boolean {
    return this.stmt.deleteConsumer.run(consumerId, queue).changes === 1;
  }

  purgeOf(queue: string): PurgeRow | undefined {
    const r = this.stmt.purge.get(queue) as PurgeRecord | undefined;
    return r === undefined ? undefined : toPurgeRow(r);
  }

  /** Purges a stop interrupted (or running now), oldest first. */
  unfinishedPurges(): PurgeRow[] {
    return (this.stmt.unfinishedPurges.all() as PurgeRecord[]).map(toPurgeRow);
  }

  /** A purge of `queue` begins (and replaces the record of its last). */
  startPurge(row: Omit<PurgeRow, "completedMs">): void {
    this.stmt.startPurge.run(row.queue, row.startedMs, row.seqAtMost);
  }

  completePurge(row: Pick<PurgeRow, "queue" | "startedMs">, completedMs: number): void {
    this.stmt.completePurge.run(completedMs, row.queue, row.startedMs);
  }

  /** False when a queue of that name (or on that cell) exists already. */
  insertQueue(row: QueueRow): boolean {
    return (
      this.stmt.insertQueue.run({
        name: row.name,
        env: row.env,
        queue: row.queue,
        queue_id: row.queueId,
        origin: row.origin,
        cell_name: row.cellName,
        settings: row.settings === null ? null : JSON.stringify(row.settings),
        dead_letter_queue: row.settings?.deadLetterQueue ?? null,
        create_ms: row.createMs,
        update_ms: row.updateMs,
      }).changes === 1
    );
  }

  updateQueueSettings(name: string, settings: ApiQueueSettings, updateMs: number): void {
    this.stmt.updateQueue.run(JSON.stringify(settings), settings.deadLetterQueue, updateMs, name);
  }

  /** A Workers queue's cell settings changed (retention, pause): its modified time moves. */
  touchQueue(name: string, updateMs: number): void {
    this.stmt.touchQueue.run(updateMs, name);
  }

  /** The Workers config declares this queue now: its settings are the config's, no longer the API's. */
  markWorkers(name: string, updateMs: number): void {
    this.stmt.markWorkers.run(updateMs, name);
  }

  /** Removes the queue, the subscriptions that route into it and its API-added consumers, together. */
  deleteQueue(name: string): void {
    this.db.transaction(() => {
      this.stmt.deleteSubscriptionsOf.run(name);
      this.stmt.deleteConsumersOf.run(name);
      this.stmt.deletePurgesOf.run(name);
      this.stmt.deleteQueue.run(name);
    })();
  }

  /** The environment's queues, those the Workers config declares among them. */
  countQueues(env: string): number {
    return (this.stmt.countQueues.get(env) as { n: number }).n;
  }

  listQueues(env: string, afterQueue: string, limit: number): QueueRow[] {
    return (this.stmt.listQueues.all(env, afterQueue, limit) as QueueRecord[]).map(toQueueRow);
  }

  /** Queues whose dead letters go to `name`. */
  deadLetterUsers(name: string): string[] {
    return (this.stmt.deadLetterUsers.all(name) as Array<{ name: string }>).map((r) => r.name);
  }

  getSubscription(name: string): SubscriptionRow | undefined {
    const record = this.stmt.subscription.get(name) as SubscriptionRecord | undefined;
    return record === undefined ? undefined : toSubscriptionRow(record);
  }

  /** The name's availability and the per-environment bound are checked in the insert's transaction. */
  insertSubscription(row: SubscriptionRow, maxPerEnv: number): "inserted" | "exists" | "full" {
    return this.db.transaction(() => {
      if (this.stmt.subscription.get(row.name) !== undefined) return "exists" as const;
      if ((this.stmt.countSubscriptions.get(row.env) as { n: number }).n >= maxPerEnv) return "full" as const;
      this.stmt.insertSubscription.run({
        name: row.name,
        env: row.env,
        subscription: row.subscription,
        subscription_id: row.subscriptionId,
        queue: row.queue,
        types: JSON.stringify(row.types),
        sources: JSON.stringify(row.sources),
        create_ms: row.createMs,
        update_ms: row.updateMs,
      });
      return "inserted" as const;
    })();
  }

  updateSubscription(row: SubscriptionRow): void {
    this.stmt.updateSubscription.run(row.queue, JSON.stringify(row.types), JSON.stringify(row.sources), row.updateMs, row.name);
  }

  deleteSubscription(name: string): boolean {
    return this.stmt.deleteSubscription.run(name).changes === 1;
  }

  listSubscriptions(env: string, afterSubscription: string, limit: number): SubscriptionRow[] {
    return (this.stmt.listSubscriptions.all(env, afterSubscription, limit) as SubscriptionRecord[]).map(toSubscriptionRow);
  }

  envSubscriptions(env: string): SubscriptionRow[] {
    return (this.stmt.envSubscriptions.all(env) as SubscriptionRecord[]).map(toSubscriptionRow);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

function toQueueRow(r: QueueRecord): QueueRow {
  return {
    name: r.name,
    env: r.env,
    queue: r.queue,
    queueId: r.queue_id,
    origin: r.origin,
    cellName: r.cell_name,
    settings: r.settings === null ? null : (JSON.parse(r.settings) as ApiQueueSettings),
    createMs: r.create_ms,
    updateMs: r.update_ms,
  };
}

function toSubscriptionRow(r: SubscriptionRecord): SubscriptionRow {
  return {
    name: r.name,
    env: r.env,
    subscription: r.subscription,
    subscriptionId: r.subscription_id,
    queue: r.queue,
    types: JSON.parse(r.types) as string[],
    sources: JSON.parse(r.sources) as string[],
    createMs: r.create_ms,
    updateMs: r.update_ms,
  };
}

function toConsumerRow(r: ConsumerRecord): ConsumerRow {
  return {
    consumerId: r.consumer_id,
    queue: r.queue,
    type: r.type,
    script: r.script,
    settings: JSON.parse(r.settings) as Record<string, number>,
    deadLetterQueue: r.dead_letter_queue,
    createMs: r.create_ms,
  };
}

interface PurgeRecord {
  queue: string;
  started_ms: number;
  seq_at_most: number;
  completed_ms: number | null;
}

function toPurgeRow(r: PurgeRecord): PurgeRow {
  return { queue: r.queue, startedMs: r.started_ms, seqAtMost: r.seq_at_most, completedMs: r.completed_ms };
}
