/**
 * Cron Triggers' expressions (`triggers.crons`), parsed and matched as Cloudflare does. Cloudflare
 * runs its open-source parser saffron (github.com/cloudflare/saffron); where saffron accepts or
 * refuses, so does this, so a config celld runs is one Cloudflare would deploy. Followed from it:
 *
 * - Exactly five fields, UTC, separated by one or more spaces or tabs. Nothing before the first
 *   field or after the last (saffron's grammar has no place for it), no `@daily`-style macros, no
 *   seconds or year field, no `?`.
 * - Day of week is 1-7 with 1 = Sunday and 7 = Saturday (Quartz numbering); 0 is refused. `L`
 *   alone in day of week means Saturday.
 * - A range may wrap (`22-2`, `FRI-MON`, `NOV-FEB`): start to the field's maximum, then its
 *   minimum to end. Saffron's bit arithmetic for wrapped ranges also sets the value before the
 *   start (its `22-2` includes 21) and mixes 0- and 1-based numbers in wrapped steps; that
 *   contradicts its own comments and Quartz, so the intended meaning is kept, not the slip.
 * - A step on one value runs to the field's maximum (`5/15` = 5,20,35,50). Steps run 1 to
 *   max - min (`*\/0`, `*\/60`, hour `/24`, month `/12`, day of week `/7` are refused).
 * - Names (JAN-DEC, SUN-SAT, any case) work wherever a number does, ranges and steps included.
 *   A list's later items may be `*`, which saffron reads as the field's minimum (`5,*` = 5,0);
 *   a leading `*` stands alone or takes a step (`*,5` is refused).
 * - `L`, `LW`, `L-n`, `L-nW`, `nW` (day of month) and `nL`, `n#k` (day of week) stand alone.
 *   `nW` is the nearest weekday inside the month; when day n does not exist but would be a
 *   Saturday (31W in a 30-day month), saffron picks the Friday before, the month's last day.
 * - Day of month and day of week both restricted: a day matching either (classic cron's OR).
 *   Only a bare `*` counts as unrestricted (`*\/1` restricts).
 * - An expression that can never fire (`0 0 30 2 *`) parses; it simply has no next time.
 */

import { Schedule, type CronSchedule, type DayOfMonthRule, type DayOfWeekRule } from "./cron-schedule.ts";

export type { CronSchedule };

export type CronField = "minute" | "hour" | "day of month" | "month" | "day of week";

/** A cron expression that Cloudflare would refuse. `field` is the field at fault, when one is. */
export class CronExpressionError extends Error {
  readonly code = "ERR_CRON_EXPRESSION" as const;
  constructor(
    message: string,
    readonly field?: CronField,
  ) {
    super(message);
    this.name = "CronExpressionError [ERR_CRON_EXPRESSION]";
  }
}

const fieldOrder = "minute hour day-of-month month day-of-week";

interface FieldSpec {
  readonly field: CronField;
  readonly min: number;
  readonly max: number;
  readonly names?: readonly string[];
  readonly takes: string;
}

const minuteSpec: FieldSpec = { field: "minute", min: 0, max: 59, takes: "0-59 and * , - /" };
const hourSpec: FieldSpec = { field: "hour", min: 0, max: 23, takes: "0-23 and * , - /" };
const dayOfMonthSpec: FieldSpec = { field: "day of month", min: 1, max: 31, takes: "1-31 and * , - / L W" };
const monthSpec: FieldSpec = {
  field: "month",
  min: 1,
  max: 12,
  names: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
  takes: "1-12 or JAN-DEC and * , - /",
};
const dayOfWeekSpec: FieldSpec = {
  field: "day of week",
  min: 1,
  max: 7,
  names: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
  takes: "1-7 (1 = Sunday) or SUN-SAT and * , - / L #",
};

/** Values a field allows, indexed by value; undefined for a bare `*`. */
type ValueSet = readonly boolean[] | undefined;


