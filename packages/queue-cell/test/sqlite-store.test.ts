import { join } from "node:path";
import { SqliteCellStore } from "../src/index.ts";
import { describeStoreConformance } from "./store-conformance.ts";

describeStoreConformance("SQLite", (dir) => new SqliteCellStore(join(dir, "cell.sqlite"), { durability: "full" }));
