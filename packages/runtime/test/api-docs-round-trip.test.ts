import { execFile, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { apiHarness } from "./api-harness.ts";

const apiDoc = join(import.meta.dirname, "../../../docs/api.md");
const hasTools = ["bash", "curl", "jq"].every((tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0);

/** The first sh block after `after` in docs/api.md. */
function shBlockAfter(after: string): string {
  const text = readFileSync(apiDoc, "utf8");
  const from = text.indexOf(after);
  expect(from, after).toBeGreaterThan(-1);
  const block = /```sh\n([\s\S]*?)```/.exec(text.slice(from));
  expect(block, after).not.toBeNull();
  return block![1]!;
}

// A reader pastes the round trip as it is, with their key and address: it must end in an ack.
test.runIf(hasTools)("docs/api.md's curl round trip, pasted as written, acks the message it leased", async () => {
  const { server, key } = await apiHarness();
  const script = shBlockAfter("A quick round trip with curl:")
    .replace(/^KEY=.*$/m, `KEY=${key()}`)
    .replace(/^API=http:\/\/127\.0\.0\.1:8788\//m, `API=${server.url}/`);
  // Not execFileSync: the server answers on this process's event loop.
  const { stdout } = await promisify(execFile)("bash", ["-c", script], { encoding: "utf8", timeout: 30_000 });
  // curl -s adds no newline between answers: the ack's is what the output ends with.
  expect(stdout.trimEnd()).toMatch(/\{"acked":1,"retried":0,"dead_lettered":0,"stale_leases":\[\]\}$/);
});
