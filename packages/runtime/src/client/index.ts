// The typed client of the native queues API.
export { QueuesClient, type QueuesClientOptions, type WireFormat } from "./client.ts";
export { QueuesApiError } from "./errors.ts";
export type {
  Queue,
  QueueSettings,
  QueueCounts,
  LeaseRef,
  NackRef,
  LeasedMessage,
  LeaseOptions,
  SettleResult,
  DeadLetter,
  EventFilter,
  Subscription,
  Page,
} from "./resources.ts";
export { type ConsumeHandler, type ConsumeOptions, type ConsumeStats, type Consumer } from "./consume.ts";
export { type CloudEvent, type EventInput, type JsonDataParser } from "./events.ts";
