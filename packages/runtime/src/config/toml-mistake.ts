/**
 * Where a TOML mistake really is, when smol-toml reports it later. An array or inline table left
 * open (a missing `]` or `}`) is found only where the next line cannot continue it, so the parser
 * names the line after the mistake; a table header missing its `]` likewise. This scanner finds
 * the bracket that was never closed, so the message names its line.
 */

export interface TomlMistake {
  line: number;
  column: number;
  reason: string;
}

interface Open {
  char: "[" | "{";
  line: number;
  column: number;
}

/**
 * The unclosed bracket before (`errorLine`, `errorColumn`), if a value's array or inline table, or
 * a table header, is still open there and was opened on an earlier line; else undefined.
 */
export function unclosedBracket(text: string, errorLine: number, errorColumn: number): TomlMistake | undefined {
  const lines = text.split("\n");
  const open: Open[] = [];
  let string: '"' | "'" | '"""' | "'''" | undefined;
  for (let l = 0; l < lines.length && l < errorLine; l++) {
    const line = lines[l]!;
    const end = l === errorLine - 1 ? errorColumn - 1 : line.length;
    // A table header: at the start of a line outside any value, "[" or "[[" up to its closing.
    if (open.length === 0 && string === undefined && /^\s*\[/.test(line)) {
      const header = /^\s*(\[\[?)[^\]#]*(\]?\]?)/.exec(line)!;
      const closed = header[1] === "[[" ? header[2] === "]]" : header[2]!.startsWith("]");
      if (!closed && l < errorLine - 1) {
        return { line: l + 1, column: line.indexOf("[") + 1, reason: `the table header is not closed with ${header[1] === "[[" ? "]]" : "]"}` };
      }
      continue;
    }
    for (let c = 0; c < end; c++) {
      const rest = line.slice(c);
      if (string !== undefined) {
        if (string.length === 1 && string === '"' && line[c] === "\\") c++;
        else if (rest.startsWith(string)) {
          c += string.length - 1;
          string = undefined;
        }
        continue;
      }
      const quote = rest.startsWith('"""') ? '"""' : rest.startsWith("'''") ? "'''" : line[c] === '"' || line[c] === "'" ? (line[c] as '"' | "'") : undefined;
      if (quote !== undefined) {
        string = quote;
        c += quote.length - 1;
      } else if (line[c] === "#") break;
      else if (line[c] === "[" || line[c] === "{") open.push({ char: line[c] as "[" | "{", line: l + 1, column: c + 1 });
      else if (line[c] === "]" || line[c] === "}") open.pop();
    }
    // A one-line string ends with its line (an unclosed one is the parser's own error).
    if (string === '"' || string === "'") string = undefined;
  }
  const last = open.at(-1);
  if (last === undefined || last.line >= errorLine) return undefined;
  const what = last.char === "[" ? "the array opened here is not closed with ]" : "the inline table opened here is not closed with }";
  return { line: last.line, column: last.column, reason: what };
}
