import { basename, dirname, join, relative, resolve } from "node:path";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { ApiError, apiScopes, checkSegment } from "../api/index.ts";
import { closestKey } from "../config/closest-key.ts";
import { isFile as isFileOnDisk } from "../config/load.ts";
import { cellThreadsOf } from "./cell-threads.ts";

export interface DevArgs {
  configs: string[];
  port: number;
  host: string;
  dataDir: string;
  apiPort: number | undefined;
  /**
   * The address the API port listens on: 127.0.0.1 unless `--api-host` says otherwise, whatever
   * `--host` is, so that exposing the Workers does not expose the queues API (plain HTTP) too.
   */
  apiHost: string;
  /** Where the Workers' inspector (Chrome DevTools protocol) listens, on 127.0.0.1; unset: off. */
  inspectorPort: number | undefined;
  /** wrangler's named environment (`--env`, else CLOUDFLARE_ENV), applied to every config; unset: the top level. */
  environment: string | undefined;
  /** Serve /cdn-cgi/handler/scheduled on the first Worker's port, as wrangler dev does. */
  testScheduled: boolean;
  /** Restart the Workers when a config, its dev vars or a Worker's source changes. */
  watch: boolean;
  /** For the user before anything starts: which config was found, when others were passed over. */
  warnings: string[];
  /** A line per HTTP request and per queue batch, as wrangler dev prints them. */
  logRequests: boolean;
  /** `json`: every line one JSON object, for log shippers. */
  logFormat: LogFormat;
  /** Serve GET /metrics on the API port without a key. */
  metricsPublic: boolean;
  /** `<worker>.<domain>` reaches that Worker on --port, as `<worker>.localhost` does. */
  workersDevDomain: string | undefined;
  /** Client connections open at once on --port / --api-port; unset: from the descriptor budget. */
  connectionsMax: number | undefined;
  apiConnectionsMax: number | undefined;
  /** Worker threads the cells run on (`--cell-threads`, CELLD_CELL_THREADS); 0: the main thread. */
  cellThreads: number;
}

export const logFormats = ["text", "json"] as const;
export type LogFormat = (typeof logFormats)[number];

export class UsageError extends Error {
  override readonly name = "UsageError";
}

