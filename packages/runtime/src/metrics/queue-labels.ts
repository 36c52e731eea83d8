/** The labels every per-queue series carries. */
export interface QueueLabels {
  /** `orgs/{org}/projects/{project}/envs/{env}`. */
  environment: string;
  /** The queue's short name. */
  queue: string;
}

const apiQueueName = /^(orgs\/[^/]+\/projects\/[^/]+\/envs\/[^/]+)\/queues\/([^/]+)$/;

/**
 * A cell's labels: an API queue's cell is named by its full resource name; a Workers queue's cell
 * by its short name, in the Workers' environment (QueueDirectory's rule, read the other way).
 */
export function queueLabelsOf(cellName: string, workerEnv: string): QueueLabels {
  const match = apiQueueName.exec(cellName);
  if (match !== null) return { environment: match[1]!, queue: match[2]! };
  return { environment: workerEnv, queue: cellName };
}
