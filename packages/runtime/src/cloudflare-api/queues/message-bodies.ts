import type { LeasedMessage, OutgoingMessage } from "@celld/queue-cell";
import { CloudflareError } from "../cloudflare-errors.ts";
import { queueCodes } from "./queue-lookup.ts";

/**
 * Bodies between Cloudflare's HTTP shape and the cell, which stores them as a Worker's binding
 * does (content type json / text / bytes / v8, the encoded bytes), so a message published over
 * HTTP reaches a Worker consumer decoded, and a Worker's message reaches a pull consumer.
 */
export type ContentType = "json" | "text" | "bytes" | "v8";

const contentTypes: readonly string[] = ["json", "text", "bytes", "v8"];

/**
 * One pushed message. `json` (the default, as Cloudflare's) takes any JSON value; `text` a
 * string; `bytes` and `v8` the bytes in base64 (v8: structured-clone bytes a Worker can read).
 */
export function pushedMessage(body: unknown, contentType: unknown, field: string): Pick<OutgoingMessage, "body" | "contentType"> {
  const type = contentType ?? "json";
  if (typeof type !== "string" || !contentTypes.includes(type)) {
    throw new CloudflareError(400, queueCodes.messageMetadataInvalid, `${field}.content_type must be one of ${contentTypes.join(", ")}, got ${JSON.stringify(contentType)}`);
  }
  if (body === undefined) throw new CloudflareError(400, queueCodes.bodyInvalid, `${field}.body is missing`);
  switch (type as ContentType) {
    case "json":
      return { body: Buffer.from(JSON.stringify(body)), contentType: "json" };
    case "text":
      if (typeof body !== "string") throw new CloudflareError(400, queueCodes.bodyInvalid, `${field}.body must be a string for content_type text`);
      return { body: Buffer.from(body), contentType: "text" };
    default:
      if (typeof body !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(body)) {
        throw new CloudflareError(400, queueCodes.bodyInvalid, `${field}.body must be base64 for content_type ${type}`);
      }
      return { body: Buffer.from(body, "base64"), contentType: type };
  }
}

/**
 * A pulled message's `body` is always a string: text as it is; json, bytes and v8 in base64 of
 * the stored bytes (v8 only a Worker can decode), as Cloudflare answers pull consumers. The
 * content type goes in `metadata["CF-Content-Type"]`.
 */
export function pulledBody(message: LeasedMessage): { body: string; contentType: string } {
  const bytes = Buffer.from(message.body.buffer, message.body.byteOffset, message.body.byteLength);
  const contentType = message.contentType;
  if (contentType === "text") return { body: bytes.toString("utf8"), contentType };
  return { body: bytes.toString("base64"), contentType: contentTypes.includes(contentType) ? contentType : "bytes" };
}
