#!/usr/bin/env node
// celld is written in TypeScript and run from source through tsx's loader, so a fresh clone needs
// no build step before `npm start`.
import { register } from "tsx/esm/api";

register();
await import("../src/cli/main.ts");