export const usage = `Usage: celld dev [-c FILE]... [-e ENV] [--port 8787] [--host 127.0.0.1] [--workers-dev-domain DOMAIN] [--max-connections N] [--data DIR] [--api-port PORT] [--api-host 127.0.0.1] [--api-max-connections N] [--inspector-port PORT] [--test-scheduled] [--watch]
                 [--log-requests] [--log-format text|json] [--metrics-public] [--cell-threads N]

  -c, --config FILE   a wrangler.toml, wrangler.json or wrangler.jsonc; repeat for several
                      Workers (each answers on --port: see below). Default: as wrangler finds it, in
                      this directory or the nearest parent that has one.
  -e, --env ENV       run each config's [env.ENV] as wrangler dev --env does (Workers named
                      <name>-ENV unless the section names them; .dev.vars.ENV, .env.ENV read).
                      Default: CLOUDFLARE_ENV if set, else the top-level configuration
  --port PORT         HTTP port of the Workers (default 8787; 0 picks a free port): Host
                      <worker>.localhost reaches that Worker, then its routes, else the first
  --workers-dev-domain DOMAIN
                      <worker>.DOMAIN reaches that Worker too (point *.DOMAIN at this machine)
  --max-connections N client connections open at once on --port (default: from the open-files
                      limit, printed at start); past it, the connection silent longest is
                      closed to make room, or else the new one
  --api-max-connections N
                      the same for --api-port
  --host HOST         address to listen on (default 127.0.0.1)
  --data DIR          where queues and KV/D1/R2/Durable Object storage persist
                      (default: .celld beside the first config)
  --api-port PORT     also serve the native queues API on this port
  --api-host HOST     address the API port listens on (default 127.0.0.1, whatever --host
                      is: it speaks plain HTTP; put TLS in front of it to expose it, see
                      docs/api.md)
  --inspector-port PORT
                      serve the Workers' inspector on 127.0.0.1:PORT, for Chrome DevTools
                      (chrome://inspect) to set breakpoints, profile and evaluate
  --test-scheduled    serve /cdn-cgi/handler/scheduled?cron=... on the first Worker's port,
                      which runs its scheduled() handler, as wrangler dev does (each request
                      then also passes through Miniflare's entry Worker, at some CPU cost)
  --watch             restart the Workers when a config, its .dev.vars or .env, or a file a
                      Worker's bundle is built from changes; a config or bundle that fails
                      leaves the running Workers as they were
  --log-requests      print a line per HTTP request to the API port and per queue batch
                      (GET /metrics 200 OK (3ms), QUEUE jobs 10/10 (9ms))
  --log-format FORMAT text (default) or json: one JSON object per line (level, time,
                      message, and the Worker, queue and other fields a line has)
  --metrics-public    serve GET /metrics on the API port without a key (otherwise a key
                      with the scope metrics:read)
  --cell-threads N    run the queues' cells on N worker threads (each queue on one of them),
                      so that many busy queues use more than one core; 0 (the default) keeps
                      them on celld's main thread. Also CELLD_CELL_THREADS (docs/operating.md)

       celld serve [--data DIR] [--port 8787] [--host 127.0.0.1] [--api-port 8788] [--api-host 127.0.0.1]
                   [--workers-env orgs/O/projects/P/envs/E] [--workers-dev-domain DOMAIN] [--cell-threads N]
                      run what was last deployed to DIR (default ./.celld; nothing on a new
                      one) and take deploys from wrangler pointed at the API port's
                      /client/v4 with a key of scope workers:write of the --workers-env
                      environment, whose queues the Workers bind (default that of celld dev's
                      Workers, orgs/local/projects/local/envs/dev) (docs/deploying.md)
       celld keys create --org ORG --project PROJECT --env ENV --scope SCOPE... [--name NAME] [--data DIR] [-c FILE]
       celld keys list [--all] [--data DIR] [-c FILE]
       celld keys revoke KEY_ID [--data DIR] [-c FILE]
                      the data directory as celld dev finds it: --data, else .celld beside
                      the config (-c, or found as wrangler finds it)
       celld d1 migrations list|apply DATABASE [-c FILE]... [-e ENV] [--data DIR]
       celld d1 execute DATABASE (--command SQL | --file FILE) [-c FILE]... [-e ENV] [--data DIR]
                      a Worker's D1 database (its database_name or binding) in the data
                      directory celld dev uses, while celld is stopped; applied migrations are
                      recorded in d1_migrations, as wrangler d1 migrations apply --local does
       celld --version     celld's version, and the workerd and Miniflare it runs Workers in

  scopes: events:publish (send), events:write (queues, lease, ack, nack, replay), events:read,
          metrics:read (GET /metrics),
          workers:write (deploy, versions, rollback, secrets, delete), workers:read`;

/** wrangler's config file names, in the order it prefers them in one directory. */
const configNames = ["wrangler.json", "wrangler.jsonc", "wrangler.toml"];

export interface FoundConfig {
  /** Relative to the directory searched from, as the user would type it with -c. */
  path: string;
  /** The other config files in the same directory, by name: wrangler would not read them either. */
  passedOver: string[];
}

/**
 * The config `wrangler dev` reads when given none: the nearest directory from `cwd` up that holds
 * one, and in it wrangler.json, then wrangler.jsonc, then wrangler.toml. (wrangler looks for
 * wrangler.json in every parent before it looks for the other two names, so a wrangler.json
 * higher up beats a wrangler.toml right here: workers-sdk#15663, which its maintainers treat as
 * a bug. celld takes the nearest directory.)
 */
export function findConfig(cwd: string, isFile: (path: string) => boolean = isFileOnDisk): FoundConfig | undefined {
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const here = configNames.filter((name) => isFile(join(dir, name)));
    const [chosen, ...passedOver] = here;
    if (chosen !== undefined) return { path: relative(cwd, join(dir, chosen)), passedOver };
    if (dirname(dir) === dir) return undefined;
  }
}

export interface KeysArgs {
  action: "create" | "list" | "revoke";
  dataDir: string;
  org?: string;
  project?: string;
  env?: string;
  scopes: string[];
  name?: string;
  keyId?: string;
  includeRevoked: boolean;
}

