#!/usr/bin/env node
// celld is written in TypeScript and run from source through tsx's loader, so a fresh clone needs
// no build step before `npm start`, and an installed tarball is the same sources.
import { register as registerHooks } from "node:module";
import { register } from "tsx/esm/api";

register();
// Registered after tsx, so consulted first: it only steps in where @celld/* has no node_modules link.
registerHooks("./workspace-packages.mjs", import.meta.url);
await import("../src/cli/main.ts");
