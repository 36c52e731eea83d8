// The celld host: what the CLI runs, for programs that embed it. The native API and its client
// have their own entry points: @celld/runtime/api and @celld/runtime/client.
export { startHost, type Host, type HostOptions } from "./host/host.ts";
export { RuntimeStartError } from "./workerd/runtime-start.ts";
export { consoleHostLog, MemoryHostLog, type HostLog } from "./host/host-log.ts";
export type { HostPlugin, PluginStartContext } from "./plugins/host-plugin.ts";
export {
  loadDeployment,
  parseDeployment,
  ConfigError,
  isConfigError,
  formatIssue,
  formatWarnings,
  type Deployment,
  type WorkerConfig,
  type ProducerConfig,
  type ConsumerConfig,
  type ConfigIssue,
  type ConfigWarning,
} from "./config/index.ts";
export { bundleWorker, BundleError, isBundleError, type BundleOptions } from "./bundle/bundle.ts";
