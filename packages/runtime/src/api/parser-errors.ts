import { STATUS_CODES, type Server, type ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { ApiError } from "../wire/api-error.ts";

/**
 * Answers for requests Node's HTTP parser refuses before a handler sees them. Node's own answers
 * have no body. The one valid input can cause, headers over their bound (a binary-mode
 * CloudEvent carries its attributes in headers), answers JSON naming the bound, as every other
 * refusal does; the rest keep Node's answers, which a "clientError" listener otherwise replaces.
 */
export function answerParserErrors(server: Server, headerBytesMax: number): void {
  server.on("clientError", (error: NodeJS.ErrnoException, socket: Duplex) => {
    // As Node does: never write into an answer already on its way.
    const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
    if (socket.writable && (inFlight === undefined || inFlight === null || !inFlight.headersSent)) {
      socket.write(answerFor(error.code, headerBytesMax));
    }
    socket.destroy(error);
  });
}

function answerFor(code: string | undefined, headerBytesMax: number): Buffer {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return jsonAnswer(
        new ApiError(
          "headers_too_large",
          `the request headers are over ${headerBytesMax} bytes together; a binary-mode CloudEvent carries its attributes in them: send a larger one in structured mode (application/cloudevents+json)`,
          { bound: `at most ${headerBytesMax} bytes of headers` },
        ),
      );
    case "HPE_CHUNK_EXTENSIONS_OVERFLOW":
      return bare(413);
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return bare(408);
    default:
      return bare(400);
  }
}

function bare(status: number): Buffer {
  return Buffer.from(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`, "ascii");
}

function jsonAnswer(error: ApiError): Buffer {
  const body = JSON.stringify(error.toJSON());
  const head = `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`;
  return Buffer.from(head + body, "utf8");
}
