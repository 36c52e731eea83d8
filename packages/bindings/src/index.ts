export {
  ProducerHandler,
  nodeProducerHandler,
  type ProducerBinding,
  type ProducerRequest,
  type ProducerReply,
} from "./producer-handler.ts";
export { cloudflareErrors, errorReply, describeCellError, type ProducerErrorCode } from "./cloudflare-errors.ts";
