import { createServer, type AddressInfo, type Server } from "node:net";
import { onTestFinished, expect, test } from "vitest";
import { checkPortFree, PortUnavailableError } from "../src/host/port-check.ts";

async function holdPort(): Promise<number> {
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as AddressInfo).port;
}

test("a taken port is refused with ERR_ADDRESS_IN_USE, naming host and port", async () => {
  const port = await holdPort();
  const refused = await checkPortFree("127.0.0.1", port).catch((error: unknown) => error);
  expect(refused).toBeInstanceOf(PortUnavailableError);
  expect(refused).toMatchObject({ code: "ERR_ADDRESS_IN_USE" });
  expect((refused as Error).message).toMatch(new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: the address is already in use`));
});

test("a free port passes and is left free; port 0 is not checked", async () => {
  const free = createServer();
  await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
  const freePort = (free.address() as AddressInfo).port;
  await new Promise<void>((resolve) => free.close(() => resolve()));
  await expect(checkPortFree("127.0.0.1", freePort)).resolves.toBeUndefined();
  // Still free: the check closed what it opened.
  await expect(checkPortFree("127.0.0.1", freePort)).resolves.toBeUndefined();
  await expect(checkPortFree("127.0.0.1", 0)).resolves.toBeUndefined();
});
