import { connect, type Socket } from "node:net";
import { expect, test } from "vitest";
import { ManualClock } from "@celld/queue-cell";
import { apiHarness } from "./api-harness.ts";

async function open(url: string): Promise<Socket> {
  const { port } = new URL(url);
  const socket = connect(Number(port), "127.0.0.1");
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  return socket;
}

const closed = (socket: Socket): Promise<void> => new Promise((resolve) => (socket.readyState === "closed" ? resolve() : socket.once("close", () => resolve())));

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 600 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
}

test("the API holds its connections to its maximum, makes room for a caller, and closes silent ones", async () => {
  const lines: string[] = [];
  const api = await apiHarness({ connectionsMax: 3, timeouts: { silentConnectionMs: 5_000 }, onConnectionsClosed: (line) => lines.push(line) });
  const clock = api.clock as ManualClock;
  const flood = await Promise.all(Array.from({ length: 6 }, () => open(api.server.url)));
  await until(() => api.server.connections.accepted === 6);
  expect(api.server.connections).toMatchObject({ open: 3, evicted: 3, refused: 0 });
  // A caller on a new connection takes the place of a silent one, and is answered.
  expect((await api.call("GET", api.queuePath("q"))).status).toBe(404);
  await Promise.all(flood.slice(0, 4).map(closed));
  expect(lines[0]).toMatch(/^--api-port: closed 1 silent connection\(s\) to make room for new ones \(maximum 3 open\)/);
  // The two silent ones left go once the timeout has passed (the sweep runs on a timer).
  clock.advance(5_000);
  await Promise.all(flood.slice(4).map(closed));
  expect(api.server.connections.idleClosed).toBe(2);
});
