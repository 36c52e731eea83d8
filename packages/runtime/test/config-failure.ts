import { isConfigError, type ConfigError } from "../src/config/index.ts";

/** The ConfigError `run` throws; fails the test if it throws anything else, or nothing. */
export function failure(run: () => unknown): ConfigError {
  try {
    run();
  } catch (error) {
    if (isConfigError(error)) return error;
    throw error;
  }
  throw new Error("expected a ConfigError");
}
