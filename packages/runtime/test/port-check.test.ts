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

test("a free port passes and is left free, and so does port 0 on a local address", async () => {
  const free = createServer();
  await new Promise<void>((resolve) => free.listen(0, "127.0.0.1", resolve));
  const freePort = (free.address() as AddressInfo).port;
  await new Promise<void>((resolve) => free.close(() => resolve()));
  await expect(checkPortFree("127.0.0.1", freePort)).resolves.toBeUndefined();
  // Still free: the check closed what it opened.
  await expect(checkPortFree("127.0.0.1", freePort)).resolves.toBeUndefined();
  await expect(checkPortFree("127.0.0.1", 0)).resolves.toBeUndefined();
});

test("a host that no interface has, or a name that does not resolve, is refused naming --host, with port 0 too", async () => {
  // 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine.
  for (const port of [0, 8787]) {
    const refused = await checkPortFree("192.0.2.1", port).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(PortUnavailableError);
    expect((refused as Error).message).toBe(
      `cannot listen on 192.0.2.1:${port}: no network interface of this machine has the address 192.0.2.1 (EADDRNOTAVAIL); pass another --host, such as 127.0.0.1 or 0.0.0.0`,
    );
  }
  // .invalid never resolves (RFC 2606); without DNS at all the lookup fails with EAI_AGAIN instead.
  const unresolved = await checkPortFree("nosuchhost.invalid", 0).catch((error: unknown) => error);
  expect(unresolved).toBeInstanceOf(PortUnavailableError);
  expect((unresolved as Error).message).toMatch(
    /^cannot listen on nosuchhost\.invalid:0: the host name "nosuchhost\.invalid" does not resolve \((ENOTFOUND|EAI_AGAIN)\); pass another --host$/,
  );
});
