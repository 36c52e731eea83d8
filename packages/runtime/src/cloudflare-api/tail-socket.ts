import { createHash } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Duplex } from "node:stream";

/**
 * The server side of the WebSocket `wrangler tail` opens (RFC 6455, the little it uses): the
 * handshake with sub-protocol `trace-v1`, text frames out, and in: pings answered with pongs, a
 * close answered and ended; text frames (wrangler's `{"debug":false}`) read and dropped. Client
 * frames are taken masked or not: wrangler sends its first frame unmasked, which stricter servers
 * (the `ws` library) refuse with 1002.
 */
export interface TailSocket {
  sendText(text: string): void;
  close(): void;
  readonly closed: Promise<void>;
}

const guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
/** A client frame larger than this is not wrangler's: the connection is dropped. */
const clientFrameBytesMax = 64 * 1024;

export function acceptTailSocket(req: IncomingMessage, socket: Duplex, head: Buffer): TailSocket | undefined {
  const key = req.headers["sec-websocket-key"];
  if (typeof key !== "string" || req.headers.upgrade?.toLowerCase() !== "websocket") {
    socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
    return undefined;
  }
  const accept = createHash("sha1").update(key + guid).digest("base64");
  const protocols = String(req.headers["sec-websocket-protocol"] ?? "").split(",").map((p) => p.trim());
  socket.write(
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      `Sec-WebSocket-Accept: ${accept}\r\n${protocols.includes("trace-v1") ? "Sec-WebSocket-Protocol: trace-v1\r\n" : ""}\r\n`,
  );
  let buffered = head;
  let open = true;
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  const end = (): void => {
    if (!open) return;
    open = false;
    socket.end(frame(0x8, Buffer.alloc(0)));
  };
  socket.on("error", () => socket.destroy());
  // The HTTP server's sockets are half-open: a client gone (wrangler stopped) is ended here too.
  socket.on("end", () => {
    open = false;
    socket.end();
  });
  socket.on("data", (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    for (;;) {
      const read = readFrame(buffered);
      if (read === undefined) break;
      if (read === "too-large") {
        socket.destroy();
        return;
      }
      buffered = buffered.subarray(read.length);
      if (read.opcode === 0x9 && open) socket.write(frame(0xa, read.payload));
      else if (read.opcode === 0x8) end();
    }
  });
  return {
    sendText: (text) => {
      if (open) socket.write(frame(0x1, Buffer.from(text)));
    },
    close: end,
    closed,
  };
}

function frame(opcode: number, payload: Buffer): Buffer {
  const n = payload.length;
  const header = n < 126 ? Buffer.from([0x80 | opcode, n]) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
  if (n >= 126) {
    header[0] = 0x80 | opcode;
    if (n < 65536) {
      header[1] = 126;
      header.writeUInt16BE(n, 2);
    } else {
      header[1] = 127;
      header.writeBigUInt64BE(BigInt(n), 2);
    }
  }
  return Buffer.concat([header, payload]);
}

function readFrame(data: Buffer): { opcode: number; payload: Buffer; length: number } | "too-large" | undefined {
  if (data.length < 2) return undefined;
  const opcode = data[0]! & 0x0f;
  const masked = (data[1]! & 0x80) !== 0;
  let length = data[1]! & 0x7f;
  let offset = 2;
  if (length === 126) {
    if (data.length < 4) return undefined;
    length = data.readUInt16BE(2);
    offset = 4;
  } else if (length === 127) {
    if (data.length < 10) return undefined;
    const big = data.readBigUInt64BE(2);
    if (big > BigInt(clientFrameBytesMax)) return "too-large";
    length = Number(big);
    offset = 10;
  }
  if (length > clientFrameBytesMax) return "too-large";
  const maskBytes = masked ? 4 : 0;
  if (data.length < offset + maskBytes + length) return undefined;
  const payload = Buffer.from(data.subarray(offset + maskBytes, offset + maskBytes + length));
  if (masked) {
    const mask = data.subarray(offset, offset + 4);
    for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i % 4]!;
  }
  return { opcode, payload, length: offset + maskBytes + length };
}
