import { ApiError, createApiKey, envName, formatApiKeyTable, listApiKeys, revokeApiKey } from "../api/index.ts";
import { DataDirUnusableError, dataDirUnusable } from "../host/data-dir-lock.ts";
import type { KeysArgs } from "./args.ts";
import { exitStatus } from "./exit-status.ts";

/** `celld keys`: API keys for the native queues API. A new key's secret is shown once only. */
export function keys(args: KeysArgs): number {
  try {
    return run(args);
  } catch (error) {
    // A value the store refuses (a --name too long) is the caller's to fix, though it carries a
    // code like a file system error does; it must not be reported as the directory's failure.
    if (error instanceof ApiError) throw error;
    // A data directory whose key store cannot be written or opened (a full disk, a read-only file
    // system) is the operator's to fix, as with `celld dev`: one line naming it and the cause.
    const unusable = dataDirUnusable(args.dataDir, `${args.action === "list" ? "reading" : "writing"} api/keys.sqlite`, error);
    if (!(unusable instanceof DataDirUnusableError)) throw error;
    console.error(`celld: ${unusable.message}`);
    return exitStatus.failed;
  }
}

function run(args: KeysArgs): number {
  switch (args.action) {
    case "create": {
      const created = createApiKey(args.dataDir, {
        env: envName(args.org!, args.project!, args.env!),
        scopes: args.scopes,
        ...(args.name === undefined ? {} : { name: args.name }),
      });
      console.log(`created key ${created.info.id} for ${created.info.env} (${created.info.scopes.join(", ")})`);
      console.log("the key (shown once; only its hash is stored):");
      console.log(created.key);
      return exitStatus.ok;
    }
    case "list":
      console.log(formatApiKeyTable(listApiKeys(args.dataDir, { includeRevoked: args.includeRevoked })));
      return exitStatus.ok;
    case "revoke": {
      const revoked = revokeApiKey(args.dataDir, args.keyId!);
      if (revoked === undefined) {
        console.error(`celld: no key with id "${args.keyId}"`);
        return exitStatus.failed;
      }
      console.log(`revoked key ${revoked.id}`);
      return exitStatus.ok;
    }
  }
}
