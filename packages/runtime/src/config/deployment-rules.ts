import { resolve } from "node:path";
import { devVarsKind, type DevVars } from "./dev-vars.ts";
import { formatPath, showValue, type ConfigIssue } from "./issues.ts";
import { isPlainObject, rawEntries, rawString, type RawTable } from "./raw.ts";
import { RouteRules } from "./route-rules.ts";

/**
 * Rules a single-file schema cannot express: they need the other files of the deployment or the
 * filesystem. They read the data leniently (see raw.ts) so they still run on a file whose schema
 * check failed; a value of the wrong type is the schema's to report, and is skipped here.
 */

/** Names of the host's own Workers start with this; a deployment's Workers may not. */
export const reservedWorkerNamePrefix = "__celld_";

export interface RawFile {
  /** As the caller named it, for messages. */
  file: string;
  /** Absolute directory of the config file: `main` is relative to it. */
  dir: string;
  /** The parsed data, or undefined when the file could not be parsed at all. */
  data: unknown;
  /** The `.dev.vars` (or `.env`) beside it, when there is one and it parsed. */
  devVars?: DevVars | undefined;
  /**
   * A key path of `data` as written in the file (`env.production.queues…` under `--env`), for a
   * message that points at this file from another's issue. The issue's own path is mapped by the caller.
   */
  located?: ((path: string) => string) | undefined;
}

export function deploymentIssues(
  files: RawFile[],
  fileExists: (path: string) => boolean,
  directoryExists: (path: string) => boolean,
): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const report = (file: string, path: string, message: string) => issues.push({ file, path, message });

  const nameOwner = new Map<string, string>();
  const consumerOwner = new Map<string, string>();
  const deadLetterOf = new Map<string, { file: string; path: string; target: string }>();
  const routes = new RouteRules();
  for (const { file, dir, data, devVars, located } of files) {
    const name = rawString(data, "name");
    for (const issue of routes.check(data, { file, worker: name, located })) report(file, issue.path, issue.message);
    const nameTakenBy = name === undefined ? undefined : nameOwner.get(name);
    if (name !== undefined && nameTakenBy === undefined) nameOwner.set(name, file);
    if (nameTakenBy !== undefined) {
      const why = "each Worker needs its own name";
      report(file, "name", `${showValue(name)} is also the name of the Worker in ${nameTakenBy}; ${why}`);
    }
    if (name?.startsWith(reservedWorkerNamePrefix)) {
      report(file, "name", `${showValue(name)} starts with "${reservedWorkerNamePrefix}", which celld keeps for its own Workers; choose another name`);
    }

    const main = rawString(data, "main");
    const mainPath = main === undefined ? undefined : resolve(dir, main);
    if (mainPath !== undefined && !fileExists(mainPath)) {
      report(file, "main", `${showValue(main)} does not exist (looked for ${mainPath})`);
    }
    const assetsDir = rawString(isPlainObject(data) ? data["assets"] : undefined, "directory");
    if (assetsDir !== undefined && !directoryExists(resolve(dir, assetsDir))) {
      report(file, "assets.directory", `${showValue(assetsDir)} is not a directory (looked for ${resolve(dir, assetsDir)})`);
    }

    for (const { index, entry } of rawEntries(data, ["queues", "consumers"])) {
      const at = `queues.consumers[${index}]`;
      const queue = rawString(entry, "queue");
      if (queue === undefined) continue;
      const owner = consumerOwner.get(queue);
      if (owner === undefined) consumerOwner.set(queue, `${file} (${located?.(at) ?? at})`);
      else {
        const why = "only one script may consume a queue";
        report(file, `${at}.queue`, `queue ${showValue(queue)} is already consumed by ${owner}; ${why}`);
      }
      const target = rawString(entry, "dead_letter_queue");
      if (target === queue) {
        const why = "a queue cannot be its own dead-letter queue";
        report(file, `${at}.dead_letter_queue`, `${showValue(queue)} is the consumer's own queue; ${why}`);
      } else if (target !== undefined) {
        deadLetterOf.set(queue, { file, path: `${at}.dead_letter_queue`, target });
      }
    }

    for (const duplicate of duplicateBindings(data)) report(file, duplicate.path, duplicate.message);
    if (devVars !== undefined) issues.push(...devVarsOverBindings(file, data, devVars));
  }

  for (const cycle of deadLetterCycles(deadLetterOf)) {
    const first = deadLetterOf.get(cycle[0]!)!;
    const why =
      "a message dead-lettered around a loop would go round it for ever, each queue it reaches " +
      "starting its four days of retention again";
    report(first.file, first.path, `dead-letter queues form a loop (${[...cycle, cycle[0]].join(" -> ")}); ${why}`);
  }

  return issues;
}

/**
 * Variables the environment gave (CLOUDFLARE_INCLUDE_PROCESS_ENV) named like another binding of
 * the file are left out with a warning, where a file's entry would be refused: nobody wrote them
 * for this Worker (an environment has dozens), and one must not stop it from starting.
 */
export function withoutProcessEnvOverBindings(
  configFile: string,
  data: unknown,
  devVars: DevVars | undefined,
): { devVars: DevVars | undefined; warnings: ConfigIssue[] } {
  const fromEnv = new Set(devVars?.fromProcessEnv ?? []);
  if (devVars === undefined || fromEnv.size === 0) return { devVars, warnings: [] };
  const clashes = bindingNames(data).filter(({ path, name }) => fromEnv.has(name) && path !== formatPath(["vars", name]));
  if (clashes.length === 0) return { devVars, warnings: [] };
  const values = new Map(devVars.values);
  for (const { name } of clashes) values.delete(name);
  const warnings = clashes.map(({ path, name }) => ({
    file: configFile,
    path,
    message: `the environment variable ${name} is left out of the Worker's env: this binding already has that name`,
  }));
  return { devVars: { ...devVars, values, fromProcessEnv: [...fromEnv].filter((n) => values.has(n)) }, warnings };
}

