export { loadDeployment, parseDeployment, type ConfigSource, type ParseOptions } from "./load.ts";
export { devVarsFileNames, type ReadDevVarsFile } from "./dev-vars.ts";
export { ConfigError, isConfigError, formatIssue, type ConfigIssue, type ConfigWarning } from "./issues.ts";
export { formatWarnings } from "./key-warnings.ts";
export type { Deployment, WorkerConfig, ProducerConfig, ConsumerConfig, AssetsConfig } from "./model.ts";
export { reservedWorkerNamePrefix } from "./deployment-rules.ts";
