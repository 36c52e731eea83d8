import {
  Registry,
  openMetricsContentType,
  prometheusContentType,
  type Metric,
  type MetricObjectWithValues,
  type MetricValue,
  type RegistryContentType,
} from "prom-client";

export interface Exposition {
  contentType: string;
  body: string;
}

/**
 * Whether the scraper asked for OpenMetrics (Prometheus sends `application/openmetrics-text` first
 * in its Accept when it can read it); anything else gets the Prometheus text format 0.0.4.
 */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(",").some((part) => {
    const [type, ...params] = part.trim().split(";");
    if (type?.trim().toLowerCase() !== "application/openmetrics-text") return false;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    return q === undefined || Number(q.slice(2)) > 0;
  });
}

/**
 * `source`'s metrics in the format asked for, with only the per-queue series of `environment`
 * when one is given (series without an environment label, the host's, are always in). Written by
 * prom-client from a registry of views made for this one answer: the OpenMetrics writer renames
 * the counters it is given, and the source's own must keep their names for the next scrape.
 */
export async function expose(source: Registry, options: { openMetrics: boolean; environment?: string }): Promise<Exposition> {
  const view = new Registry<RegistryContentType>();
  view.setContentType(options.openMetrics ? openMetricsContentType : prometheusContentType);
  for (const metric of source.getMetricsAsArray()) view.registerMetric(viewOf(metric as unknown as Metric, options.environment));
  return { contentType: view.contentType, body: await view.metrics() };
}

function viewOf(metric: Metric, environment: string | undefined): Metric {
  const m = metric as unknown as { name: string; help: string; type: string; get(): Promise<MetricObjectWithValues<MetricValue<string>>> };
  const view = {
    name: m.name,
    help: m.help,
    type: m.type,
    async get() {
      // Under the name the writer gave the view (an OpenMetrics counter's, without `_total`).
      const data = { ...(await m.get()), name: view.name };
      if (environment === undefined) return data;
      const values = data.values.filter((v) => {
        const env = (v.labels as Record<string, unknown>)["environment"];
        return env === undefined || env === environment;
      });
      return { ...data, values };
    },
  };
  return view as unknown as Metric;
}