/** Parses one expression as Cloudflare does; throws CronExpressionError naming the field, the value and the allowed range. */
export function parseCron(expression: string): CronSchedule {
  const fail = (message: string, field?: CronField): never => {
    throw new CronExpressionError(`cron ${JSON.stringify(expression)}: ${message}`, field);
  };
  if (/[^\S \t]/.test(expression)) {
    fail("contains whitespace other than spaces and tabs (a line break?); fields are separated by spaces or tabs");
  }
  if (/^[ \t]/.test(expression)) fail("starts with whitespace, which Cloudflare refuses; remove it");
  if (/[ \t]$/.test(expression)) fail("ends with whitespace, which Cloudflare refuses; remove it");
  if (expression.startsWith("@")) {
    fail(`macros such as ${expression.split(/[ \t]/)[0]} are not supported by Cloudflare; write 5 fields (${fieldOrder}), e.g. "0 0 * * *" for daily`);
  }
  const fields = expression === "" ? [] : expression.split(/[ \t]+/);
  if (fields.length !== 5) fail(`has ${fields.length} field${fields.length === 1 ? "" : "s"}; a cron expression has 5 (${fieldOrder})`);
  const [minute, hour, dayOfMonth, month, dayOfWeek] = fields as [string, string, string, string, string];

  const minutes = parseList(new FieldReader(fail, minuteSpec, minute)) ?? all(minuteSpec);
  const hours = parseList(new FieldReader(fail, hourSpec, hour)) ?? all(hourSpec);
  const dayOfMonthRule = parseDayOfMonth(new FieldReader(fail, dayOfMonthSpec, dayOfMonth));
  const months = parseList(new FieldReader(fail, monthSpec, month)) ?? all(monthSpec);
  const dayOfWeekRule = parseDayOfWeek(new FieldReader(fail, dayOfWeekSpec, dayOfWeek));
  return new Schedule(expression, minutes, hours, months, dayOfMonthRule, dayOfWeekRule);
}

/** A cursor over one field's text, whose errors name the field. */
class FieldReader {
  private pos = 0;
  constructor(
    private readonly fail: (message: string, field?: CronField) => never,
    readonly spec: FieldSpec,
    private readonly text: string,
  ) {
    if (text.includes("?")) this.error(`"?" is not supported by Cloudflare; use *`);
  }

  get rest(): string {
    return this.text.slice(this.pos);
  }
  /** Back to the field's start, after looking ahead for `nL` or `n#k`. */
  restart(): void {
    this.pos = 0;
  }
  atEnd(): boolean {
    return this.pos === this.text.length;
  }
  eat(char: string): boolean {
    if (this.text[this.pos] !== char) return false;
    this.pos++;
    return true;
  }

  /** A number or (month, day of week) a three-letter name, in the field's range. */
  value(): number {
    const { field, min, max, names } = this.spec;
    const digits = /^\d+/.exec(this.rest)?.[0];
    if (digits !== undefined) {
      const value = this.number(digits);
      const hint = field === "day of week" && value === 0 ? " (1 = Sunday, 7 = Saturday; Cloudflare has no 0)" : "";
      if (value < min || value > max) this.error(`${value} is out of range ${min}-${max}${hint}`);
      return value;
    }
    const index = names?.indexOf(this.rest.slice(0, 3).toUpperCase()) ?? -1;
    if (index < 0) this.invalid();
    this.pos += 3;
    return min + index;
  }

  /** The number after `/`: at least 1, at most the field's span. */
  step(): number {
    const high = this.spec.max - this.spec.min;
    return this.bounded(1, high, (value) => `step ${value} is out of range 1-${high}`);
  }

  /** A number in low..high; `outOfRange` says why another is refused. */
  bounded(low: number, high: number, outOfRange: (value: number) => string): number {
    const digits = /^\d+/.exec(this.rest)?.[0];
    if (digits === undefined) return this.invalid();
    const value = this.number(digits);
    if (value < low || value > high) this.error(outOfRange(value));
    return value;
  }

  /** After a form that stands alone (`L`, `15W`, `FRI#2`), the field must end. */
  endAlone(form: string): void {
    if (!this.atEnd()) this.error(`"${this.text}" is not valid at "${this.rest}"; ${form} stands alone in its field`);
  }