/** `celld keys ...`: the data directory is found as `celld dev` finds it. */
export function parseKeysArgs(argv: string[], cwd: string): KeysArgs {
  const [action, ...rest] = argv;
  if (action !== "create" && action !== "list" && action !== "revoke") {
    const meant = action === undefined ? undefined : closestKey(action, ["create", "list", "revoke"]);
    throw new UsageError(
      `celld keys takes create, list or revoke, got ${action === undefined ? "nothing" : `"${action}"`}` +
        (meant === undefined ? "" : ` (did you mean "${meant}"?)`),
    );
  }
  const { values, positionals } = parseOptions({
    args: rest,
    options: {
      config: { type: "string", short: "c" },
      data: { type: "string" },
      org: { type: "string" },
      project: { type: "string" },
      env: { type: "string" },
      scope: { type: "string", multiple: true },
      name: { type: "string" },
      all: { type: "boolean" },
    },
    strict: true,
    allowPositionals: action === "revoke",
  });
  // As `celld dev` takes the two: --data names the directory, even beside -c, so that the flags of
  // a unit's ExecStart name the directory that celld reads; and a -c that names no file is refused
  // either way (without --data, the keys would go beside a file no celld dev reads).
  const given = values.config === undefined ? undefined : resolve(cwd, values.config);
  if (given !== undefined && !isFileOnDisk(given)) throw new UsageError(`-c ${values.config}: config file not found (looked for ${given})`);
  let dataDir = values.data === undefined ? undefined : resolve(cwd, values.data);
  if (dataDir === undefined) {
    const found = given === undefined ? findConfig(cwd) : undefined;
    const config = given ?? (found && resolve(cwd, found.path));
    if (config === undefined) throw new UsageError("pass --data DIR (or -c FILE, or run where the wrangler config is)");
    dataDir = join(dirname(config), ".celld");
  }
  if (action === "create") {
    for (const flag of ["org", "project", "env"] as const) {
      if (values[flag] === undefined) throw new UsageError(`celld keys create needs --${flag}`);
    }
    if (values.scope === undefined) throw new UsageError("celld keys create needs at least one --scope");
    // Checked here, by flag, so that a typo is a usage error rather than a refusal from the key
    // store, which names its own fields (`env (org)`, `scopes`).
    for (const flag of ["org", "project", "env"] as const) usageOnRefusal(() => checkSegment(`--${flag}`, values[flag]));
    for (const scope of values.scope) {
      if (!(apiScopes as readonly string[]).includes(scope)) {
        throw new UsageError(`--scope: unknown scope "${scope}"; scopes are ${apiScopes.join(", ")}`);
      }
    }
  }
  if (action === "revoke" && positionals.length !== 1) throw new UsageError("celld keys revoke takes one KEY_ID");
  return {
    action,
    dataDir,
    org: values.org,
    project: values.project,
    env: values.env,
    scopes: values.scope ?? [],
    name: values.name,
    keyId: positionals[0],
    includeRevoked: values.all === true,
  };
}

function usageOnRefusal(check: () => unknown): void {
  try {
    check();
  } catch (error) {
    if (error instanceof ApiError) throw new UsageError(error.message);
    throw error;
  }
}

