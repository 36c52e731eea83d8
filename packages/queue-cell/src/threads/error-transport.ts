import { BackgroundWorkError, CellError, type CellErrorCode, type StorageFailure } from "../errors.ts";

/**
 * An error as it crosses between a cell thread and the main thread: plain data a structured clone
 * keeps, rebuilt on the other side as the same class, so that a caller cannot tell a remote cell's
 * refusal from a local one's (the runtime maps CellError codes to statuses, and isCellError and
 * instanceof must hold).
 */
export type ErrorData =
  | {
      kind: "cell";
      code: CellErrorCode;
      message: string;
      stack: string | undefined;
      field: string | undefined;
      value: unknown;
      bound: string | undefined;
      storage: StorageFailure | undefined;
      cause: ErrorData | undefined;
    }
  | { kind: "background"; queue: string; work: string; message: string; stack: string | undefined; cause: ErrorData | undefined }
  | { kind: "other"; name: string; message: string; stack: string | undefined; cause: ErrorData | undefined };

/** Causes are followed this deep; a longer chain is cut there. */
const causeDepthMax = 4;

const builtinErrors: Record<string, new (message: string) => Error> = {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
};

export function toErrorData(error: unknown, depth = 0): ErrorData {
  const cause = depth < causeDepthMax && error instanceof Error && error.cause !== undefined ? toErrorData(error.cause, depth + 1) : undefined;
  if (error instanceof CellError) {
    return {
      kind: "cell",
      code: error.code,
      message: error.message,
      stack: error.stack,
      field: error.field,
      value: cloneable(error.value),
      bound: error.bound,
      storage: error.storage,
      cause,
    };
  }
  if (error instanceof BackgroundWorkError) {
    return { kind: "background", queue: error.queue, work: error.work, message: error.message, stack: error.stack, cause };
  }
  if (error instanceof Error) return { kind: "other", name: error.name, message: error.message, stack: error.stack, cause };
  return { kind: "other", name: "Error", message: String(error), stack: undefined, cause: undefined };
}

export function fromErrorData(data: ErrorData): Error {
  const cause = data.cause === undefined ? undefined : fromErrorData(data.cause);
  let error: Error;
  switch (data.kind) {
    case "cell":
      error = new CellError(data.code, data.message, { field: data.field, value: data.value, bound: data.bound, storage: data.storage, cause });
      break;
    case "background":
      // Its constructor words the message from its parts; the thread's words are kept as they were.
      error = new BackgroundWorkError(data.queue, data.work, "", cause);
      error.message = data.message;
      break;
    default: {
      const Builtin = builtinErrors[data.name];
      error = Builtin === undefined ? new Error(data.message) : new Builtin(data.message);
      if (Builtin === undefined) error.name = data.name;
      if (cause !== undefined) error.cause = cause;
    }
  }
  // The thread's stack: where the refusal was raised, which the main thread's would not show.
  if (data.stack !== undefined) error.stack = data.stack;
  return error;
}

/** A refused input value as the other side can receive it: a structured clone, or its words. */
function cloneable(value: unknown): unknown {
  if (value === undefined || value === null || typeof value !== "object") return typeof value === "function" || typeof value === "symbol" ? String(value) : value;
  try {
    return structuredClone(value);
  } catch {
    return String(value);
  }
}
