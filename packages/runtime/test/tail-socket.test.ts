import { createServer, type Server } from "node:http";
import { connect, type AddressInfo, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { acceptTailSocket, type TailSocket } from "../src/cloudflare-api/tail-socket.ts";

/**
 * The tail WebSocket as wrangler meets it: sub-protocol trace-v1, a first frame without the mask
 * bit (which `ws` refuses), pings every 10 s that must be answered, a close. Raw frames from a
 * raw socket, so the test sees exactly what goes over the wire.
 */

const servers: Server[] = [];
afterEach(() => servers.splice(0).forEach((s) => s.close()));

async function open(): Promise<{ client: Socket; server: TailSocket; received: () => Buffer }> {
  let tail: TailSocket | undefined;
  const server = createServer();
  servers.push(server);
  server.on("upgrade", (req, socket, head) => (tail = acceptTailSocket(req, socket, head)));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const client = connect((server.address() as AddressInfo).port, "127.0.0.1");
  let data = Buffer.alloc(0);
  client.on("data", (d: Buffer) => (data = Buffer.concat([data, d])));
  client.write(
    "GET /t HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: trace-v1\r\n\r\n",
  );
  await until(() => data.includes("\r\n\r\n"));
  const text = data.toString("latin1");
  expect(text).toMatch(/^HTTP\/1\.1 101 /);
  expect(text).toContain("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
  expect(text).toContain("Sec-WebSocket-Protocol: trace-v1");
  data = data.subarray(data.indexOf("\r\n\r\n") + 4);
  await until(() => tail !== undefined);
  return {
    client,
    server: tail!,
    received: () => {
      const out = data;
      data = Buffer.alloc(0);
      return out;
    },
  };
}

async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(done()).toBe(true);
}

const masked = (opcode: number, payload: Buffer): Buffer => {
  const mask = Buffer.from([1, 2, 3, 4]);
  return Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | payload.length]), mask, payload.map((b, i) => b ^ mask[i % 4]!)]);
};

describe("the tail WebSocket", () => {
  it("takes wrangler's unmasked first frame, answers pings masked or not, sends text, closes", async () => {
    const { client, server, received } = await open();
    client.write(Buffer.concat([Buffer.from([0x81, 15]), Buffer.from('{"debug":false}')]));
    const ping = Buffer.from("wrangler tail ping");
    client.write(Buffer.concat([Buffer.from([0x89, ping.length]), ping]));
    let got = Buffer.alloc(0);
    await until(() => (got = Buffer.concat([got, received()])).length >= ping.length + 2);
    expect(got).toEqual(Buffer.concat([Buffer.from([0x8a, ping.length]), ping]));
    client.write(masked(0x9, Buffer.from("again")));
    got = Buffer.alloc(0);
    await until(() => (got = Buffer.concat([got, received()])).includes(Buffer.from("again")));
    expect(got).toEqual(Buffer.from([0x8a, 5, ...Buffer.from("again")]));

    server.sendText('{"outcome":"ok"}');
    got = Buffer.alloc(0);
    await until(() => (got = Buffer.concat([got, received()])).length >= 18);
    expect(got).toEqual(Buffer.concat([Buffer.from([0x81, 16]), Buffer.from('{"outcome":"ok"}')]));

    client.write(masked(0x8, Buffer.alloc(0)));
    await server.closed;
  });

  it("is closed when the client goes away without a close frame", async () => {
    const { client, server } = await open();
    client.end();
    await server.closed;
  });
});
