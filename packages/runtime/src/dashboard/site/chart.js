import { h } from "preact";
import { useEffect, useRef } from "preact/hooks";
import htm from "htm";
import uPlot from "uplot";

const html = htm.bind(h);
const colors = ["#2563eb", "#d97706", "#059669", "#dc2626", "#7c3aed", "#0891b2", "#65a30d", "#db2777"];

/** Backlog over time, a line per queue: `times` in seconds, `series` as [{ label, values }]. */
export function BacklogChart({ times, series }) {
  const box = useRef(null);
  const plot = useRef(null);
  const labels = series.map((s) => s.label).join("\n");
  useEffect(() => {
    const opts = {
      width: Math.max(320, box.current.clientWidth),
      height: 160,
      legend: { show: true },
      scales: { y: { range: (u, min, max) => /** @type {[number, number]} */ ([0, Math.max(1, max)]) } },
      series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: colors[i % colors.length], width: 1.5 }))],
      axes: [{}, { label: "backlog" }],
    };
    plot.current = new uPlot(opts, [times, ...series.map((s) => s.values)], box.current);
    return () => plot.current.destroy();
  }, [labels]);
  useEffect(() => {
    plot.current?.setData([times, ...series.map((s) => s.values)]);
  });
  return html`<div class="chart" ref=${box} data-testid="backlog-chart"></div>`;
}
