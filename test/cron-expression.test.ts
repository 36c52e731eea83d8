import { describe, expect, test } from "vitest";
import { CronExpressionError, parseCron, type CronField } from "../packages/runtime/src/config/cron/cron-expression.ts";

/** The next `count` fire times after `from`, as ISO strings ("none" once there is none). */
function fires(expression: string, from: string, count = 1): string[] {
  const schedule = parseCron(expression);
  const out: string[] = [];
  let at = Date.parse(from);
  for (let i = 0; i < count; i++) {
    const next = schedule.nextAfter(at);
    if (next === undefined) {
      out.push("none");
      break;
    }
    out.push(new Date(next).toISOString().replace(":00.000Z", "Z"));
    at = next;
  }
  return out;
}

describe("Cloudflare's documented examples", () => {
  test.each([
    ["*/30 * * * *", "2026-01-01T00:00:00Z", ["2026-01-01T00:30Z", "2026-01-01T01:00Z", "2026-01-01T01:30Z"]],
    ["45 * * * *", "2026-01-01T10:45:00Z", ["2026-01-01T11:45Z", "2026-01-01T12:45Z"]],
    // 2026-01-01 is a Thursday; Sunday is 1 in Cloudflare's numbering.
    ["0 17 * * sun", "2026-01-01T00:00:00Z", ["2026-01-04T17:00Z", "2026-01-11T17:00Z"]],
    ["10 7 * * mon-fri", "2026-01-02T07:10:00Z", ["2026-01-05T07:10Z", "2026-01-06T07:10Z"]],
    ["0 15 1 * *", "2026-01-01T15:00:00Z", ["2026-02-01T15:00Z", "2026-03-01T15:00Z"]],
    // The last Friday: January 30, February 27, March 27 2026.
    ["0 18 * * 6L", "2026-01-01T00:00:00Z", ["2026-01-30T18:00Z", "2026-02-27T18:00Z", "2026-03-27T18:00Z"]],
    // The last weekday: Jan 31 and Feb 28 2026 are Saturdays, Mar 31 a Tuesday, May 31 a Sunday.
    ["59 23 LW * *", "2026-01-01T00:00:00Z", ["2026-01-30T23:59Z", "2026-02-27T23:59Z", "2026-03-31T23:59Z", "2026-04-30T23:59Z", "2026-05-29T23:59Z"]],
  ])("%s after %s", (expression, from, expected) => {
    expect(fires(expression, from, expected.length)).toEqual(expected);
  });

  test.each([
    ["0 17 * * sun", "0 17 * * 1"],
    ["10 7 * * mon-fri", "10 7 * * 2-6"],
    ["0 18 * * 6L", "0 18 * * friL"],
    ["0 18 * * FRIL", "0 18 * * friL"],
    ["0 0 1 JAN-JUN/2 *", "0 0 1 1,3,5 *"],
    ["0 0 * * L", "0 0 * * SAT"],
  ])("%s is %s", (a, b) => {
    expect(fires(a, "2026-01-01T00:00:00Z", 40)).toEqual(fires(b, "2026-01-01T00:00:00Z", 40));
  });
});

