import { resolve } from "node:path";
import { checkEnvName } from "../api/names.ts";
import { defaultWorkerEnv } from "../api/queue-directory.ts";
import { UsageError, parseOptions, port } from "./args.ts";
import { cellThreadsOf } from "./cell-threads.ts";

export interface ServeArgs {
  dataDir: string;
  port: number;
  host: string;
  apiPort: number;
  /** 127.0.0.1 unless `--api-host` says otherwise: deploying is running code on this machine. */
  apiHost: string;
  /** `<worker>.<domain>` reaches that Worker, as `<worker>.localhost` does. */
  workersDevDomain: string | undefined;
  /**
   * The environment (`orgs/{org}/projects/{project}/envs/{env}`) whose queues the deployed Workers
   * bind; only its tokens deploy. Default the one `celld dev`'s Workers use.
   */
  workersEnv: string;
  /** Worker threads the cells run on (`--cell-threads`, CELLD_CELL_THREADS); 0: the main thread. */
  cellThreads: number;
}

export function parseServeArgs(argv: string[], cwd: string, processEnv: Readonly<Record<string, string | undefined>> = {}): ServeArgs {
  const { values } = parseOptions({
    args: argv,
    options: {
      data: { type: "string" },
      port: { type: "string" },
      host: { type: "string" },
      "api-port": { type: "string" },
      "api-host": { type: "string" },
      "workers-dev-domain": { type: "string" },
      "workers-env": { type: "string" },
      "cell-threads": { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });
  const workersPort = port("--port", values.port ?? "8787");
  const apiPort = port("--api-port", values["api-port"] ?? "8788");
  if (apiPort !== 0 && apiPort === workersPort) {
    throw new UsageError(`--api-port must differ from --port (both ${apiPort}): the Workers and the API each need a port of their own`);
  }
  return {
    dataDir: resolve(cwd, values.data ?? ".celld"),
    port: workersPort,
    host: values.host ?? "127.0.0.1",
    apiPort,
    apiHost: values["api-host"] ?? "127.0.0.1",
    workersDevDomain: values["workers-dev-domain"],
    workersEnv: workersEnv(values["workers-env"]),
    cellThreads: cellThreadsOf(values["cell-threads"], processEnv),
  };
}

function workersEnv(value: string | undefined): string {
  if (value === undefined) return defaultWorkerEnv;
  try {
    return checkEnvName("--workers-env", value);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}