export function parseDevArgs(argv: string[], cwd: string, processEnv: Readonly<Record<string, string | undefined>> = {}): DevArgs {
  const { values } = parseOptions({
    args: argv,
    options: {
      config: { type: "string", short: "c", multiple: true },
      port: { type: "string" },
      host: { type: "string" },
      data: { type: "string" },
      "api-port": { type: "string" },
      "api-host": { type: "string" },
      "inspector-port": { type: "string" },
      "workers-dev-domain": { type: "string" },
      "max-connections": { type: "string" },
      "api-max-connections": { type: "string" },
      env: { type: "string", short: "e" },
      "test-scheduled": { type: "boolean" },
      watch: { type: "boolean" },
      "log-requests": { type: "boolean" },
      "log-format": { type: "string" },
      "metrics-public": { type: "boolean" },
      "cell-threads": { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  const environment = environmentName(values.env, processEnv);
  const cellThreads = cellThreadsOf(values["cell-threads"], processEnv);
  const { configs, warnings } = devConfigs(values.config ?? [], cwd);
  const { workersPort, apiPort, inspectorPort } = devPorts(values);
  const logFormat = values["log-format"] ?? "text";
  if (!(logFormats as readonly string[]).includes(logFormat)) {
    throw new UsageError(`--log-format must be ${logFormats.join(" or ")}, got "${logFormat}"`);
  }
  if (values["metrics-public"] === true && apiPort === undefined) {
    throw new UsageError("--metrics-public needs --api-port: /metrics is served on the API port");
  }
  const connectionsMax = values["max-connections"] === undefined ? undefined : count("--max-connections", values["max-connections"]);
  const apiConnectionsMax = values["api-max-connections"] === undefined ? undefined : count("--api-max-connections", values["api-max-connections"]);
  if (apiConnectionsMax !== undefined && apiPort === undefined) throw new UsageError("--api-max-connections needs --api-port: without it there is no API");
  return {
    configs,
    port: workersPort,
    workersDevDomain: values["workers-dev-domain"] === undefined ? undefined : domain(values["workers-dev-domain"]),
    connectionsMax,
    apiConnectionsMax,
    host: values.host ?? "127.0.0.1",
    dataDir: resolve(cwd, values.data ?? join(dirname(resolve(cwd, configs[0]!)), ".celld")),
    apiPort,
    apiHost: values["api-host"] ?? "127.0.0.1",
    inspectorPort,
    environment,
    testScheduled: values["test-scheduled"] ?? false,
    watch: values.watch ?? false,
    warnings,
    logRequests: values["log-requests"] ?? false,
    logFormat: logFormat as LogFormat,
    metricsPublic: values["metrics-public"] ?? false,
    cellThreads,
  };
}

/**
 * The configs of `celld dev`: `-c` as the user typed them (so errors name files the way the user
 * did, relative to the working directory), or the one found as wrangler finds it.
 */
function devConfigs(given: string[], cwd: string): { configs: string[]; warnings: string[] } {
  const warnings: string[] = [];
  // The deployment rules would see two Workers with one name and one queue consumed twice, and
  // report both, for what is one slip on the command line.
  const seen = new Map<string, string>();
  for (const config of given) {
    const earlier = seen.get(resolve(cwd, config));
    if (earlier !== undefined) {
      throw new UsageError(`-c ${config} names the same file as -c ${earlier}; each config file is one Worker, so give it once`);
    }
    seen.set(resolve(cwd, config), config);
  }
  if (given.length > 0) return { configs: given, warnings };
  const found = findConfig(cwd);
  if (found === undefined) {
    throw new UsageError(`no config given and none of ${configNames.join(", ")} in ${cwd} or a parent directory; pass -c FILE`);
  }
  if (found.passedOver.length > 0) {
    warnings.push(
      `${dirname(resolve(cwd, found.path))} has ${[basename(found.path), ...found.passedOver].join(", ")}: ` +
        `using ${basename(found.path)} and ignoring ${found.passedOver.join(", ")}, as wrangler would ` +
        `(it prefers ${configNames.join(", then ")}); pass -c to choose`,
    );
  }
  return { configs: [found.path], warnings };
}

/** The ports of `celld dev`, each checked apart from the others: a second listener would fail at start. */
function devPorts(values: { port?: string; "api-port"?: string; "inspector-port"?: string }): {
  workersPort: number;
  apiPort: number | undefined;
  inspectorPort: number | undefined;
} {
  const workersPort = port("--port", values.port ?? "8787");
  const apiPort = values["api-port"] === undefined ? undefined : port("--api-port", values["api-port"]);
  if (apiPort !== undefined && apiPort !== 0 && apiPort === workersPort) {
    throw new UsageError(`--api-port must differ from --port (both ${apiPort}): the Workers and the queues API each need a port of their own`);
  }
  const inspectorPort = values["inspector-port"] === undefined ? undefined : port("--inspector-port", values["inspector-port"]);
  if (inspectorPort !== undefined && inspectorPort !== 0) {
    const taken = inspectorPort === workersPort ? "--port" : inspectorPort === apiPort ? "--api-port" : undefined;
    if (taken !== undefined) {
      throw new UsageError(`--inspector-port must differ from ${taken} (both ${inspectorPort}): the inspector needs a port of its own`);
    }
  }
  return { workersPort, apiPort, inspectorPort };
}

/** wrangler 4's variable for the environment; `--env` wins over it, as in wrangler. */
export const cloudflareEnvVariable = "CLOUDFLARE_ENV";

/**
 * The environment to run: `--env`, else CLOUDFLARE_ENV (empty counts as unset, as a variable
 * cleared with `CLOUDFLARE_ENV=` means to be). An `--env` given empty, or a name that cannot
 * be an `[env.NAME]` table's key and a Worker name's suffix, is refused here rather than found
 * missing in every config.
 */
export function environmentName(flag: string | undefined, processEnv: Readonly<Record<string, string | undefined>>): string | undefined {
  const fromVariable = processEnv[cloudflareEnvVariable];
  const [source, name] =
    flag !== undefined ? ["--env", flag] : fromVariable !== undefined && fromVariable !== "" ? [cloudflareEnvVariable, fromVariable] : [];
  if (name === undefined) return undefined;
  if (name === "") throw new UsageError("--env needs an environment name, got an empty one");
  if (!/^[A-Za-z0-9_-]+$/.test(name)) {
    throw new UsageError(`${source} must be an environment name of letters, digits, "_" and "-", got ${JSON.stringify(name)}`);
  }
  return name;
}

/**
 * parseArgs, with its refusals turned into usage errors a user can act on: the option an unknown
 * one was probably meant to be, and `-c` for a config file given without it (`wrangler dev`
 * takes a script there, so the habit is common).
 */
export function parseOptions<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    // The same options, with their values where parseArgs finds them: the config's type holds.
    const parsed = parseArgs({ ...config, args: negativeValuesJoined(config.args ?? [], config.options ?? {}), tokens: true } as T);
    onceEach((parsed as { tokens?: Token[] }).tokens ?? [], config.options ?? {});
    return parsed;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const message = (error as Error).message;
    if (code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const given = /'([^']+)'/.exec(message)?.[1] ?? "";
      const names = Object.keys(config.options ?? {}).map((name) => `--${name}`);
      const meant = closestKey(given, names);
      throw new UsageError(`unknown option ${given}${meant === undefined ? "" : ` (did you mean ${meant}?)`}`);
    }
    if (code === "ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL") {
      const given = /'([^']+)'/.exec(message)?.[1] ?? "";
      const hint = /\.(toml|jsonc?)$/.test(given) ? `; to use it as the config, pass -c ${given}` : "";
      throw new UsageError(`unexpected argument "${given}"${hint}`);
    }
    if (code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE") {
      // "Option '-e, --env <value>' argument missing" whichever form was typed: both are named.
      const option = /'(-\w, --[\w-]+|--?[\w-]+)/.exec(message)?.[1]?.replace(", ", "/");
      throw new UsageError(option === undefined ? message : `${option} needs a value`);
    }
    throw error;
  }
}

