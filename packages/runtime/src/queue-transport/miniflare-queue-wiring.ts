/**
 * Points workerd's own queue producer bindings at celld, inside Miniflare.
 *
 * Why: a Worker must meet the genuine `env.JOBS` (workerd's argument errors, contentType handling,
 * v8 bytes that only workerd can produce), and workerd's Queue binding speaks plain HTTP to
 * whatever service it is bound to. Miniflare 4 has no public option to choose that service: its
 * queues plugin always binds producers to its own in-memory broker. So this module replaces two
 * methods of Miniflare's exported `PLUGINS.queues` object:
 *
 * - `getBindings` makes each producer in a worker's `queueProducers` a workerd queue binding
 *   (`{ name, queue: { name: <service> } }`) whose service is a workerd `external` service added
 *   to the same worker as a service binding, one per producer:
 *   `serviceBindings[producerServiceBindingName(binding)] = { external: { address, http } }`,
 *   pointing at celld's ProducerServer (producer-server.ts), with a header naming the producer.
 *   Miniflare runs such a binding as the workerd service `core:builtin:<workerIndex>:#<name>`; the
 *   name is asked of Miniflare's core plugin, not rebuilt here.
 * - `getServices` returns no services, which removes Miniflare's broker. celld delivers to
 *   consumers itself (`Fetcher.queue`), so Miniflare must never be given `queueConsumers`; the
 *   patch refuses them.
 *
 * The patch is process-wide: every Miniflare in this process loses the built-in broker. It relies
 * on Miniflare internals checked against miniflare 4.20260426.0 (and still true in 4.20260730.0);
 * `installQueueWiring` checks their shape and throws naming that version if they changed, and
 * runtime/test/queue-wiring.test.ts sends a real message through a real workerd.
 *
 * A cost to know: the per-producer service binding is an ordinary binding, so it is also visible
 * on the Worker's `env` under its `__celld_queue_` name.
 */
import { PLUGINS } from "miniflare";
import { installedMiniflareVersion, wiredMiniflareVersion } from "../workerd/miniflare-version.ts";
import type { ExternalServiceDesignator, NodeServiceHandler, ProducerServer } from "./producer-server.ts";

/** One `queues.producers` entry of a worker, as the host's config model has it. */
export interface QueueProducerWiring {
  /** The Worker's binding name (`env.JOBS`). */
  binding: string;
  /** The queue it sends to. */
  queue: string;
  /** `delivery_delay`: the delay of a send that names none. */
  deliveryDelaySeconds?: number;
}

export type { NodeServiceHandler } from "./producer-server.ts";

/** Builds the Node handler that answers one producer binding's requests. */
export type ProducerHandlerFactory = (producer: QueueProducerWiring) => NodeServiceHandler;

export interface QueueProducerWorkerOptions {
  /** For Miniflare's `queueProducers` worker option. */
  queueProducers: Record<string, { queueName: string }>;
  /** To merge into the same worker's `serviceBindings`. */
  serviceBindings: Record<string, ExternalServiceDesignator>;
}

const serviceBindingPrefix = "__celld_queue_";
const installedMark = Symbol.for("celld.miniflare-queue-wiring");

/** The Node service binding that carries producer `binding`'s requests. */
export function producerServiceBindingName(binding: string): string {
  return `${serviceBindingPrefix}${binding}`;
}

/**
 * Both Miniflare worker options a worker with queue producers needs: `queueProducers` (which the
 * patched plugin turns into workerd queue bindings) and the service bindings they target, whose
 * requests `server` hands to the handlers `createHandler` makes. Installs the wiring first.
 * `existingServiceBindings` are the worker's own, checked for clashes.
 */
export function queueProducerWorkerOptions(
  producers: readonly QueueProducerWiring[],
  createHandler: ProducerHandlerFactory,
  server: ProducerServer,
  existingServiceBindings: Readonly<Record<string, unknown>> = {},
): QueueProducerWorkerOptions {
  return {
    queueProducers: Object.fromEntries(producers.map((p) => [p.binding, { queueName: p.queue }])),
    serviceBindings: producerServiceBindings(producers, createHandler, server, existingServiceBindings),
  };
}

/** The `serviceBindings` entries to merge into a worker's options, one per producer binding. */
export function producerServiceBindings(
  producers: readonly QueueProducerWiring[],
  createHandler: ProducerHandlerFactory,
  server: ProducerServer,
  existingServiceBindings: Readonly<Record<string, unknown>> = {},
): Record<string, ExternalServiceDesignator> {
  installQueueWiring();
  const names = producers.map((producer) => producerServiceBindingName(producer.binding));
  producers.forEach((producer, i) => {
    if (names.indexOf(names[i]!) !== i) throw new Error(`queue producer binding "${producer.binding}" is declared twice`);
    if (Object.hasOwn(existingServiceBindings, names[i]!)) {
      throw new Error(`service binding "${names[i]}" is reserved for queue producer "${producer.binding}"`);
    }
  });
  return Object.fromEntries(producers.map((producer, i) => [names[i]!, server.serviceFor(producer.binding, createHandler(producer))]));
}

