/**
 * The source of `describe(error)`, which both handler shims (handler-error-shim.ts for a module
 * Worker, service-worker-shim.ts for a service-worker script) run inside workerd: a thrown value
 * as the author would want to read it. An error's stack, then its causes (an error rethrown with
 * { cause } names what went wrong first), each once; a plain object as JSON, where String() would
 * say only "[object Object]".
 */
export const describeErrorSource = `const describe = (error) => {
  let text = one(error);
  const seen = new Set([error]);
  for (let cause = causeOf(error); cause !== undefined && !seen.has(cause); cause = causeOf(cause)) {
    seen.add(cause);
    text += \`\\nCaused by: \${one(cause)}\`;
  }
  return text;
};
const causeOf = (value) => (value instanceof Error ? value.cause : undefined);
const one = (value) => {
  if (value && typeof value.stack === "string") return value.stack;
  if (value !== null && typeof value === "object" && !(value instanceof Error)) {
    try {
      const json = JSON.stringify(value);
      if (json !== undefined && json !== "{}") return json;
    } catch {
      // A cycle or a BigInt: String() below still names it.
    }
  }
  return String(value);
};`;