/** Every place a file gives a name to something on `env`, in file order. */
function bindingNames(data: unknown): { path: string; name: string }[] {
  const found: { path: string; name: string }[] = [];
  const vars = isPlainObject(data) ? data["vars"] : undefined;
  if (isPlainObject(vars)) for (const key of Object.keys(vars)) found.push({ path: formatPath(["vars", key]), name: key });
  const lists: [string[], string][] = [
    [["queues", "producers"], "binding"],
    [["kv_namespaces"], "binding"],
    [["d1_databases"], "binding"],
    [["r2_buckets"], "binding"],
    [["durable_objects", "bindings"], "name"],
    [["services"], "binding"],
  ];
  for (const [keys, field] of lists) {
    for (const { index, entry } of rawEntries(data, keys)) {
      const name = rawString(entry, field);
      if (name !== undefined) found.push({ path: `${keys.join(".")}[${index}].${field}`, name });
    }
  }
  const assetsBinding = rawString(isPlainObject(data) ? data["assets"] : undefined, "binding");
  if (assetsBinding !== undefined) found.push({ path: "assets.binding", name: assetsBinding });
  return found;
}

/** Two bindings of one name would leave `env.NAME` meaning only one of them. */
function duplicateBindings(data: unknown): { path: string; message: string }[] {
  const first = new Map<string, string>();
  const out: { path: string; message: string }[] = [];
  for (const { path, name } of bindingNames(data)) {
    const earlier = first.get(name);
    if (earlier === undefined) first.set(name, path);
    else out.push({ path, message: `binding name ${showValue(name)} is already used by ${earlier}` });
  }
  return out;
}

/**
 * A dev var replacing a `vars` entry is what it is for; one named like a KV namespace or a queue
 * would leave `env.NAME` meaning one of two things, so it is refused like a duplicate binding.
 */
function devVarsOverBindings(configFile: string, data: unknown, devVars: DevVars): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const { path, name } of bindingNames(data)) {
    const at = devVars.lines.get(name);
    if (at === undefined || path === formatPath(["vars", name])) continue;
    const why = `a ${devVarsKind(at.file)} entry may replace a vars entry, not another binding`;
    const message = `line ${at.line}: ${showValue(name)} is also the name of ${path} in ${configFile}; ${why}`;
    out.push({ file: at.file, path: "", message });
  }
  return out;
}

/**
 * A service binding, or a Durable Object `script_name`, naming a Worker that is not in the
 * deployment: `wrangler dev` starts and shows the binding "not connected", so celld starts too, and
 * says here which binding and which Worker. A call through the binding then fails at once with an
 * error naming the missing Worker (host/absent-workers.ts), never a hang.
 */
export function absentWorkerWarnings(files: RawFile[]): ConfigIssue[] {
  // A file that could not be parsed hides its Worker's name: a reference to it is not absent yet.
  if (!files.every((f) => f.data !== undefined)) return [];
  const names = files.map((f) => rawString(f.data, "name")).filter((n): n is string => n !== undefined);
  const known = names.length === 0 ? "none" : names.map((n) => showValue(n)).join(", ");
  const warnings: ConfigIssue[] = [];
  for (const { file, data } of files) {
    for (const ref of workerReferences(data)) {
      if (names.includes(ref.name)) continue;
      const what =
        ref.kind === "service"
          ? `requests through env.${ref.binding} are answered 503, naming it`
          : `calls through env.${ref.binding} fail with an error naming it`;
      warnings.push({
        file,
        path: ref.path,
        message: `no Worker named ${showValue(ref.name)} in this deployment (its Workers: ${known}); started without it: ${what}`,
      });
    }
  }
  return warnings;
}

/** Names of other Workers this file binds to, with the binding that reaches each. */
function workerReferences(data: unknown): { path: string; name: string; binding: string; kind: "service" | "durable-object" }[] {
  const refs: { path: string; name: string; binding: string; kind: "service" | "durable-object" }[] = [];
  const add = (entries: { index: number; entry: RawTable }[], prefix: string, field: string, bindingField: string) => {
    for (const { index, entry } of entries) {
      const name = rawString(entry, field);
      const binding = rawString(entry, bindingField) ?? "?";
      const kind = prefix === "services" ? "service" : "durable-object";
      if (name !== undefined) refs.push({ path: `${prefix}[${index}].${field}`, name, binding, kind });
    }
  };
  add(rawEntries(data, ["services"]), "services", "service", "binding");
  add(rawEntries(data, ["durable_objects", "bindings"]), "durable_objects.bindings", "script_name", "name");
  return refs;
}

/** Each loop of queue -> dead_letter_queue links once, starting from its smallest queue name. */
function deadLetterCycles(links: ReadonlyMap<string, { target: string }>): string[][] {
  const cycles: string[][] = [];
  const seen = new Set<string>();
  for (const start of [...links.keys()].sort()) {
    const path: string[] = [];
    let at: string | undefined = start;
    while (at !== undefined && !seen.has(at) && !path.includes(at)) {
      path.push(at);
      at = links.get(at)?.target;
    }
    if (at !== undefined && path.includes(at)) {
      const loop = path.slice(path.indexOf(at));
      const smallest = [...loop].sort()[0]!;
      cycles.push([...loop.slice(loop.indexOf(smallest)), ...loop.slice(0, loop.indexOf(smallest))]);
    }
    path.forEach((q) => seen.add(q));
  }
  return cycles;
}
