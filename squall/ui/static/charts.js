// Line charts of a topology's last minutes (acked/s, complete latency, failed/s), drawn in SVG
// from the daemon's /api/v1/topology/<id>/history samples.
"use strict";

const SquallCharts = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const W = 360, H = 170, L = 52, R = 12, T = 26, B = 24;

  function svg(tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function short(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + "k";
    return Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 2 : 1);
  }

  /** One chart: samples [{time, ...}], key the field to plot, title and unit for the labels. */
  function chart(samples, key, title, unit, colour) {
    const root = svg("svg", {class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`,
                             "data-series": key, role: "img", "aria-label": title});
    const last = samples.length ? samples[samples.length - 1][key] : null;
    root.append(svg("text", {x: L, y: 16, class: "chart-title"}, title));
    root.append(svg("text", {x: W - R, y: 16, "text-anchor": "end", class: "chart-now"},
                    last === null ? "no samples yet" : `${short(last)} ${unit}`));
    const plotW = W - L - R, plotH = H - T - B;
    const max = niceMax(Math.max(0, ...samples.map(s => s[key])));
    for (const f of [0, 0.5, 1]) {
      const y = T + plotH * (1 - f);
      root.append(svg("line", {x1: L, x2: W - R, y1: y, y2: y, class: "grid"}));
      root.append(svg("text", {x: L - 6, y: y + 4, "text-anchor": "end", class: "axis"}, short(max * f)));
    }
    if (samples.length) {
      const t1 = samples[samples.length - 1].time;
      const t0 = Math.min(samples[0].time, t1 - 60);
      const span = t1 - t0;
      const x = t => L + plotW * (t - t0) / span;
      const y = v => T + plotH * (1 - v / max);
      const pts = samples.map(s => `${x(s.time).toFixed(1)},${y(s[key]).toFixed(1)}`);
      root.append(svg("polygon", {points: `${x(samples[0].time).toFixed(1)},${T + plotH} ${pts.join(" ")} ${x(t1).toFixed(1)},${T + plotH}`,
                                  fill: colour, "fill-opacity": "0.15"}));
      root.append(svg("polyline", {points: pts.join(" "), fill: "none", stroke: colour, "stroke-width": "2"}));
      const minutes = Math.round(span / 60);
      root.append(svg("text", {x: L, y: H - 6, class: "axis"}, `-${minutes >= 1 ? minutes + " min" : Math.round(span) + " s"}`));
      root.append(svg("text", {x: W - R, y: H - 6, "text-anchor": "end", class: "axis"}, "now"));
    }
    return root;
  }

  /** Draws the three charts of a history answer into container. */
  function draw(container, history) {
    // The first sample has no rate (nothing before it): leave it out of the rate charts.
    const samples = history.samples || [];
    const rated = samples.slice(1);
    container.replaceChildren(
      chart(rated, "ackedPerSec", "Throughput (acked/s)", "/s", "#2b7bd6"),
      chart(samples, "completeLatency", "Complete latency (ms)", "ms", "#8a5cd6"),
      chart(rated, "failedPerSec", "Failures (failed/s)", "/s", "#d64b3b"));
  }

  return {draw, chart};
})();
