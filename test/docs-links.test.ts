import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { expect, test } from "vitest";

// Reads files only: no workerd. The docs cross-link by section, and a renamed heading silently
// breaks every link to it, so each `](file.md#anchor)` must name a heading that exists.
const root = resolve(import.meta.dirname, "..");

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    if (name === "node_modules" || name.startsWith(".")) return [];
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith(".md") ? [path] : [];
  });
}

/** Outside fenced code blocks: a link or a heading inside one is an example, not a link. */
function prose(text: string): string[] {
  let fenced = false;
  return text.split("\n").filter((line) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    return !fenced && !/^\s*```/.test(line);
  });
}

/** GitHub's anchors: lower case, punctuation dropped, spaces to dashes, repeats numbered. */
function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of prose(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*$/.exec(line)?.[1];
    if (heading === undefined) continue;
    const slug = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    anchors.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return anchors;
}

test("heading anchors are GitHub's", () => {
  const anchors = headingAnchors("# Named environments: `--env`\n## Local secrets: `.dev.vars` and `.env`\n## A\n## A\n```\n# not a heading\n```\n");
  expect([...anchors]).toEqual(["named-environments---env", "local-secrets-devvars-and-env", "a", "a-1"]);
});

test("every relative link in the docs names a file that exists, and a heading of it that exists", () => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of markdownFiles(root)) {
    for (const line of prose(readFileSync(file, "utf8"))) {
      for (const [, target] of line.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (target === undefined || /^[a-z]+:/.test(target)) continue;
        const [path = "", anchor] = target.split("#");
        const linked = path === "" ? file : resolve(dirname(file), path);
        checked++;
        if (!existsSync(linked)) broken.push(`${relative(root, file)}: ${target}: no such file`);
        else if (anchor !== undefined && linked.endsWith(".md") && !headingAnchors(readFileSync(linked, "utf8")).has(anchor))
          broken.push(`${relative(root, file)}: ${target}: no such heading`);
      }
    }
  }
  expect(checked).toBeGreaterThan(100);
  expect(broken).toEqual([]);
});
