import { existsSync } from "node:fs";
import {
  isCellError,
  type QueueCells,
  type Clock,
  type Cell,
  type QueueConfig,
  type UlidSource,
} from "@celld/queue-cell";
import { limits } from "@celld/queue-cell";
import { apiLimits } from "./api-limits.ts";
import type { ApiQueueSettings, Catalog, QueueRow } from "./catalog.ts";
import { ApiError } from "../wire/api-error.ts";
import { childName, queueIdFor, shortId } from "./names.ts";

export const defaultWorkerEnv = "orgs/local/projects/local/envs/dev";

export interface WorkerQueueOptions {
  /** The environment whose queues are the Workers' queues. Default `orgs/local/projects/local/envs/dev`. */
  env?: string;
  /**
   * The queue names the Workers config declares. Without it, every cell with a plain name (one a
   * Worker would use) that the API did not create counts as a Workers queue.
   */
  declared?: () => Iterable<string>;
}

export interface QueueView {
  row: QueueRow;
  settings: Required<ApiQueueSettings>;
  /** Where a message goes after its last delivery: the own set, another queue, or nowhere. */
  deadLetterPolicy: "set" | "queue" | "delete";
}

const namePattern = /^[A-Za-z0-9][A-Za-z0-9_-]*$/;

/**
 * Maps queue names to cells and guards their lifetimes. An API queue's cell is named by its full
 * resource name; in the Workers environment a queue's cell is its short name, the cell a Worker's
 * binding writes to, so both sides meet in one cell. Deleting a queue waits until no request is
 * still using its cell, so a request can never recreate a deleted queue's file behind it.
 */
export class QueueDirectory {
  readonly workerEnv: string;
  private readonly declared: (() => Iterable<string>) | undefined;
  private readonly active = new Map<string, { users: number; controllers: Set<AbortController>; idle?: () => void }>();
  private readonly retiring = new Set<string>();
  /** Cells whose settings have been applied from the catalog by this process. */
  private readonly reconciled = new Set<string>();
  private adminTail: Promise<unknown> = Promise.resolve();
  /** Told as a queue is deleted, before its cell closes: what runs on that cell stops then. */
  beforeRemove: ((name: string) => Promise<void>) | undefined;

  constructor(
    private readonly catalog: Catalog,
    private readonly registry: QueueCells,
    private readonly clock: Clock,
    private readonly ids: UlidSource,
    workers: WorkerQueueOptions = {},
  ) {
    this.workerEnv = workers.env ?? defaultWorkerEnv;
    this.declared = workers.declared;
  }

  cellNameOf(name: string): string {
    return name.startsWith(`${this.workerEnv}/queues/`) ? shortId(name) : name;
  }

  nameOfCell(cellName: string): string {
    return cellName.includes("/") ? cellName : childName(this.workerEnv, "queues", cellName);
  }

  /** The queue, adopting a Workers queue into the catalog the first time the API meets it. */
  find(name: string): QueueRow | undefined {
    if (this.retiring.has(name)) return undefined;
    const row = this.catalog.getQueue(name);
    const inWorkerEnv = name.startsWith(`${this.workerEnv}/queues/`);
    if (!inWorkerEnv) return row;
    const queue = shortId(name);
    if (row !== undefined) {
      if (row.origin === "api" && this.isDeclared(queue) === true) {
        // Declared by the Workers config since the API created it: the config owns it now.
        this.catalog.markWorkers(name, this.clock.now());
        this.reconciled.delete(row.cellName);
        return this.catalog.getQueue(name);
      }
      return row;
    }
    const isWorkers = this.isDeclared(queue) ?? (this.registry.openNames().includes(queue) || existsSync(this.registry.pathOf(queue)));
    return isWorkers ? this.adopt(queue) : undefined;
  }

  require(name: string): QueueRow {
    const row = this.find(name);
    if (row === undefined) throw new ApiError("not_found", `queue ${name} does not exist`);
    return row;
  }

  /** A page of an environment's queues, by short id in byte order (the catalog's order), not queue id. */
  list(env: string, after: string, limit: number): QueueRow[] {
    if (env === this.workerEnv) {
      const names = this.declared !== undefined ? [...this.declared()] : this.registry.storedNames().filter((n) => !n.includes("/"));
      for (const queue of names) if (namePattern.test(queue)) this.find(childName(env, "queues", queue));
    }
    return this.catalog.listQueues(env, after, limit);
  }

