import { expect, test } from "vitest";
import { tidyAfterEach } from "./host-harness.ts";

const tidy = tidyAfterEach();

// create-cloudflare writes today's compatibility date and, from 2026-08-04 on, no nodejs_compat
// flag: that date turns Node.js compatibility on by itself on Cloudflare. The pinned workerd is
// older than that date, so celld runs such a Worker on an older date that does not.
const nodeWorker = `
import { Buffer } from "node:buffer";
export default {
  fetch: () => Response.json({ base64: Buffer.from("celld").toString("base64"), process: typeof process }),
};
`;

test("a Worker dated 2026-08-04 or later has Node.js built-ins with no flag, as on Cloudflare, though it runs on an older date", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.jsonc": JSON.stringify({ name: "c3-app", main: "src/index.ts", compatibility_date: "2026-10-06" }),
    "src/index.ts": nodeWorker,
  });
  const h = await tidy.runHost([config], p.dataDir);
  expect(await (await h.fetch("/")).json()).toEqual({ base64: "Y2VsbGQ=", process: "object" });
  const fallback = h.log.lines.find((line) => line.includes("is newer than this workerd supports"));
  expect(fallback).toContain('running Worker "c3-app" with "2026-04-26" instead, and with "nodejs_compat", which "2026-10-06" turns on by itself');
});

test("no_nodejs_compat on such a date keeps Node.js built-ins out, as on Cloudflare, and the refusal names the flag", async () => {
  const p = tidy.project();
  const config = p.write({
    "wrangler.jsonc": JSON.stringify({
      name: "c3-app",
      main: "src/index.ts",
      compatibility_date: "2026-10-06",
      compatibility_flags: ["no_nodejs_compat", "no_nodejs_compat_v2"],
    }),
    "src/index.ts": nodeWorker,
  });
  await expect(tidy.runHost([config], p.dataDir)).rejects.toMatchObject({
    code: "ERR_BUNDLE",
    message: expect.stringContaining(
      `"node:buffer" is a Node.js built-in module; remove "no_nodejs_compat" from compatibility_flags to use it`,
    ),
  });
});
