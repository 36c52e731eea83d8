/**
 * When a parsed cron expression runs: which UTC minutes match, and the next one after a time.
 * The parser (cron-expression.ts) builds it from the five fields; this file knows no syntax.
 */

export interface CronSchedule {
  /** The expression as written in the config. */
  readonly expression: string;
  /** Whether the whole UTC minute containing `ms` matches. */
  matches(ms: number): boolean;
  /** The first whole UTC minute strictly after `ms` that matches; undefined if none within 28 years. */
  nextAfter(ms: number): number | undefined;
}

/** Every weekday/leap-year combination recurs within 28 years (none skipped before 2100). */
const horizonYears = 28;
const minuteMs = 60_000;

export type DayOfMonthRule =
  | { kind: "days"; days: readonly boolean[] }
  | { kind: "last"; offset: number; weekday: boolean }
  | { kind: "nearestWeekday"; day: number };

export type DayOfWeekRule =
  | { kind: "weekdays"; weekdays: readonly boolean[] }
  | { kind: "last"; weekday: number }
  | { kind: "nth"; weekday: number; nth: number };

export class Schedule implements CronSchedule {
  constructor(
    readonly expression: string,
    private readonly minutes: readonly boolean[],
    private readonly hours: readonly boolean[],
    private readonly months: readonly boolean[],
    private readonly dayOfMonth: DayOfMonthRule | undefined,
    private readonly dayOfWeek: DayOfWeekRule | undefined,
  ) {}

  matches(ms: number): boolean {
    const at = new Date(minuteStart(ms));
    return (
      this.minutes[at.getUTCMinutes()] === true &&
      this.hours[at.getUTCHours()] === true &&
      this.months[at.getUTCMonth() + 1] === true &&
      (this.daysOf(at.getUTCFullYear(), at.getUTCMonth()) & dayBit(at.getUTCDate())) !== 0
    );
  }

  nextAfter(ms: number): number | undefined {
    const from = new Date(minuteStart(ms) + minuteMs);
    const horizon = new Date(from.getTime());
    horizon.setUTCFullYear(from.getUTCFullYear() + horizonYears);
    let year = from.getUTCFullYear();
    let month = from.getUTCMonth();
    let fromDay = from.getUTCDate();
    let fromHour = from.getUTCHours();
    let fromMinute = from.getUTCMinutes();
    // Month by month, so a rare date (29 February, a fifth Monday) costs one step per month.
    for (let months = 0; months <= horizonYears * 12; months++) {
      if (this.months[month + 1] === true) {
        const days = this.daysOf(year, month);
        for (let day = fromDay; day <= 31; day++) {
          if ((days & dayBit(day)) === 0) continue;
          const time = this.firstTime(day === fromDay ? fromHour : 0, day === fromDay ? fromMinute : 0);
          if (time === undefined) continue;
          const next = utc(year, month, day, time.hour, time.minute);
          return next <= horizon.getTime() ? next : undefined;
        }
      }
      month++;
      if (month === 12) {
        month = 0;
        year++;
      }
      fromDay = 1;
      fromHour = 0;
      fromMinute = 0;
    }
    return undefined;
  }

  private firstTime(fromHour: number, fromMinute: number): { hour: number; minute: number } | undefined {
    for (let hour = fromHour; hour <= 23; hour++) {
      if (this.hours[hour] !== true) continue;
      for (let minute = hour === fromHour ? fromMinute : 0; minute <= 59; minute++) {
        if (this.minutes[minute] === true) return { hour, minute };
      }
    }
    return undefined;
  }

  /** The days of `month` (0-11) the day-of-month and day-of-week fields allow, as bits (day 1 = bit 0). */
  private daysOf(year: number, month: number): number {
    const length = daysInMonth(year, month);
    const firstWeekday = new Date(utc(year, month, 1, 0, 0)).getUTCDay();
    const weekdayOf = (day: number): number => (firstWeekday + day - 1) % 7;
    const byMonth = this.dayOfMonth && dayOfMonthDays(this.dayOfMonth, length, weekdayOf);
    const byWeek = this.dayOfWeek && dayOfWeekDays(this.dayOfWeek, length, weekdayOf);
    if (byMonth === undefined && byWeek === undefined) return dayBit(length + 1) - 1;
    return (byMonth ?? 0) | (byWeek ?? 0);
  }
}

function dayOfMonthDays(rule: DayOfMonthRule, length: number, weekdayOf: (day: number) => number): number {
  switch (rule.kind) {
    case "days": {
      let bits = 0;
      for (let day = 1; day <= length; day++) if (rule.days[day] === true) bits |= dayBit(day);
      return bits;
    }
    case "last": {
      const target = length - rule.offset;
      if (target < 1) return 0;
      return dayBit(rule.weekday ? nearestWeekday(target, length, weekdayOf) : target);
    }
    case "nearestWeekday": {
      if (rule.day <= length) return dayBit(nearestWeekday(rule.day, length, weekdayOf));
      // Saffron: a missing day n that would be a Saturday moves to the Friday before it.
      return rule.day === length + 1 && weekdayOf(rule.day) === 6 ? dayBit(length) : 0;
    }
  }
}

/** The weekday nearest `day` without leaving the month: Saturday goes back, Sunday forward. */
function nearestWeekday(day: number, length: number, weekdayOf: (day: number) => number): number {
  const weekday = weekdayOf(day);
  if (weekday === 6) return day === 1 ? 3 : day - 1;
  if (weekday === 0) return day === length ? day - 2 : day + 1;
  return day;
}

function dayOfWeekDays(rule: DayOfWeekRule, length: number, weekdayOf: (day: number) => number): number {
  switch (rule.kind) {
    case "weekdays": {
      let bits = 0;
      for (let day = 1; day <= length; day++) if (rule.weekdays[weekdayOf(day)] === true) bits |= dayBit(day);
      return bits;
    }
    case "last":
      return dayBit(length - ((weekdayOf(length) - rule.weekday + 7) % 7));
    case "nth": {
      const day = 1 + ((rule.weekday - weekdayOf(1) + 7) % 7) + 7 * (rule.nth - 1);
      return day <= length ? dayBit(day) : 0;
    }
  }
}

function dayBit(day: number): number {
  return 2 ** (day - 1);
}

function daysInMonth(year: number, month: number): number {
  if (month === 1) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month]!;
}

/** Date.UTC without its reading of years 0-99 as 1900-1999. */
function utc(year: number, month: number, day: number, hour: number, minute: number): number {
  const date = new Date(0);
  date.setUTCFullYear(year, month, day);
  date.setUTCHours(hour, minute, 0, 0);
  return date.getTime();
}

function minuteStart(ms: number): number {
  if (!Number.isFinite(ms)) throw new RangeError(`a cron schedule needs a finite time in ms, not ${ms}`);
  return Math.floor(ms / minuteMs) * minuteMs;
}
