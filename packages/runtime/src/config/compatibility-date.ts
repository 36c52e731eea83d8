import { supportedCompatibilityDate } from "miniflare";
import type { ConfigWarning } from "./issues.ts";

/**
 * A config with no `compatibility_date` (or create-cloudflare's unfilled `<COMPATIBILITY_DATE>`
 * placeholder) runs on the newest date this workerd supports, with a warning naming it, as
 * `wrangler dev` runs on its runtime's date: a project written for wrangler dev must start here too.
 * The date changes behaviour (the default queue content type, Node.js compatibility), so the warning
 * says which one was used and how to pin it.
 */

/** What create-cloudflare's templates hold until the CLI fills them in. */
export const compatibilityDatePlaceholder = "<COMPATIBILITY_DATE>";

/** The date a Worker with none runs on: the newest this workerd knows. */
export const defaultCompatibilityDate: string = supportedCompatibilityDate;

/** Whether `value` stands for "no date given". */
export function isUnsetCompatibilityDate(value: unknown): boolean {
  return value === undefined || value === compatibilityDatePlaceholder;
}

export function unsetCompatibilityDateWarning(file: string, written: unknown): ConfigWarning {
  const what = written === undefined ? "is not set" : `is the template placeholder ${JSON.stringify(written)}`;
  return {
    file,
    path: "compatibility_date",
    message:
      `${what}; running with "${defaultCompatibilityDate}", the newest date this workerd supports (as wrangler dev ` +
      `does); write compatibility_date = "${defaultCompatibilityDate}" to keep it when celld is upgraded`,
  };
}