type Token = NonNullable<ReturnType<typeof parseArgs>["tokens"]>[number];

/**
 * A single-valued option given twice with two values is refused: parseArgs keeps the last, so
 * `--env staging ... --env production` would run production with nothing said.
 */
function onceEach(tokens: readonly Token[], options: NonNullable<ParseArgsConfig["options"]>): void {
  const seen = new Map<string, string>();
  for (const token of tokens) {
    if (token.kind !== "option" || options[token.name]?.multiple === true) continue;
    const value = token.value ?? "";
    const earlier = seen.get(token.name);
    if (earlier !== undefined && earlier !== value) {
      const short = options[token.name]?.short;
      const named = short === undefined ? `--${token.name}` : `-${short}/--${token.name}`;
      throw new UsageError(`${named} given twice ("${earlier}", then "${value}"); give it once`);
    }
    seen.set(token.name, value);
  }
}

/**
 * `--port -1` as `--port=-1`: parseArgs reads a value that starts with "-" as the next option,
 * and would say "--port needs a value" where the value is there and out of range.
 */
function negativeValuesJoined(args: readonly string[], options: NonNullable<ParseArgsConfig["options"]>): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    const next = args[i + 1];
    if (arg.startsWith("--") && options[arg.slice(2)]?.type === "string" && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** A connection maximum: its bound from the open-files limit is checked at start, when the limit is read. */
function count(flag: string, text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1) throw new UsageError(`${flag} must be a whole number from 1, got "${text}"`);
  return n;
}

function domain(text: string): string {
  const name = text.toLowerCase().replace(/\.$/, "");
  if (!/^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/.test(name)) {
    throw new UsageError(`--workers-dev-domain must be a domain name such as workers.example.com (no scheme, port or path), got "${text}"`);
  }
  return name;
}

export function port(flag: string, text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n > 65_535) throw new UsageError(`${flag} must be a port number from 0 to 65535, got "${text}"`);
  return n;
}
