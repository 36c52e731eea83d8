import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { ApiKeyInfo } from "../src/api/api-keys.ts";
import { AssetUploads, assetLimits } from "../src/deploy/asset-uploads.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function uploads(): AssetUploads {
  const dir = mkdtempSync(join(tmpdir(), "celld-assets-"));
  dirs.push(dir);
  return new AssetUploads(dir);
}

const key: ApiKeyInfo = { id: "ck_test", name: "t", env: "orgs/a/projects/p/envs/e", scopes: ["workers:write"], createdAt: 0, revokedAt: null };
const hash = (n: number) => n.toString(16).padStart(32, "0");

/** One bucket's body as wrangler sends it: each part named by its hash, the file base64. */
async function bucketBody(files: Record<string, string>): Promise<{ body: Uint8Array; contentType: string }> {
  const form = new FormData();
  for (const [h, text] of Object.entries(files)) form.append(h, new File([Buffer.from(text).toString("base64")], h, { type: "text/plain" }), h);
  const request = new Request("http://x/", { method: "POST", body: form });
  return { body: new Uint8Array(await request.arrayBuffer()), contentType: request.headers.get("content-type")! };
}

describe("AssetUploads", () => {
  it("asks for the missing files in buckets, answers the completion token after the last, and asks nothing twice", async () => {
    const store = uploads();
    const manifest = Object.fromEntries(Array.from({ length: assetLimits.bucketFilesMax + 1 }, (_, i) => [`/f${i}.txt`, { hash: hash(i), size: 1 }]));
    const session = store.openSession("site", key, { manifest });
    expect(session.buckets.map((b) => b.length)).toEqual([assetLimits.bucketFilesMax, 1]);
    expect(store.sessionKey(`Bearer ${session.jwt}`)).toBe(key);
    const first = await bucketBody(Object.fromEntries(session.buckets[0]!.map((h) => [h, `file ${h}`])));
    expect(await store.upload(`Bearer ${session.jwt}`, first.body, first.contentType)).toEqual({});
    const last = await bucketBody(Object.fromEntries(session.buckets[1]!.map((h) => [h, `file ${h}`])));
    const done = await store.upload(`Bearer ${session.jwt}`, last.body, last.contentType);
    expect(readFileSync(store.blobPath(hash(3)), "utf8")).toBe(`file ${hash(3)}`);
    expect(store.takeCompletion("site", done.jwt)).toEqual(manifest);
    // Taken once; and a manifest of known files needs no upload: its token completes at once.
    expect(() => store.takeCompletion("site", done.jwt)).toThrow(/not a completion token/);
    const again = store.openSession("site", key, { manifest });
    expect(again.buckets).toEqual([]);
    expect(() => store.takeCompletion("other", again.jwt)).toThrow(/not a completion token/);
  });

  it("refuses a bad manifest by its field, a part it did not ask for, and a token of no session", async () => {
    const store = uploads();
    const refused = (manifest: unknown) => () => store.openSession("site", key, { manifest });
    expect(refused([])).toThrow(/manifest must be an object/);
    expect(refused({ "a.txt": { hash: hash(1), size: 1 } })).toThrow(/manifest path "a.txt" must start with \//);
    expect(refused({ "/a/../../b": { hash: hash(1), size: 1 } })).toThrow(/must start with \/ and hold no \. or \.\. segment/);
    expect(refused({ "/a": { hash: "xyz", size: 1 } })).toThrow(/manifest\["\/a"\]\.hash must be 32 hex digits/);
    expect(refused({ "/a": { hash: hash(1), size: assetLimits.fileBytesMax + 1 } })).toThrow(/size must be an integer from 0 to 26214400/);
    const session = store.openSession("site", key, { manifest: { "/a": { hash: hash(1), size: 1 } } });
    const stray = await bucketBody({ [hash(2)]: "x" });
    await expect(store.upload(`Bearer ${session.jwt}`, stray.body, stray.contentType)).rejects.toMatchObject({ code: 10021, message: expect.stringMatching(/not a hash this upload session asked for/) });
    await expect(store.upload("Bearer nope", stray.body, stray.contentType)).rejects.toThrow(/names no open upload session/);
    expect(() => store.sessionKey(undefined)).toThrow(/names no open upload session/);
  });
});