  /** Runs `fn` with the queue's open cell; a delete of the queue waits for it, and aborts `signal`. */
  async withCell<T>(name: string, fn: (cell: Cell, row: QueueRow, signal: AbortSignal) => Promise<T>): Promise<T> {
    const row = this.require(name);
    let slot = this.active.get(name);
    if (slot === undefined) {
      slot = { users: 0, controllers: new Set() };
      this.active.set(name, slot);
    }
    const controller = new AbortController();
    slot.users += 1;
    slot.controllers.add(controller);
    try {
      return await fn(await this.openCell(row), row, controller.signal);
    } catch (error) {
      if (this.retiring.has(name) && isCellError(error, "ERR_CELL_CLOSED")) {
        throw new ApiError("not_found", `queue ${name} does not exist`);
      }
      throw error;
    } finally {
      slot.users -= 1;
      slot.controllers.delete(controller);
      if (slot.users === 0) {
        this.active.delete(name);
        slot.idle?.();
      }
    }
  }

  /** A queue's settings: the catalog's for an API queue, the cell's for a Workers queue. */
  view(row: QueueRow, cell?: Cell): QueueView {
    if (row.settings !== null) {
      const settings = { retentionSeconds: limits.retentionSeconds, deliveryPaused: false, ...row.settings };
      return { row, settings, deadLetterPolicy: row.settings.deadLetterQueue === null ? "set" : "queue" };
    }
    if (cell === undefined) throw new Error(`assertion: Workers queue ${row.name} viewed without its cell`);
    // A cell on a worker thread: a mirror, updated by the answer of each configure, so a change
    // this API has answered is in it.
    const config = cell.queueConfig;
    const dl = config.deadLetter;
    return {
      row,
      settings: {
        visibilityTimeout: config.visibilityTimeoutSeconds,
        maxDeliveries: config.maxDeliveries,
        deliveryDelay: config.deliveryDelaySeconds,
        deadLetterQueue: dl.kind === "queue" ? this.nameOfCell(dl.queue) : null,
        retentionSeconds: config.retentionSeconds,
        deliveryPaused: config.deliveryPaused,
      },
      deadLetterPolicy: dl.kind,
    };
  }

  async create(env: string, queue: string, settings: ApiQueueSettings): Promise<QueueRow> {
    const name = childName(env, "queues", queue);
    return this.serial(async () => {
      if (this.find(name) !== undefined) throw new ApiError("already_exists", `queue ${name} already exists`, { field: "name" });
      // Counted inside serial(): two creates cannot both take the last place.
      if (this.catalog.countQueues(env) >= apiLimits.queuesPerEnvMax) {
        throw new ApiError("out_of_range", `${env} already has ${apiLimits.queuesPerEnvMax} queues`, {
          field: "name",
          bound: `at most ${apiLimits.queuesPerEnvMax} queues per environment`,
        });
      }
      this.checkDeadLetterQueue(name, settings.deadLetterQueue);
      const now = this.clock.now();
      const cellName = this.cellNameOf(name);
      const row: QueueRow = {
        name,
        env,
        queue,
        queueId: queueIdFor(cellName, this.ids, now),
        origin: "api",
        cellName,
        settings,
        createMs: now,
        updateMs: now,
      };
      if (!this.catalog.insertQueue(row)) {
        throw new ApiError("already_exists", `queue ${name} already exists`, { field: "name" });
      }
      try {
        // A crash in the middle of a delete can leave the old queue's file; a new queue starts empty.
        if (cellName === name) await this.registry.drop(cellName);
        await this.openCell(row);
      } catch (error) {
        this.catalog.deleteQueue(name);
        throw error;
      }
      return row;
    });
  }

  async update(name: string, patch: Partial<ApiQueueSettings>): Promise<QueueRow> {
    return this.serial(() =>
      this.withCell(name, async (cell, row) => {
        if (row.settings === null) throw declaredByWorkers(name);
        const settings: ApiQueueSettings = { ...row.settings, ...stripUndefined(patch) };
        this.checkDeadLetterQueue(name, settings.deadLetterQueue);
        await cell.configure(this.cellConfig(settings));
        const updated = { ...row, settings, updateMs: this.clock.now() };
        this.catalog.updateQueueSettings(name, settings, updated.updateMs);
        return updated;
      }),
    );
  }

  /** Deletes the queue and every message in it, and the subscriptions that route into it. */
  async remove(name: string): Promise<void> {
    return this.serial(async () => {
      const row = this.require(name);
      // A Workers queue the config no longer declares may go; while declared, the config owns it.
      if (row.settings === null && this.isDeclared(row.queue) !== false) throw declaredByWorkers(name);
      const users = this.catalog.deadLetterUsers(name);
      if (users.length > 0) {
        throw new ApiError(
          "failed_precondition",
          `queue ${name} is the dead_letter_queue of ${users.join(", ")}; point those elsewhere first`,
          { field: "name" },
        );
      }
      this.retiring.add(name);
      try {
        await this.beforeRemove?.(name);
        const slot = this.active.get(name);
        if (slot !== undefined) {
          for (const controller of slot.controllers) controller.abort();
          await this.registry.close(row.cellName);
          if (slot.users > 0) await new Promise<void>((resolve) => (slot.idle = resolve));
        }
        await this.registry.drop(row.cellName);
        this.reconciled.delete(row.cellName);
        this.catalog.deleteQueue(name);
      } finally {
        this.retiring.delete(name);
      }
    });
  }

