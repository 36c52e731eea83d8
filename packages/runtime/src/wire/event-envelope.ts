/**
 * A CloudEvent as client and server hold it: its attributes in order, and its data as it travels
 * (JSON text as its sender wrote it, text, or bytes).
 */
export type AttributeValue = string | number | boolean;
export type Attributes = Record<string, AttributeValue>;

export type Payload =
  | { kind: "none" }
  /** The JSON text as its sender wrote it (whitespace aside): never parsed and written anew. */
  | { kind: "json"; text: string }
  | { kind: "text"; text: string }
  | { kind: "bytes"; bytes: Uint8Array };

export interface EventEnvelope {
  /** specversion, id, source and type first, then the optional attributes, then extensions. */
  attributes: Attributes;
  payload: Payload;
}
