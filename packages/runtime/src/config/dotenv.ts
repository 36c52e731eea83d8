/**
 * The dotenv syntax wrangler reads `.dev.vars` and `.env` with (the `dotenv` package's `parse`).
 * celld adds no dependency for it, so this is a small re-implementation that gives every line
 * dotenv reads the value dotenv gives it, quirks included (an unquoted `#` starts a comment even
 * without a space before it; `\"` inside double quotes stays as written).
 *
 * It is stricter than dotenv in one way: a line dotenv would silently skip (no `=`, a name with a
 * space in it) or read with its quotes kept because they never close, is an error naming its line,
 * so a typo shows up at start instead of as a secret missing at run time.
 *
 * These files hold secrets: no message here ever contains a value or the text of a bad line.
 */

export interface DotenvEntry {
  name: string;
  value: string;
  /** 1-based line the entry starts on. */
  line: number;
}

export interface DotenvError {
  line: number;
  message: string;
}

export type ParsedDotenv = { ok: true; entries: DotenvEntry[] } | { ok: false; errors: DotenvError[] };

// `[^\S\n]` is whitespace within a line. dotenv's name characters are `\w`, `.` and `-`, and it
// takes `NAME: value` (colon, then at least one space) as well as `NAME=value`.
const assignment = /^[^\S\n]*(?:export[^\S\n]+)?([\w.-]+)(?:[^\S\n]*=|:[^\S\n]+)[^\S\n]*/;
const afterClosingQuote = /^[^\S\n]*(?:#.*)?$/;
const quoteChars = new Set(["'", '"', "`"]);

export function parseDotenv(source: string): ParsedDotenv {
  const text = source.replace(/^\uFEFF/, "").replace(/\r\n?/g, "\n");
  const entries: DotenvEntry[] = [];
  const errors: DotenvError[] = [];
  let pos = 0;
  let line = 1;
  while (pos <= text.length) {
    const end = lineEnd(text, pos);
    const row = text.slice(pos, end);
    const next = (to: number): void => {
      line += countNewlines(text, pos, to) + 1;
      pos = to + 1;
    };
    const trimmed = row.trimStart();
    if (trimmed === "" || trimmed.startsWith("#")) {
      next(end);
      continue;
    }
    const head = assignment.exec(row);
    if (head === null) {
      errors.push({ line, message: whyNotAnAssignment(trimmed) });
      next(end);
      continue;
    }
    const name = head[1]!;
    const rest = row.slice(head[0].length);
    const quote = rest[0];
    if (quote === undefined || !quoteChars.has(quote)) {
      entries.push({ name, value: unquoted(rest), line });
      next(end);
      continue;
    }
    const quoted = readQuoted(text, pos + head[0].length, quote);
    if ("value" in quoted) {
      entries.push({ name, value: quoted.value, line });
      next(lineEnd(text, quoted.close));
      continue;
    }
    // dotenv then reads the line as unquoted; it still strips a pair of quotes around the whole
    // of what it read, which is how `KEY="{"a":"b"}"` works. Anything else keeps a stray quote.
    const fallback = unquoted(rest);
    if (fallback.length >= 2 && fallback.endsWith(quote)) {
      entries.push({ name, value: unescape(fallback.slice(1, -1), quote), line });
    } else {
      const what = quote === "`" ? "back-quoted" : quote === '"' ? "double-quoted" : "single-quoted";
      // Where a quote that could close the value is, said as such: "not closed" would send the
      // reader looking for a missing quote when the trouble is what follows it.
      const problem =
        quoted.stray === undefined
          ? "is not closed"
          : quoted.stray < end
            ? `has text after its closing ${quote}`
            : `runs to a ${quote} on line ${line + countNewlines(text, pos, quoted.stray)} with text after it`;
      errors.push({ line, message: `the ${what} value of ${name} ${problem}: the closing ${quote} must end its line or be followed only by a # comment` });
    }
    next(end);
  }
  return errors.length === 0 ? { ok: true, entries } : { ok: false, errors };
}

/**
 * A quoted value starting at `open`, possibly over several lines, as dotenv's pattern matches it:
 * it first tries the first quote not written `\q`; when what follows that one is not the end of
 * the line (or a comment), it backtracks onto the escaped quotes before it, last one first. So
 * `"C:\dir\"` is `C:\dir\`, as in wrangler. When none closes it, `stray` is where that first
 * unescaped quote is, if there is one.
 */
function readQuoted(text: string, open: number, quote: string): { value: string; close: number } | { stray: number | undefined } {
  const escaped: number[] = [];
  let plain: number | undefined;
  for (let i = text.indexOf(quote, open + 1); i !== -1; i = text.indexOf(quote, i + 1)) {
    if (text[i - 1] === "\\") escaped.push(i);
    else {
      plain = i;
      break;
    }
  }
  const candidates = plain === undefined ? escaped.reverse() : [plain, ...escaped.reverse()];
  for (const close of candidates) {
    if (afterClosingQuote.test(text.slice(close + 1, lineEnd(text, close)))) {
      return { value: unescape(text.slice(open + 1, close), quote), close };
    }
  }
  return { stray: plain };
}

/** Up to the first `#`, trimmed: dotenv's unquoted value. */
function unquoted(rest: string): string {
  const hash = rest.indexOf("#");
  return (hash === -1 ? rest : rest.slice(0, hash)).trim();
}

/** Only double quotes have escapes, and only these two. */
function unescape(value: string, quote: string): string {
  return quote === '"' ? value.replaceAll("\\n", "\n").replaceAll("\\r", "\r") : value;
}

function whyNotAnAssignment(trimmed: string): string {
  const equals = trimmed.indexOf("=");
  if (equals === -1) return 'expected NAME=value, but the line has no "="';
  const name = trimmed.slice(0, equals).replace(/^export\s+/, "").trim();
  if (name === "") return 'expected NAME=value, but there is no name before "="';
  return 'expected NAME=value, but the name before "=" is not made only of letters, digits, "_", "." and "-"';
}

function lineEnd(text: string, from: number): number {
  const at = text.indexOf("\n", from);
  return at === -1 ? text.length : at;
}

function countNewlines(text: string, from: number, to: number): number {
  let n = 0;
  for (let i = text.indexOf("\n", from); i !== -1 && i < to; i = text.indexOf("\n", i + 1)) n++;
  return n;
}
