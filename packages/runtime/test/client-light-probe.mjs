// Run by client-light.test.ts in a process of its own: imports the module named on the command
// line and prints which native modules (process.dlopen) and which better-sqlite3 files (the CJS
// module cache) that import loaded.
import { createRequire } from "node:module";

const native = [];
const dlopen = process.dlopen;
process.dlopen = function (module, filename, ...rest) {
  native.push(filename);
  return dlopen.call(this, module, filename, ...rest);
};
const loaded = await import(process.argv[2]);
const cached = Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes("better-sqlite3"));
console.log(JSON.stringify({ exports: Object.keys(loaded), native, cached }));