describe("next fire time", () => {
  test("is the next whole minute, across the month's and the year's end", () => {
    expect(fires("* * * * *", "2026-01-31T23:59:30Z")).toEqual(["2026-02-01T00:00Z"]);
    expect(fires("* * * * *", "2026-12-31T23:59:00Z")).toEqual(["2027-01-01T00:00Z"]);
    expect(fires("0 0 1 1 *", "2026-12-31T23:59:59.999Z")).toEqual(["2027-01-01T00:00Z"]);
  });

  test("is strictly after a time exactly on a matching minute", () => {
    expect(fires("0 12 * * *", "2026-01-01T12:00:00.000Z")).toEqual(["2026-01-02T12:00Z"]);
    expect(fires("0 12 * * *", "2026-01-01T11:59:59.999Z")).toEqual(["2026-01-01T12:00Z"]);
    expect(fires("0 12 * * *", "2026-01-01T12:00:00.001Z")).toEqual(["2026-01-02T12:00Z"]);
  });

  test("has whole minutes: seconds and milliseconds are 0", () => {
    const next = parseCron("* * * * *").nextAfter(Date.parse("2026-03-04T05:06:07.891Z"));
    expect(next).toBe(Date.UTC(2026, 2, 4, 5, 7));
  });

  test("skips months without the day", () => {
    expect(fires("0 0 31 * *", "2026-01-31T00:00:00Z", 3)).toEqual(["2026-03-31T00:00Z", "2026-05-31T00:00Z", "2026-07-31T00:00Z"]);
    expect(fires("0 0 L * *", "2026-04-30T00:00:00Z", 2)).toEqual(["2026-05-31T00:00Z", "2026-06-30T00:00Z"]);
  });

  test("29 February comes in leap years only, and 2100 is not one", () => {
    expect(fires("0 0 29 2 *", "2026-01-01T00:00:00Z", 2)).toEqual(["2028-02-29T00:00Z", "2032-02-29T00:00Z"]);
    expect(fires("0 0 29 2 *", "1999-01-01T00:00:00Z")).toEqual(["2000-02-29T00:00Z"]);
    expect(fires("0 0 29 2 *", "2096-03-01T00:00:00Z")).toEqual(["2104-02-29T00:00Z"]);
    expect(fires("0 0 L FEB *", "2027-03-01T00:00:00Z", 2)).toEqual(["2028-02-29T00:00Z", "2029-02-28T00:00Z"]);
    expect(fires("0 0 L-1 FEB *", "2027-03-01T00:00:00Z", 2)).toEqual(["2028-02-28T00:00Z", "2029-02-27T00:00Z"]);
  });

  test("MON#5 fires only in months with a fifth Monday", () => {
    // Jan and Feb 2026 have four Mondays; March has 2, 9, 16, 23, 30.
    expect(fires("0 0 * * MON#5", "2026-01-01T00:00:00Z", 3)).toEqual(["2026-03-30T00:00Z", "2026-06-29T00:00Z", "2026-08-31T00:00Z"]);
    expect(fires("0 0 * * 2#2", "2026-01-01T00:00:00Z", 2)).toEqual(["2026-01-12T00:00Z", "2026-02-09T00:00Z"]);
    const fifth = parseCron("0 0 * * MON#5");
    expect(fifth.matches(Date.UTC(2026, 0, 26))).toBe(false);
    expect(parseCron("0 0 * * MON#4").matches(Date.UTC(2026, 0, 26))).toBe(true);
  });

  test("an expression that can never fire has no next time", () => {
    expect(fires("0 0 30 2 *", "2026-01-01T00:00:00Z")).toEqual(["none"]);
    expect(fires("0 0 31 4,6,9,11 *", "2026-01-01T00:00:00Z")).toEqual(["none"]);
    expect(fires("0 0 L-30 FEB *", "2026-01-01T00:00:00Z")).toEqual(["none"]);
  });
});

describe("matches", () => {
  test("takes the whole UTC minute containing the time", () => {
    const workHours = parseCron("*/15 9-17 * * MON-FRI");
    expect(workHours.matches(Date.parse("2026-01-02T09:15:42.5Z"))).toBe(true); // a Friday
    expect(workHours.matches(Date.parse("2026-01-02T09:16:00Z"))).toBe(false);
    expect(workHours.matches(Date.parse("2026-01-03T09:15:00Z"))).toBe(false); // a Saturday
    expect(workHours.matches(Date.parse("2026-01-02T18:00:00Z"))).toBe(false);
  });

  test.each(["7 */5 L-2W * TUE#3", "*/7 22-1 1W * SUN", "0 12 31W * 6L", "0 0 L-3 * MON#5", "0,30 9-17 * FEB,MAR MON-FRI", "59 23 LW * *", "15 3 29 2 *"])(
    "%j agrees with nextAfter, minute by minute",
    (expression) => {
      const schedule = parseCron(expression);
      const fromEveryMinute: number[] = [];
      const end = Date.UTC(2028, 2, 10);
      for (let minute = Date.UTC(2028, 0, 25); minute < end; minute += 60_000) {
        if (schedule.matches(minute)) fromEveryMinute.push(minute);
      }
      const fromNextAfter: number[] = [];
      // Bounded, so a nextAfter that stops moving fails instead of hanging.
      let at = schedule.nextAfter(Date.UTC(2028, 0, 25) - 1);
      while (at !== undefined && at < end && fromNextAfter.length <= fromEveryMinute.length) {
        fromNextAfter.push(at);
        at = schedule.nextAfter(at);
      }
      expect(fromNextAfter.length).toBeGreaterThan(0);
      expect(fromNextAfter).toEqual(fromEveryMinute);
    },
  );
});

