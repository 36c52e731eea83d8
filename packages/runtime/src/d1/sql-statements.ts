/**
 * A SQL file as a list of statements, split where wrangler's `d1 execute` splits it, so that the
 * same file runs the same way under celld and under `wrangler d1 execute --local`: D1 prepares one
 * statement at a time, and runs a file's statements in one batch (one transaction).
 *
 * A `;` ends a statement unless it is inside a quoted string or identifier ('', "", ``, []), a
 * comment (-- to the end of the line, /* to *\/), or a compound statement: from a BEGIN or CASE
 * word to its END (a CREATE TRIGGER's body, a CASE expression). Comments are dropped.
 */
export function sqlStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = "";
  let depth = 0;
  let i = 0;
  const end = (): void => {
    const statement = current.trim();
    if (statement !== "") statements.push(statement);
    current = "";
  };
  while (i < sql.length) {
    const char = sql[i]!;
    const two = sql.slice(i, i + 2);
    if (char === "'" || char === '"' || char === "`" || char === "[") {
      const close = char === "[" ? "]" : char;
      const stop = sql.indexOf(close, i + 1);
      const next = stop === -1 ? sql.length : stop + 1;
      current += sql.slice(i, next);
      i = next;
    } else if (two === "--") {
      const stop = sql.indexOf("\n", i);
      current += "\n";
      i = stop === -1 ? sql.length : stop + 1;
    } else if (two === "/*") {
      const stop = sql.indexOf("*/", i + 2);
      current += " ";
      i = stop === -1 ? sql.length : stop + 2;
    } else if (/[A-Za-z_]/.test(char) && !/[A-Za-z0-9_$]/.test(sql[i - 1] ?? "")) {
      const word = /^[A-Za-z_][A-Za-z0-9_$]*/.exec(sql.slice(i))![0];
      const upper = word.toUpperCase();
      // BEGIN TRANSACTION (and BEGIN; alone) opens no body: only BEGIN inside a statement does.
      if ((upper === "BEGIN" && current.trim() !== "") || upper === "CASE") depth++;
      else if (upper === "END" && depth > 0) depth--;
      current += word;
      i += word.length;
    } else if (char === ";" && depth === 0) {
      end();
      i++;
    } else {
      current += char;
      i++;
    }
  }
  end();
  return statements;
}
