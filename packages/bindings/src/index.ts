export {
  ProducerHandler,
  nodeProducerHandler,
  type ProducerBinding,
  type ProducerRequest,
  type ProducerReply,
} from "./producer-handler.ts";
export { cloudflareErrors, errorReply, describeCellError, type ProducerErrorCode } from "./cloudflare-errors.ts";
export { resolveBatchOutcome, type QueueHandlerResult, type BatchSettlement } from "./batch-outcome.ts";
export { toConsumerMessage, type ConsumerMessage } from "./consumer-message.ts";
export {
  ConsumerDispatcher,
  type ConsumerDispatcherOptions,
  type ConsumerSettings,
  type QueueInvoker,
  type BatchMetadata,
  type BatchReport,
  type DispatcherLog,
} from "./consumer-dispatcher.ts";