  end(): void {
    if (!this.atEnd()) this.invalid();
  }

  invalid(): never {
    const where = this.atEnd() ? "ends too soon" : `is not valid at "${this.rest}"`;
    return this.error(`"${this.text}" ${where}; ${this.spec.field} takes ${this.spec.takes}`);
  }

  error(detail: string): never {
    return this.fail(`${this.spec.field} ${detail}`, this.spec.field);
  }

  private number(digits: string): number {
    this.pos += digits.length;
    return Number(digits);
  }
}

function all(spec: FieldSpec): boolean[] {
  const values: boolean[] = [];
  for (let value = spec.min; value <= spec.max; value++) values[value] = true;
  return values;
}

/** `*` (undefined), or a list of values, ranges and steps. */
function parseList(reader: FieldReader): ValueSet {
  const { min, max } = reader.spec;
  const values: boolean[] = [];
  if (reader.eat("*")) {
    if (reader.atEnd()) return undefined;
    if (!reader.eat("/")) {
      if (reader.rest.startsWith(",") || reader.rest.startsWith("-")) {
        reader.error(`"*" cannot start a list or range; use * alone, */step, or list the values`);
      }
      reader.invalid();
    }
    addSequence(values, reader.spec, min, max, reader.step());
  } else {
    parseItem(reader, values);
  }
  while (reader.eat(",")) parseItem(reader, values);
  reader.end();
  return values;
}

function parseItem(reader: FieldReader, values: boolean[]): void {
  const { min, max } = reader.spec;
  const start = reader.eat("*") ? min : reader.value();
  if (reader.eat("/")) {
    addSequence(values, reader.spec, start, max, reader.step());
  } else if (reader.eat("-")) {
    const end = reader.value();
    addSequence(values, reader.spec, start, end, reader.eat("/") ? reader.step() : 1);
  } else {
    values[start] = true;
  }
}

/** start..end, wrapping past the maximum when end < start, every `step`th value. */
function addSequence(values: boolean[], spec: FieldSpec, start: number, end: number, step: number): void {
  const span = spec.max - spec.min + 1;
  const count = ((end - start + span) % span) + 1;
  for (let i = 0; i < count; i += step) values[spec.min + ((start - spec.min + i) % span)] = true;
}

function parseDayOfMonth(reader: FieldReader): DayOfMonthRule | undefined {
  if (reader.eat("L")) {
    const offset = reader.eat("-") ? reader.bounded(1, 30, (value) => `L-${value} is out of range L-1 to L-30`) : 0;
    const weekday = reader.eat("W");
    reader.endAlone(offset === 0 ? (weekday ? "LW" : "L") : weekday ? "L-nW" : "L-n");
    return { kind: "last", offset, weekday };
  }
  if (/^\d+W/.test(reader.rest)) {
    const day = reader.value();
    reader.eat("W");
    reader.endAlone(`${day}W`);
    return { kind: "nearestWeekday", day };
  }
  const days = parseList(reader);
  return days === undefined ? undefined : { kind: "days", days };
}

function parseDayOfWeek(reader: FieldReader): DayOfWeekRule | undefined {
  if (reader.eat("L")) {
    reader.endAlone("L (Saturday)");
    return { kind: "weekdays", weekdays: [false, false, false, false, false, false, true] };
  }
  if (!reader.rest.startsWith("*")) {
    const weekday = reader.value() - 1;
    if (reader.eat("L")) {
      reader.endAlone("nL (last weekday n of the month)");
      return { kind: "last", weekday };
    }
    if (reader.eat("#")) {
      const nth = reader.bounded(1, 5, (value) => `#${value} is out of range #1 to #5 (the weekday's occurrence in the month)`);
      reader.endAlone("n#k (k-th weekday n of the month)");
      return { kind: "nth", weekday, nth };
    }
    reader.restart();
  }
  const days = parseList(reader);
  if (days === undefined) return undefined;
  // 1-7 (Sunday first) to JavaScript's getUTCDay() 0-6.
  return { kind: "weekdays", weekdays: days.slice(1).map(Boolean) };
}