describe("fields", () => {
  test.each([
    // A range may wrap past the field's end: 22-2 is 22, 23, 0, 1, 2 (not 21).
    ["0 22-2 * * *", "2026-01-01T03:00:00Z", ["2026-01-01T22:00Z", "2026-01-01T23:00Z", "2026-01-02T00:00Z", "2026-01-02T01:00Z", "2026-01-02T02:00Z", "2026-01-02T22:00Z"]],
    ["0 22-2/2 * * *", "2026-01-01T03:00:00Z", ["2026-01-01T22:00Z", "2026-01-02T00:00Z", "2026-01-02T02:00Z", "2026-01-02T22:00Z"]],
    ["58-1 0 * * *", "2026-01-01T00:00:00Z", ["2026-01-01T00:01Z", "2026-01-01T00:58Z", "2026-01-01T00:59Z", "2026-01-02T00:00Z"]],
    ["0 0 * * FRI-MON", "2026-01-01T00:00:00Z", ["2026-01-02T00:00Z", "2026-01-03T00:00Z", "2026-01-04T00:00Z", "2026-01-05T00:00Z", "2026-01-09T00:00Z"]],
    ["0 0 1 NOV-FEB *", "2026-02-15T00:00:00Z", ["2026-11-01T00:00Z", "2026-12-01T00:00Z", "2027-01-01T00:00Z", "2027-02-01T00:00Z", "2027-11-01T00:00Z"]],
    ["0 0 28-2 * *", "2026-02-01T00:00:00Z", ["2026-02-02T00:00Z", "2026-02-28T00:00Z", "2026-03-01T00:00Z", "2026-03-02T00:00Z", "2026-03-28T00:00Z"]],
    // A step on one value runs to the field's end.
    ["5/15 * * * *", "2026-01-01T10:00:00Z", ["2026-01-01T10:05Z", "2026-01-01T10:20Z", "2026-01-01T10:35Z", "2026-01-01T10:50Z", "2026-01-01T11:05Z"]],
    ["59/3 * * * *", "2026-01-01T10:00:00Z", ["2026-01-01T10:59Z", "2026-01-01T11:59Z"]],
    ["0 0 1 FEB/3 *", "2026-01-01T00:00:00Z", ["2026-02-01T00:00Z", "2026-05-01T00:00Z", "2026-08-01T00:00Z", "2026-11-01T00:00Z", "2027-02-01T00:00Z"]],
    ["0 0 * * MON-FRI/2", "2026-01-01T00:00:00Z", ["2026-01-02T00:00Z", "2026-01-05T00:00Z", "2026-01-07T00:00Z", "2026-01-09T00:00Z"]],
    ["0 0 * * */3", "2026-01-01T00:00:00Z", ["2026-01-03T00:00Z", "2026-01-04T00:00Z", "2026-01-07T00:00Z", "2026-01-10T00:00Z"]],
    ["0 0-12/6 * * *", "2026-01-01T00:00:00Z", ["2026-01-01T06:00Z", "2026-01-01T12:00Z", "2026-01-02T00:00Z"]],
    ["*/20,5 * * * *", "2026-01-01T10:00:00Z", ["2026-01-01T10:05Z", "2026-01-01T10:20Z", "2026-01-01T10:40Z", "2026-01-01T11:00Z"]],
    // Saffron reads `*` after a comma as the field's minimum.
    ["5,* * * * *", "2026-01-01T10:00:00Z", ["2026-01-01T10:05Z", "2026-01-01T11:00Z"]],
    // Names in any case, numbers with leading zeros.
    ["0 0 1 jan,Jul *", "2026-01-01T00:00:00Z", ["2026-07-01T00:00Z", "2027-01-01T00:00Z"]],
    ["00 007 * * *", "2026-01-01T00:00:00Z", ["2026-01-01T07:00Z"]],
    // Several spaces and tabs between fields.
    ["0  12\t* *  \t *", "2026-01-01T00:00:00Z", ["2026-01-01T12:00Z", "2026-01-02T12:00Z"]],
  ])("%j after %s", (expression, from, expected) => {
    expect(fires(expression, from, expected.length)).toEqual(expected);
  });
});