interface WorkerdQueueBinding {
  name: string;
  queue: { name: string };
}

/** The parts of a Miniflare plugin this module touches, checked at run time before use. */
interface PatchablePlugin {
  options: { safeParse(value: unknown): { success: boolean } };
  getBindings(options: unknown, workerIndex: number): unknown;
  getServices(options: unknown): unknown;
  [installedMark]?: true;
}

/** Patches `PLUGINS.queues` once per process; later calls do nothing. */
export function installQueueWiring(): void {
  const queues = PLUGINS.queues as unknown as PatchablePlugin;
  if (queues[installedMark] === true) return;
  const core = PLUGINS.core as unknown as PatchablePlugin;
  checkQueuePluginShape(queues, core);

  queues.getBindings = async (options: unknown, workerIndex: number): Promise<WorkerdQueueBinding[]> => {
    const names = producerBindingNames((options as { queueProducers?: unknown }).queueProducers);
    if (names.length === 0) return [];
    const services = await externalServiceNames(core, names.map(producerServiceBindingName), workerIndex);
    return names.map((name) => ({ name, queue: { name: services.get(producerServiceBindingName(name))! } }));
  };
  queues.getServices = (servicesOptions: unknown): [] => {
    const options = (servicesOptions as { options?: { queueConsumers?: unknown } }).options;
    if (options?.queueConsumers !== undefined) {
      throw new Error(
        "celld delivers queue batches to consumers itself (Fetcher.queue); do not pass queueConsumers to Miniflare",
      );
    }
    return [];
  };
  queues[installedMark] = true;
}

/**
 * Throws, naming the miniflare version the wiring was written against, unless `queues` and `core`
 * have the shape the patch relies on. installQueueWiring runs it on Miniflare's PLUGINS.
 */
export function checkQueuePluginShape(queuesPlugin: unknown, corePlugin: unknown): void {
  const queues = queuesPlugin as PatchablePlugin | undefined;
  const core = corePlugin as PatchablePlugin | undefined;
  const fail = (what: string): never => {
    throw new Error(
      `celld's queue wiring relies on internals of miniflare ${wiredMiniflareVersion}, and miniflare ` +
        `${installedMiniflareVersion()} differs: ${what}. Re-check packages/runtime/src/queue-transport/miniflare-queue-wiring.ts.`,
    );
  };
  if (typeof queues !== "object" || queues === null) fail("PLUGINS.queues is missing");
  if (typeof core !== "object" || core === null) fail("PLUGINS.core is missing");
  for (const [name, plugin] of [["queues", queues], ["core", core]] as const) {
    if (typeof plugin!.getBindings !== "function") fail(`PLUGINS.${name}.getBindings is not a function`);
    if (typeof plugin!.getServices !== "function") fail(`PLUGINS.${name}.getServices is not a function`);
  }
  const schema = queues!.options;
  if (typeof schema?.safeParse !== "function" || !schema.safeParse({ queueProducers: { P: { queueName: "q" } } }).success) {
    fail("PLUGINS.queues.options no longer accepts queueProducers: { P: { queueName } }");
  }
  // Miniflare's own producer bindings show the workerd binding shape the patch returns.
  const own = queues!.getBindings({ queueProducers: { P: "q" } }, 0);
  const first = Array.isArray(own) ? (own[0] as Partial<WorkerdQueueBinding> | undefined) : undefined;
  if (!Array.isArray(own) || own.length !== 1 || first?.name !== "P" || typeof first.queue?.name !== "string") {
    fail(`PLUGINS.queues.getBindings no longer returns [{ name, queue: { name } }] (got ${JSON.stringify(own)})`);
  }
}

/** Asks Miniflare's core plugin which workerd service each external service binding becomes. */
async function externalServiceNames(core: PatchablePlugin, names: string[], workerIndex: number): Promise<Map<string, string>> {
  const external = { external: { address: "127.0.0.1:1", http: {} } };
  const probe = { serviceBindings: Object.fromEntries(names.map((n) => [n, external])) };
  const bindings = (await core.getBindings(probe, workerIndex)) as unknown;
  const services = new Map<string, string>();
  if (Array.isArray(bindings)) {
    for (const b of bindings as { name?: unknown; service?: { name?: unknown } }[]) {
      if (typeof b.name === "string" && typeof b.service?.name === "string") services.set(b.name, b.service.name);
    }
  }
  for (const name of names) {
    if (!services.get(name)?.startsWith("core:builtin:")) {
      throw new Error(
        `celld's queue wiring relies on internals of miniflare ${wiredMiniflareVersion}, and miniflare ` +
          `${installedMiniflareVersion()} differs: an external service binding no longer becomes a ` +
          `core:builtin service (got ${JSON.stringify(bindings)})`,
      );
    }
  }
  return services;
}

/** Binding names from any form Miniflare accepts for `queueProducers`. */
function producerBindingNames(queueProducers: unknown): string[] {
  if (queueProducers === undefined) return [];
  if (Array.isArray(queueProducers)) return queueProducers.map(String);
  return Object.keys(queueProducers as Record<string, unknown>);
}
