// A cell thread's entry. celld runs from its TypeScript sources, and a worker thread inherits no
// loader registered with module.register (celld's bin, vitest): tsx is registered here, in the
// thread, before its TypeScript program is imported. The Worker is started without the parent's
// execArgv, so a `node --import tsx` parent does not register it twice.
import { register } from "tsx/esm/api";

register();
await import("./cell-thread.ts");
