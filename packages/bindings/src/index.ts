export {
  ProducerHandler,
  nodeProducerHandler,
  type ProducerBinding,
  type ProducerRequest,
  type ProducerReply,
} from "./producer-handler.ts";
export { SendStageTimer, type SendStages } from "./send-stages.ts";
export { cloudflareErrors, errorReply, describeCellError, type ProducerErrorCode } from "./cloudflare-errors.ts";
export { resolveBatchOutcome, type QueueHandlerResult, type BatchSettlement } from "./batch-outcome.ts";
export { toConsumerMessage, type ConsumerMessage, type BatchMessage, type BatchMetadata } from "./consumer-message.ts";
export { encodeBatch, BatchFrameError, dispatchKeyBinding, dispatchKeyHeader, type BatchFrame } from "./batch-wire.ts";
export { queueDispatchWorkerEntry } from "./queue-dispatch-entry.ts";
export {
  BatchNotDeliveredError,
  ConsumerDispatcher,
  type ConsumerDispatcherOptions,
  type ConsumerSettings,
  type QueueInvoker,
  type BatchReport,
  type DispatcherLog,
} from "./consumer-dispatcher.ts";
export {
  ConsumerFailureLog,
  consumerHandlerWords,
  fateWaitForErrorMs,
  repeatedFailureWindowMs,
  type BatchFate,
  type ConsumerKind,
} from "./consumer-failure-log.ts";
export { InFlightBudget } from "./in-flight-budget.ts";