describe("day of month and day of week", () => {
  test("both restricted: a day matching either (classic cron's OR)", () => {
    // 2026-01-13 is a Tuesday; the Fridays are the 2nd, 9th and 16th.
    expect(fires("0 0 13 * FRI", "2026-01-01T00:00:00Z", 4)).toEqual(["2026-01-02T00:00Z", "2026-01-09T00:00Z", "2026-01-13T00:00Z", "2026-01-16T00:00Z"]);
    expect(fires("0 0 1 * MON#1", "2026-01-01T00:00:00Z", 3)).toEqual(["2026-01-05T00:00Z", "2026-02-01T00:00Z", "2026-02-02T00:00Z"]);
  });

  test("only a bare * leaves a field unrestricted: */1 restricts, so the OR takes every day", () => {
    expect(fires("0 0 15 * *", "2026-01-01T00:00:00Z")).toEqual(["2026-01-15T00:00Z"]);
    expect(fires("0 0 15 * */1", "2026-01-01T00:00:00Z")).toEqual(["2026-01-02T00:00Z"]);
  });

  test("L-n is n days before the month's last", () => {
    expect(fires("0 0 L-3 * *", "2026-02-01T00:00:00Z", 2)).toEqual(["2026-02-25T00:00Z", "2026-03-28T00:00Z"]);
    // Day 1 of 31-day months only.
    expect(fires("0 0 L-30 * *", "2026-01-01T00:00:00Z", 2)).toEqual(["2026-03-01T00:00Z", "2026-05-01T00:00Z"]);
  });

  test("nW is the nearest weekday without leaving the month", () => {
    // 15 Feb and 15 Mar 2026 are Sundays (-> Monday), 15 Aug a Saturday (-> Friday).
    expect(fires("0 0 15W * *", "2026-02-01T00:00:00Z", 3)).toEqual(["2026-02-16T00:00Z", "2026-03-16T00:00Z", "2026-04-15T00:00Z"]);
    expect(fires("0 0 15W 8 *", "2026-01-01T00:00:00Z")).toEqual(["2026-08-14T00:00Z"]);
    // 1 Aug 2026 is a Saturday: not back into July but on to Monday the 3rd; 1 Nov a Sunday.
    expect(fires("0 0 1W * *", "2026-07-02T00:00:00Z", 4)).toEqual(["2026-08-03T00:00Z", "2026-09-01T00:00Z", "2026-10-01T00:00Z", "2026-11-02T00:00Z"]);
    // 31 May 2026 is a Sunday: not on to June but back to Friday the 29th.
    expect(fires("0 0 31W 5 *", "2026-01-01T00:00:00Z")).toEqual(["2026-05-29T00:00Z"]);
    // Saffron's: April has no 31st, but it would be Saturday 1 May 2027, so Friday 30 April.
    expect(fires("0 0 31W 4 *", "2026-01-01T00:00:00Z")).toEqual(["2027-04-30T00:00Z"]);
  });

  test("L-nW is the weekday nearest n days before the month's last", () => {
    // May 2026: L-1 is Saturday the 30th (-> Friday 29). March 2026: L-2 is Sunday the 29th (-> Monday 30).
    expect(fires("0 0 L-1W 5 *", "2026-01-01T00:00:00Z")).toEqual(["2026-05-29T00:00Z"]);
    expect(fires("0 0 L-2W 3 *", "2026-01-01T00:00:00Z")).toEqual(["2026-03-30T00:00Z"]);
    // May 2021 and January 2022 start on a Saturday: L-30 is the 1st, so Monday the 3rd.
    expect(fires("0 0 L-30W * *", "2021-04-01T00:00:00Z")).toEqual(["2021-05-03T00:00Z"]);
    expect(fires("0 0 L-30W * *", "2021-12-05T00:00:00Z")).toEqual(["2022-01-03T00:00Z"]);
  });

  test("7L is the last Saturday; 7 is Saturday, not Sunday", () => {
    expect(fires("0 0 * * 7L", "2020-01-01T00:00:00Z", 3)).toEqual(["2020-01-25T00:00Z", "2020-02-29T00:00Z", "2020-03-28T00:00Z"]);
    expect(fires("0 0 * * 7", "2026-01-01T00:00:00Z")).toEqual(["2026-01-03T00:00Z"]);
  });
});

