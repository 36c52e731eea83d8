import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { systemClock, type Clock } from "@celld/queue-cell";
import { replaceFile } from "./atomic-file.ts";
import { DeployError } from "./deploy-errors.ts";

export interface R2Bucket {
  name: string;
  createdOn: string;
}

/** Cloudflare's rule for a bucket name: 3 to 63 lowercase letters, digits and dashes, not at either end. */
const bucketNamePattern = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;

/**
 * The R2 buckets of a `celld serve` host, by name (`<dataDir>/deploy/r2-buckets.json`, replaced
 * whole). A bucket's objects live in workerd's storage under the data directory, made on first
 * use; this list is what `wrangler deploy` asks about before it uploads a Worker with an R2 binding
 * (and creates the bucket, as on Cloudflare, when it is missing). A bucket a deployed Worker binds
 * counts as created, which is how buckets made before this list existed are found.
 */
export class R2BucketList {
  private readonly path: string;

  constructor(
    dataDir: string,
    private readonly boundByWorkers: () => Iterable<string>,
    private readonly clock: Clock = systemClock,
  ) {
    const dir = join(dataDir, "deploy");
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, "r2-buckets.json");
  }

  list(): R2Bucket[] {
    const created = this.created();
    for (const name of this.boundByWorkers()) {
      if (!created.some((b) => b.name === name)) created.push({ name, createdOn: new Date(0).toISOString() });
    }
    return created.sort((a, b) => (a.name < b.name ? -1 : 1));
  }

  get(name: string): R2Bucket | undefined {
    return this.list().find((b) => b.name === name);
  }

  create(name: string): R2Bucket {
    if (!bucketNamePattern.test(name)) {
      throw new DeployError("invalid_request", `name must be 3 to 63 lowercase letters, digits and dashes, not starting or ending with a dash; got ${JSON.stringify(name)}`);
    }
    if (this.get(name) !== undefined) throw new DeployError("conflict", `The bucket you tried to create already exists: ${name}`);
    const bucket = { name, createdOn: new Date(this.clock.now()).toISOString() };
    replaceFile(this.path, JSON.stringify([...this.created(), bucket], null, 2));
    return bucket;
  }

  private created(): R2Bucket[] {
    return existsSync(this.path) ? (JSON.parse(readFileSync(this.path, "utf8")) as R2Bucket[]) : [];
  }
}
