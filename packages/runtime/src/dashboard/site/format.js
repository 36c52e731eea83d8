export function age(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${Math.floor(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.floor(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

export function rate(perSecond) {
  if (perSecond === undefined) return "—";
  return perSecond < 10 ? perSecond.toFixed(1) : String(Math.round(perSecond));
}

export function shortName(name) {
  return name.slice(name.lastIndexOf("/") + 1);
}

const previewChars = 200;

/** A message's body as the page shows it: JSON and text as written, v8 and bytes as "binary". */
export function preview(message) {
  const type = message.content_type;
  const event = message.event ?? {};
  if (type === "v8") return "binary (v8)";
  if ("data_base64" in event) return `binary (${Math.floor((event.data_base64.length * 3) / 4)} bytes)`;
  if (!("data" in event)) return "(no data)";
  const text = typeof event.data === "string" ? event.data : JSON.stringify(event.data);
  return text.length > previewChars ? `${text.slice(0, previewChars)}…` : text;
}
