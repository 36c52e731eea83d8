import { limits } from "@celld/queue-cell/limits";
import { apiLimits } from "./api-limits.ts";
import { ApiError } from "../wire/api-error.ts";
import type { ProtoTypeName } from "../wire/proto-codec.ts";

/**
 * The request types' message-typed fields, walked on the wire before protobufjs decodes a body, so
 * that a body past a count's bound costs as many fields as the bound, not the whole body:
 * protobufjs builds every item first (a 1 MB SendRequest of 500,000 empty events took 0.4 to 0.8 s
 * of the event loop before the 100-event bound refused it). Errors are those the decoded checks
 * give. Every message-typed field is walked, counted or not, so that each must end where its
 * length says (see readProtoBounds).
 */
interface MessageField {
  /** The field's number in queues.proto (length-delimited on the wire). */
  number: number;
  /** Its fields that are messages in turn. */
  fields: readonly MessageField[];
  /** A repeated field's bound, and the error for more than it; `path` names the message holding it. */
  max?: number;
  refuse?: (path: string) => ApiError;
  /** How an item is named in the paths of its own fields' errors. */
  item?: (path: string, index: number) => string;
}

const eventsBound = `1 to ${limits.batchMessagesMax} events`;
const refsBound = `1 to ${limits.leaseMessagesMax} messages`;

/** google.protobuf.Timestamp: two numbers. */
const timestamp: readonly MessageField[] = [];
/** A map entry: key (1), and the CloudEventAttributeValue (2) with its timestamp (7). */
const attributeEntry: readonly MessageField[] = [{ number: 2, fields: [{ number: 7, fields: timestamp }] }];

/**
 * The attributes map holds the optional attributes (datacontenttype, dataschema, subject, time)
 * and the extensions; more entries than that many names cannot all be allowed.
 */
const optionalAttributes = 4;
const attributes: MessageField = {
  number: 5,
  fields: attributeEntry,
  max: optionalAttributes + apiLimits.eventExtensionsMax,
  refuse: (path) =>
    new ApiError("out_of_range", `${path} has more than ${apiLimits.eventExtensionsMax} extension attributes`, {
      field: path,
      bound: `at most ${apiLimits.eventExtensionsMax} extension attributes`,
    }),
};

const messages: MessageField = {
  number: 1,
  fields: [],
  max: limits.leaseMessagesMax,
  refuse: () => tooMany("messages", refsBound, limits.leaseMessagesMax),
};

const bounds: Record<ProtoTypeName, readonly MessageField[]> = {
  SendRequest: [
    {
      number: 1,
      fields: [attributes],
      max: limits.batchMessagesMax,
      refuse: () => tooMany("events", eventsBound, limits.batchMessagesMax),
      item: (_path, i) => `events[${i}]`,
    },
  ],
  AckRequest: [messages],
  NackRequest: [messages],
  LeaseRequest: [],
  SendResponse: [],
  LeaseResponse: [],
  SettleResponse: [],
};

/** checkArray's words, for a count the wire reading stopped before it knew whole. */
function tooMany(field: string, bound: string, max: number): ApiError {
  return new ApiError("out_of_range", `${field} must hold ${bound}, got more than ${max}`, { field, bound });
}

/** Refuses a `type` body that holds more items in a repeated field than its bound (readProtoBounds). */
export function checkProtoBounds(type: ProtoTypeName, bytes: Uint8Array): void {
  const { refusal } = readProtoBounds(type, bytes);
  if (refusal !== undefined) throw refusal;
}

/**
 * Walks a `type` body's fields, reading no further than one item past a repeated field's bound:
 * the refusal, if any, and the fields read (the work, which tests count). Bytes that are not a
 * valid message are refused here, in the decoder's words, rather than handed to it: the walk then
 * never needs to agree with protobufjs on how to read a broken body, in which items could hide.
 */
export function readProtoBounds(type: ProtoTypeName, bytes: Uint8Array): { refusal: ApiError | undefined; fieldsRead: number } {
  const wire = new WireReader(bytes);
  try {
    scan(wire, bytes.byteLength, bounds[type], "");
  } catch (error) {
    if (error instanceof ApiError) return { refusal: error, fieldsRead: wire.fieldsRead };
    if (!(error instanceof MalformedWire)) throw error;
    return { refusal: notAMessage(type), fieldsRead: wire.fieldsRead };
  }
  return { refusal: undefined, fieldsRead: wire.fieldsRead };
}

/** The decoder's refusal (server.ts), in the same words. */
export function notAMessage(type: ProtoTypeName): ApiError {
  return new ApiError("malformed_body", `the request body is not a valid protobuf ${type} message`);
}

function scan(wire: WireReader, end: number, fields: readonly MessageField[], path: string): void {
  const counts = new Array<number>(fields.length).fill(0);
  while (wire.pos < end) {
    const tag = wire.varint();
    wire.fieldsRead += 1;
    const number = Math.floor(tag / 8);
    const wireType = tag % 8;
    const at = fields.findIndex((f) => f.number === number);
    const field = fields[at];
    if (field === undefined || wireType !== 2) {
      wire.skip(wireType, number);
      continue;
    }
    const length = wire.varint();
    const itemEnd = wire.pos + length;
    if (itemEnd > end) throw new MalformedWire();
    const index = counts[at]!;
    counts[at] = index + 1;
    if (field.max !== undefined && index + 1 > field.max) throw field.refuse!(path);
    scan(wire, itemEnd, field.fields, field.item?.(path, index) ?? path);
  }
  // A field that ran past the end of the message holding it.
  if (wire.pos !== end) throw new MalformedWire();
}

class MalformedWire extends Error {}

/** Just enough of the protobuf wire format to walk fields without building anything. */
class WireReader {
  pos = 0;
  fieldsRead = 0;

  constructor(private readonly bytes: Uint8Array) {}

  varint(): number {
    let value = 0;
    for (let shift = 0; shift < 64; shift += 7) {
      if (this.pos >= this.bytes.byteLength) throw new MalformedWire();
      const byte = this.bytes[this.pos++]!;
      // Past 2^53 the value is wrong, which no length or tag within a 1 MB body can be.
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
    throw new MalformedWire();
  }

  /** Skips the value of a field whose tag was just read; a group is skipped to its end tag. */
  skip(wireType: number, number: number, depth = 0): void {
    switch (wireType) {
      case 0:
        this.varint();
        return;
      case 1:
        this.advance(8);
        return;
      case 2:
        this.advance(this.varint());
        return;
      case 5:
        this.advance(4);
        return;
      case 3: {
        if (depth > 32) throw new MalformedWire();
        for (;;) {
          const tag = this.varint();
          this.fieldsRead += 1;
          if (tag % 8 === 4) {
            if (Math.floor(tag / 8) !== number) throw new MalformedWire();
            return;
          }
          this.skip(tag % 8, Math.floor(tag / 8), depth + 1);
        }
      }
      default:
        throw new MalformedWire();
    }
  }

  private advance(n: number): void {
    if (this.pos + n > this.bytes.byteLength) throw new MalformedWire();
    this.pos += n;
  }
}