  /**
   * Retention and pause, which any queue may change, a Workers queue too: its config file says
   * nothing of either, so they are the cell's (persisted there) rather than the config's. An API
   * queue keeps them in the catalog as well, which stays its truth.
   */
  async setDelivery(name: string, patch: { retentionSeconds?: number; deliveryPaused?: boolean }): Promise<QueueRow> {
    const wanted = stripUndefined(patch);
    return this.serial(() =>
      this.withCell(name, async (cell, row) => {
        await cell.configure(wanted);
        if (row.settings === null) {
          const updateMs = this.clock.now();
          this.catalog.touchQueue(name, updateMs);
          return { ...row, updateMs };
        }
        const settings: ApiQueueSettings = { ...row.settings, ...wanted };
        const updated = { ...row, settings, updateMs: this.clock.now() };
        this.catalog.updateQueueSettings(name, settings, updated.updateMs);
        return updated;
      }),
    );
  }

  cellConfig(settings: ApiQueueSettings): Partial<QueueConfig> {
    return {
      retentionSeconds: settings.retentionSeconds,
      deliveryPaused: settings.deliveryPaused,
      maxDeliveries: settings.maxDeliveries,
      visibilityTimeoutSeconds: settings.visibilityTimeout,
      deliveryDelaySeconds: settings.deliveryDelay,
      deadLetter:
        settings.deadLetterQueue === null
          ? { kind: "set" }
          : { kind: "queue", queue: this.cellNameOf(settings.deadLetterQueue) },
    };
  }

  private async openCell(row: QueueRow): Promise<Cell> {
    if (row.settings === null || this.reconciled.has(row.cellName)) return this.registry.open(row.cellName);
    // The catalog is the truth for an API queue; a crash between an update's two writes heals here.
    const cell = await this.registry.open(row.cellName, this.cellConfig(row.settings));
    this.reconciled.add(row.cellName);
    return cell;
  }

  /** Whether the Workers config declares `queue`; undefined when the host did not say what it declares. */
  private isDeclared(queue: string): boolean | undefined {
    return this.declared === undefined ? undefined : new Set(this.declared()).has(queue);
  }

  private adopt(queue: string): QueueRow {
    const name = childName(this.workerEnv, "queues", queue);
    const now = this.clock.now();
    const row: QueueRow = {
      name,
      env: this.workerEnv,
      queue,
      queueId: queueIdFor(queue, this.ids, now),
      origin: "workers",
      cellName: queue,
      settings: null,
      createMs: now,
      updateMs: now,
    };
    this.catalog.insertQueue(row);
    return this.catalog.getQueue(name) ?? row;
  }

  private checkDeadLetterQueue(name: string, deadLetterQueue: string | null): void {
    if (deadLetterQueue === null) return;
    if (deadLetterQueue === name) {
      throw new ApiError("invalid_argument", `dead_letter_queue cannot be the queue itself (${name})`, {
        field: "dead_letter_queue",
        bound: "another queue of the same environment",
      });
    }
    if (this.find(deadLetterQueue) === undefined) {
      throw new ApiError("invalid_argument", `dead_letter_queue names ${deadLetterQueue}, which does not exist; create it first`, {
        field: "dead_letter_queue",
        bound: "an existing queue of the same environment",
      });
    }
    // A message sent around a loop would go round it for ever: each dead-letter move starts its
    // retention again in the queue it reaches.
    const chain = [name];
    for (let at: string | null = deadLetterQueue; at !== null && !chain.includes(at); ) {
      chain.push(at);
      at = this.find(at)?.settings?.deadLetterQueue ?? null;
      if (at === name) {
        throw new ApiError(
          "invalid_argument",
          `dead_letter_queue ${deadLetterQueue} would close a loop of dead-letter queues (${[...chain, name].join(" -> ")}); ` +
            "a message dead-lettered around it would go round it for ever",
          { field: "dead_letter_queue", bound: "a chain of dead-letter queues without loops" },
        );
      }
    }
  }

  /**
   * Creates, updates and deletes run one at a time, across all queues, so the cells and the
   * catalog agree after each. One queue's lock would not do: an update checks other queues (its
   * dead_letter_queue exists, no loop closes) and writes the catalog only after awaiting its cell,
   * and a delete of its target reading the catalog in between would find no user and go ahead.
   */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.adminTail.then(fn);
    this.adminTail = next.catch(() => undefined);
    return next;
  }
}

function declaredByWorkers(name: string): ApiError {
  return new ApiError(
    "failed_precondition",
    `queue ${name} is declared by the Workers config; change or remove it there`,
    { field: "name" },
  );
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
