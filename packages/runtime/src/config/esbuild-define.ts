import { transformSync, type TransformFailure } from "esbuild";
import { showValue } from "./issues.ts";

/**
 * Whether esbuild takes `name = value` as a `define`: `name` an identifier or a dotted name
 * (`process.env.MODE`), `value` an identifier, a dotted name or a JS literal (a string keeps its
 * quotes: `"\"prod\""`). esbuild is asked, rather than its rules copied, so that the config is
 * refused at load, with its file and key, for exactly what would fail the bundle.
 */
export function defineProblem(name: string, value: string): string | undefined {
  try {
    transformSync("", { define: { [name]: value }, logLevel: "silent" });
    return undefined;
  } catch (error) {
    const failure = error as Partial<TransformFailure>;
    if (!Array.isArray(failure.errors)) throw error;
    const [first] = failure.errors;
    const esbuild = `(esbuild: ${first?.text ?? String(error)})`;
    return first?.location?.file === "(define name)"
      ? `the name must be an identifier or a dotted name such as process.env.MODE ${esbuild}`
      : `the value must be an identifier, a dotted name or a JS literal, got ${showValue(value)}; a string keeps ` +
          `its quotes, as '"text"' ${esbuild}`;
  }
}
