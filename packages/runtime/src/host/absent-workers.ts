import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { supportedCompatibilityDate, type WorkerOptions } from "miniflare";
import { reservedWorkerNamePrefix, type Deployment, type WorkerConfig } from "../config/index.ts";

/**
 * Bindings to Workers the deployment does not contain (config/deployment-rules.ts warns of each)
 * point at one internal Worker of stand-ins (worker-code/absent-worker.worker.ts), so the rest of
 * the deployment starts and a call through such a binding fails at once, naming the missing Worker.
 */

export const absentWorkerName = `${reservedWorkerNamePrefix}absent`;
const entry = fileURLToPath(new URL("../worker-code/absent-worker.worker.ts", import.meta.url));

type ServiceDesignator = NonNullable<WorkerOptions["serviceBindings"]>[string];
type DurableObjectDesignator = NonNullable<WorkerOptions["durableObjects"]>[string];

interface AbsentClass {
  exportName: string;
  className: string;
  worker: string;
  binding: string;
}

export class AbsentWorkers {
  private readonly deployed: ReadonlySet<string>;
  /** By `<binding Worker>\0<binding>`. */
  private readonly classes = new Map<string, AbsentClass>();

  constructor(deployment: Deployment) {
    this.deployed = new Set(deployment.workers.map((w) => w.name));
    for (const worker of deployment.workers) {
      for (const d of worker.durableObjects) {
        if (d.scriptName === undefined || this.deployed.has(d.scriptName)) continue;
        const exportName = `AbsentClass${this.classes.size}`;
        this.classes.set(`${worker.name}\0${d.name}`, { exportName, className: d.className, worker: d.scriptName, binding: d.name });
      }
    }
  }

  /** The service binding `s` of a Worker, as Miniflare takes it: the Worker, or its stand-in. */
  service(s: WorkerConfig["services"][number]): ServiceDesignator {
    if (this.deployed.has(s.service)) return s.entrypoint === undefined ? s.service : { name: s.service, entrypoint: s.entrypoint };
    return { name: absentWorkerName, entrypoint: "AbsentService", props: { worker: s.service, binding: s.binding } };
  }

  /** The stand-in for `worker`'s Durable Object binding `binding`, when its script is absent. */
  durableObject(worker: string, binding: string): DurableObjectDesignator | undefined {
    const absent = this.classes.get(`${worker}\0${binding}`);
    return absent === undefined ? undefined : { className: absent.exportName, scriptName: absentWorkerName };
  }

  /** The stand-ins' Worker, when some binding needs one. */
  async workerOptions(deployment: Deployment): Promise<WorkerOptions | undefined> {
    const servicesAbsent = deployment.workers.some((w) => w.services.some((s) => !this.deployed.has(s.service)));
    if (!servicesAbsent && this.classes.size === 0) return undefined;
    return {
      name: absentWorkerName,
      modules: true,
      script: await this.bundle(),
      compatibilityDate: supportedCompatibilityDate,
      additionalUnboundDurableObjects: [...this.classes.values()].map((c) => ({ className: c.exportName })),
    };
  }

  private async bundle(): Promise<string> {
    const parameters = [...this.classes.values()].map(
      (c) => `export const ${c.exportName} = absentDurableObject(${[c.className, c.worker, c.binding].map((v) => JSON.stringify(v)).join(", ")});`,
    );
    const result = await build({
      stdin: {
        contents: [
          `export { default, AbsentService } from ${JSON.stringify(entry)};`,
          `import { absentDurableObject } from ${JSON.stringify(entry)};`,
          ...parameters,
        ].join("\n"),
        loader: "ts",
        resolveDir: fileURLToPath(new URL(".", import.meta.url)),
      },
      bundle: true,
      write: false,
      format: "esm",
      platform: "neutral",
      target: "es2022",
      external: ["cloudflare:workers"],
      logLevel: "silent",
    });
    const [output] = result.outputFiles;
    if (output === undefined) throw new Error(`esbuild returned no output for ${entry}`);
    return output.text;
  }
}
