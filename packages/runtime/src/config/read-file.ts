import { extname } from "node:path";
import { parse as parseJsonc, printParseErrorCode, type ParseError, type ParseErrorCode } from "jsonc-parser";
import { parse as parseToml, TomlError } from "smol-toml";
import type { ConfigIssue } from "./issues.ts";
import { unclosedBracket } from "./toml-mistake.ts";

export type ConfigSyntax = "toml" | "jsonc";

/**
 * The syntax a config file is written in, from its name. wrangler reads `.json` with its JSONC
 * parser too, so comments and trailing commas are accepted in both JSON spellings.
 */
export function syntaxOf(path: string): ConfigSyntax | undefined {
  const ext = extname(path).toLowerCase();
  if (ext === ".toml") return "toml";
  if (ext === ".json" || ext === ".jsonc") return "jsonc";
  return undefined;
}

export type ParsedText = { ok: true; value: unknown } | { ok: false; issues: ConfigIssue[] };

/** Turns a config file's text into plain data, or into issues that name the line and column. */
export function parseConfigText(file: string, text: string): ParsedText {
  const syntax = syntaxOf(file);
  if (syntax === undefined) {
    return fail(file, "is not a config file celld reads: its name must end in .toml, .json or .jsonc (as wrangler.toml does)");
  }
  return syntax === "toml" ? parseTomlText(file, text) : parseJsoncText(file, text);
}

function parseTomlText(file: string, text: string): ParsedText {
  try {
    return { ok: true, value: parseToml(text) };
  } catch (error) {
    if (!(error instanceof TomlError)) throw error;
    // smol-toml's message carries a code block after a blank line; the first line is the reason.
    const reason = error.message.split("\n")[0]?.replace(/^Invalid TOML document: /, "") ?? error.message;
    // A bracket left open is found by the parser only on a later line: name the line it opened on.
    const mistake = unclosedBracket(text, error.line, error.column);
    if (mistake !== undefined) return fail(file, `TOML syntax error at line ${mistake.line}, column ${mistake.column}: ${mistake.reason}`);
    return fail(file, `TOML syntax error at line ${error.line}, column ${error.column}: ${reason}`);
  }
}

function parseJsoncText(file: string, text: string): ParsedText {
  const errors: ParseError[] = [];
  const value: unknown = parseJsonc(text, errors, { allowTrailingComma: true, disallowComments: false });
  if (errors.length === 0) return { ok: true, value };
  return {
    ok: false,
    issues: errors.map((e) => {
      const { line, column } = lineAndColumn(text, e.offset);
      const message = `JSON syntax error at line ${line}, column ${column}: ${jsonErrorText(e.error)}`;
      return { file, path: "", message };
    }),
  };
}

/** jsonc-parser's error codes, as a person editing the file would put them. */
const jsonErrorTexts: Record<string, string> = {
  InvalidSymbol: "unexpected character (keys and strings take double quotes)",
  InvalidNumberFormat: "a number is not written as JSON writes numbers",
  PropertyNameExpected: "a key in double quotes was expected",
  ValueExpected: "a value was expected",
  ColonExpected: "a colon was expected after the key",
  CommaExpected: "a comma was expected before this",
  CloseBraceExpected: "a closing } was expected",
  CloseBracketExpected: "a closing ] was expected",
  EndOfFileExpected: "the file should end after its top-level object",
  InvalidCommentToken: "a comment is not written as // or /* */",
  UnexpectedEndOfComment: "a /* comment is not closed",
  UnexpectedEndOfString: "a string is not closed",
  UnexpectedEndOfNumber: "a number ends too early",
  InvalidUnicode: "a \\u escape needs four hex digits",
  InvalidEscapeCharacter: "an escape sequence that JSON does not have",
  InvalidCharacter: "a control character (a raw newline or tab) inside a string",
};

function jsonErrorText(code: ParseErrorCode): string {
  const name = printParseErrorCode(code);
  return jsonErrorTexts[name] ?? name;
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const lineStart = before.lastIndexOf("\n") + 1;
  return { line: before.split("\n").length, column: offset - lineStart + 1 };
}

function fail(file: string, message: string): ParsedText {
  return { ok: false, issues: [{ file, path: "", message }] };
}