describe("refusals", () => {
  const fields = "a cron expression has 5 (minute hour day-of-month month day-of-week)";
  test.each<[string, string, CronField | undefined]>([
    ["61 * * * *", "minute 61 is out of range 0-59", "minute"],
    ["0-60 * * * *", "minute 60 is out of range 0-59", "minute"],
    ["* 24 * * *", "hour 24 is out of range 0-23", "hour"],
    ["* * 0 * *", "day of month 0 is out of range 1-31", "day of month"],
    ["* * 32 * *", "day of month 32 is out of range 1-31", "day of month"],
    ["* * 32W * *", "day of month 32 is out of range 1-31", "day of month"],
    ["* * * 0 *", "month 0 is out of range 1-12", "month"],
    ["* * * 13 *", "month 13 is out of range 1-12", "month"],
    ["* * * * 0", "day of week 0 is out of range 1-7 (1 = Sunday, 7 = Saturday; Cloudflare has no 0)", "day of week"],
    ["* * * * 8", "day of week 8 is out of range 1-7", "day of week"],
    ["*/0 * * * *", "minute step 0 is out of range 1-59", "minute"],
    ["*/60 * * * *", "minute step 60 is out of range 1-59", "minute"],
    ["5/0 * * * *", "minute step 0 is out of range 1-59", "minute"],
    ["0 */24 * * *", "hour step 24 is out of range 1-23", "hour"],
    ["0 0 */31 * *", "day of month step 31 is out of range 1-30", "day of month"],
    ["0 0 1 */12 *", "month step 12 is out of range 1-11", "month"],
    ["0 0 * * */7", "day of week step 7 is out of range 1-6", "day of week"],
    ["0 0 * * 1-7/0", "day of week step 0 is out of range 1-6", "day of week"],
    ["* * L-0 * *", "day of month L-0 is out of range L-1 to L-30", "day of month"],
    ["* * L-31W * *", "day of month L-31 is out of range L-1 to L-30", "day of month"],
    ["* * * * MON#0", "day of week #0 is out of range #1 to #5 (the weekday's occurrence in the month)", "day of week"],
    ["* * * * MON#6", "day of week #6 is out of range #1 to #5 (the weekday's occurrence in the month)", "day of week"],
    ["0 0 ? * MON", `day of month "?" is not supported by Cloudflare; use *`, "day of month"],
    ["0 0 1 * ?", `day of week "?" is not supported by Cloudflare; use *`, "day of week"],
    ["*,5 * * * *", `minute "*" cannot start a list or range; use * alone, */step, or list the values`, "minute"],
    ["0 *-5 * * *", `hour "*" cannot start a list or range; use * alone, */step, or list the values`, "hour"],
    ["* * L,5 * *", `day of month "L,5" is not valid at ",5"; L stands alone in its field`, "day of month"],
    ["* * LW,1 * *", `day of month "LW,1" is not valid at ",1"; LW stands alone in its field`, "day of month"],
    ["* * 15W,20 * *", `day of month "15W,20" is not valid at ",20"; 15W stands alone in its field`, "day of month"],
    ["* * * * FRIL,MON", `day of week "FRIL,MON" is not valid at ",MON"; nL (last weekday n of the month) stands alone in its field`, "day of week"],
    ["* * * * MON#2,FRI", `day of week "MON#2,FRI" is not valid at ",FRI"; n#k (k-th weekday n of the month) stands alone in its field`, "day of week"],
    ["* * * * L,1", `day of week "L,1" is not valid at ",1"; L (Saturday) stands alone in its field`, "day of week"],
    ["* * 1-5W * *", `day of month "1-5W" is not valid at "W"; day of month takes 1-31 and * , - / L W`, "day of month"],
    ["* * 5,L * *", `day of month "5,L" is not valid at "L"; day of month takes 1-31 and * , - / L W`, "day of month"],
    ["* * * JANUARY *", `month "JANUARY" is not valid at "UARY"; month takes 1-12 or JAN-DEC and * , - /`, "month"],
    ["* * * JAN/FEB *", `month "JAN/FEB" is not valid at "FEB"; month takes 1-12 or JAN-DEC and * , - /`, "month"],
    ["* * * * MONDAY", `day of week "MONDAY" is not valid at "DAY"; day of week takes 1-7 (1 = Sunday) or SUN-SAT and * , - / L #`, "day of week"],
    ["* * * * MON-", `day of week "MON-" ends too soon; day of week takes 1-7 (1 = Sunday) or SUN-SAT and * , - / L #`, "day of week"],
    ["5- * * * *", `minute "5-" ends too soon; minute takes 0-59 and * , - /`, "minute"],
    ["1,,2 * * * *", `minute "1,,2" is not valid at ",2"; minute takes 0-59 and * , - /`, "minute"],
    ["x * * * *", `minute "x" is not valid at "x"; minute takes 0-59 and * , - /`, "minute"],
    ["* JAN * * *", `hour "JAN" is not valid at "JAN"; hour takes 0-23 and * , - /`, "hour"],
    ["* * * *", `has 4 fields; ${fields}`, undefined],
    ["0 * * * * *", `has 6 fields; ${fields}`, undefined],
    ["0 0 1 1 * 2027", `has 6 fields; ${fields}`, undefined],
    ["", `has 0 fields; ${fields}`, undefined],
    ["@daily", `macros such as @daily are not supported by Cloudflare; write 5 fields (minute hour day-of-month month day-of-week), e.g. "0 0 * * *" for daily`, undefined],
    ["@every 5m", `macros such as @every are not supported by Cloudflare; write 5 fields (minute hour day-of-month month day-of-week), e.g. "0 0 * * *" for daily`, undefined],
    [" * * * * *", "starts with whitespace, which Cloudflare refuses; remove it", undefined],
    ["* * * * *\t", "ends with whitespace, which Cloudflare refuses; remove it", undefined],
    ["* * *\n* *", "contains whitespace other than spaces and tabs (a line break?); fields are separated by spaces or tabs", undefined],
  ])("%j", (expression, message, field) => {
    let caught: unknown;
    try {
      parseCron(expression);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(CronExpressionError);
    const error = caught as CronExpressionError;
    expect(error.message).toBe(`cron ${JSON.stringify(expression)}: ${message}`);
    expect(error.code).toBe("ERR_CRON_EXPRESSION");
    expect(error.field).toBe(field);
  });

  test("the error's name carries its code", () => {
    expect(() => parseCron("61 * * * *")).toThrow(expect.objectContaining({ name: "CronExpressionError [ERR_CRON_EXPRESSION]" }));
  });

  test("the schedule keeps the expression as written", () => {
    expect(parseCron("0\t12  * * MON").expression).toBe("0\t12  * * MON");
  });
});
