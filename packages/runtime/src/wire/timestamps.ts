/**
 * RFC 3339 timestamps, the form CloudEvents' `time` and every time field of the API take. Kept to
 * nanoseconds so a protobuf Timestamp survives a trip through JSON unchanged.
 */
const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

export interface Instant {
  /** Whole seconds since the epoch. */
  seconds: number;
  nanos: number;
}

export function parseRfc3339(text: string): Instant | undefined {
  const m = rfc3339.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 60) return undefined;
  // Not Date.UTC, which reads years 0 to 99 as 1900 to 1999: Go's zero time, 0001-01-01, would
  // come back as 1901.
  const date = new Date(0);
  const dayMs = date.setUTCFullYear(year, month - 1, day);
  if (new Date(dayMs).getUTCDate() !== day || day < 1) return undefined;
  let offsetMinutes = 0;
  if (m[8] === undefined) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    offsetMinutes = (m[9] === "-" ? -1 : 1) * (oh * 60 + om);
  }
  // A leap second is read as the last instant of its minute.
  const seconds = Math.floor(dayMs / 1000) + hour * 3600 + minute * 60 + Math.min(second, 59) - offsetMinutes * 60;
  // RFC 3339 bounds no fraction; digits past the ninth are finer than a protobuf Timestamp holds.
  const nanos = m[7] === undefined ? 0 : Number(m[7].slice(0, 9).padEnd(9, "0"));
  return { seconds, nanos };
}

export function instantToMs(instant: Instant): number {
  return instant.seconds * 1000 + Math.floor(instant.nanos / 1e6);
}

export function msToInstant(ms: number): Instant {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1e6 };
}

/** UTC, `Z`, fractional digits only as many as needed (3, 6 or 9). */
export function formatRfc3339(instant: Instant): string {
  const base = new Date(instant.seconds * 1000).toISOString().slice(0, 19);
  if (instant.nanos === 0) return `${base}Z`;
  let fraction = String(instant.nanos).padStart(9, "0");
  if (fraction.endsWith("000000")) fraction = fraction.slice(0, 3);
  else if (fraction.endsWith("000")) fraction = fraction.slice(0, 6);
  return `${base}.${fraction}Z`;
}

export function formatMs(ms: number): string {
  return new Date(ms).toISOString();
}
