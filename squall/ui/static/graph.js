// The topology drawn as the paper's visualisation, from /api/v1/topology/<id>/visualization.
// A layered layout instead of Storm's force layout (arbor.js): spouts in the left column, each
// bolt one column right of its deepest input, so the picture is stable between refreshes.
// Colours, labels and edge weights follow Storm's visualization.js (STORM-OPERATIONS 3.2).
"use strict";

const SquallGraph = (() => {
  const SVG = "http://www.w3.org/2000/svg";
  const NODE_W = 150, NODE_H = 46, COL_GAP = 190, ROW_GAP = 40, PAD = 30, LEGEND_W = 56, MIN_H = 150;

  function svg(tag, attrs, text) {
    const n = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) n.setAttribute(k, v);
    if (text !== undefined) n.textContent = text;
    return n;
  }

  /** Storm's bolt colour: cap = min(capacity, 1); red = floor(cap*225)+30, green = 255-red, blue = green/5. */
  function capacityColour(capacity) {
    const cap = Math.max(0, Math.min(Number(capacity) || 0, 1));
    const red = Math.floor(cap * 225) + 30, green = 255 - red, blue = Math.floor(green / 5);
    return [red, green, blue];
  }

  /** Column of every component: spouts 0, a bolt 1 + its deepest input (cycles cut). */
  function depths(viz) {
    const depth = {};
    const visiting = new Set();
    function of(id) {
      if (depth[id] !== undefined) return depth[id];
      const c = viz[id];
      if (!c || c[":type"] === "spout") return (depth[id] = 0);
      if (visiting.has(id)) return 0;
      visiting.add(id);
      const inputs = (c[":inputs"] || []).map(i => i[":component"]).filter(s => s in viz && s !== id);
      const d = inputs.length ? 1 + Math.max(...inputs.map(of)) : 0;
      visiting.delete(id);
      return (depth[id] = d);
    }
    Object.keys(viz).forEach(of);
    return depth;
  }

  /** Tuples a component sent on one stream in the 10-minute window, summed over its executors. */
  function streamTransferred(component, saniStream) {
    let total = 0;
    for (const ex of (component && component[":stats"]) || []) {
      const byWindow = ex[":transferred"] || {};
      const w = byWindow["600"] || byWindow[":all-time"] || {};
      total += Number(w[saniStream] || 0);
    }
    return total;
  }

  /** Positions: columns by depth, rows ordered by their inputs' mean row (fewer crossings). */
  function layout(viz) {
    const depth = depths(viz);
    const columns = [];
    for (const id of Object.keys(viz).sort()) (columns[depth[id]] = columns[depth[id]] || []).push(id);
    const row = {};
    columns.forEach((col, d) => {
      if (d > 0) {
        const mean = id => {
          const rows = (viz[id][":inputs"] || []).map(i => row[i[":component"]]).filter(r => r !== undefined);
          return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : 0;
        };
        col.sort((a, b) => mean(a) - mean(b) || a.localeCompare(b));
      }
      col.forEach((id, i) => { row[id] = i; });
    });
    const tallest = Math.max(1, ...columns.map(c => (c ? c.length : 0)));
    const height = Math.max(MIN_H, PAD * 2 + tallest * NODE_H + (tallest - 1) * ROW_GAP);
    const pos = {};
    columns.forEach((col, d) => {
      const colHeight = col.length * NODE_H + (col.length - 1) * ROW_GAP;
      col.forEach((id, i) => {
        pos[id] = {x: LEGEND_W + PAD + d * (NODE_W + COL_GAP),
                   y: (height - colHeight) / 2 + i * (NODE_H + ROW_GAP)};
      });
    });
    const width = LEGEND_W + PAD * 2 + columns.length * NODE_W + Math.max(0, columns.length - 1) * COL_GAP;
    return {pos, width, height};
  }

  function legend(root, height) {
    const defs = svg("defs");
    const grad = svg("linearGradient", {id: "cap-gradient", x1: "0", y1: "1", x2: "0", y2: "0"});
    for (const stop of [0, 0.5, 1]) {
      const [r, g, b] = capacityColour(stop);
      grad.append(svg("stop", {offset: String(stop), "stop-color": `rgb(${r},${g},${b})`}));
    }
    defs.append(grad);
    // userSpaceOnUse: the arrow keeps its size whatever the edge's width
    defs.append(svg("marker", {id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerUnits: "userSpaceOnUse",
                               markerWidth: "12", markerHeight: "12", orient: "auto-start-reverse"}));
    defs.lastChild.append(svg("path", {d: "M 0 0 L 10 5 L 0 10 z", fill: "#8a94a6"}));
    root.append(defs);
    const top = 12, barH = height - 44;
    root.append(svg("rect", {x: 8, y: top, width: 12, height: barH, fill: "url(#cap-gradient)", rx: 2}));
    root.append(svg("text", {x: 24, y: top + 8, class: "legend"}, "1.0"));
    root.append(svg("text", {x: 24, y: top + barH, class: "legend"}, "0"));
    root.append(svg("text", {x: 4, y: top + barH + 16, class: "legend"}, "capacity"));
  }

  /** Draws viz (the visualization JSON) into the element container. */
  function draw(container, viz) {
    const ids = Object.keys(viz);
    if (!ids.length) {
      container.replaceChildren(document.createTextNode("No components to draw."));
      return;
    }
    const {pos, width, height} = layout(viz);
    const root = svg("svg", {class: "topology-graph", width, height, viewBox: `0 0 ${width} ${height}`,
                             role: "img", "aria-label": "topology graph"});
    legend(root, height);

    const edges = [];
    for (const [target, c] of Object.entries(viz)) {
      for (const input of c[":inputs"] || []) {
        const source = input[":component"];
        if (!(source in viz)) continue;
        edges.push({source, target, stream: input[":stream"], grouping: input[":grouping"],
                    count: streamTransferred(viz[source], input[":sani-stream"])});
      }
    }
    const total = edges.reduce((a, e) => a + e.count, 0);
    const edgeLayer = svg("g", {class: "edges"});
    for (const e of edges) {
      const weight = total ? e.count / total : 0;
      const a = pos[e.source], b = pos[e.target];
      let d;
      if (e.source === e.target) {
        d = `M ${a.x + NODE_W - 30} ${a.y} C ${a.x + NODE_W} ${a.y - 40}, ${a.x + NODE_W + 30} ${a.y}, ${a.x + NODE_W} ${a.y + 12}`;
      } else {
        const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2;
        const backwards = b.x <= a.x;
        const x2 = backwards ? b.x + NODE_W / 2 : b.x, y2 = backwards ? b.y : b.y + NODE_H / 2;
        const mid = (x1 + x2) / 2;
        d = `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`;
      }
      const g = svg("g", {class: "edge", "data-source": e.source, "data-target": e.target, "data-stream": e.stream});
      const label = `${e.stream}: ${e.count.toLocaleString("en-US")}: ${(weight * 100).toFixed(1)}%`;
      g.append(svg("title", {}, `${e.source} -> ${e.target} (${e.grouping})\n${label} of the tuples transferred in the last 10 minutes`));
      g.append(svg("path", {d, "stroke-width": (1.5 + 10 * weight).toFixed(2), "marker-end": "url(#arrow)"}));
      const lx = e.source === e.target ? a.x + NODE_W + 6 : (a.x + NODE_W + b.x) / 2;
      const ly = e.source === e.target ? a.y - 14 : (a.y + b.y + NODE_H) / 2 - 8 - 5 * weight;
      g.append(svg("text", {x: lx, y: ly, "text-anchor": "middle", class: "edge-label"}, label));
      edgeLayer.append(g);
    }
    root.append(edgeLayer);

    const nodeLayer = svg("g", {class: "nodes"});
    for (const id of ids) {
      const c = viz[id], p = pos[id];
      const spout = c[":type"] === "spout";
      const [r, g, b] = spout ? [0, 0, 255] : capacityColour(c[":capacity"]);
      const dark = 0.299 * r + 0.587 * g + 0.114 * b < 150;
      const latency = Number(c[":latency"] || 0);
      const link = svg("a", {href: c[":link"] || "#", class: "node", "data-component": id, "data-type": c[":type"]});
      link.append(svg("title", {}, spout ? `spout ${id}: complete latency ${latency.toFixed(2)} ms`
        : `bolt ${id}: capacity ${Number(c[":capacity"] || 0).toFixed(3)}, process latency ${latency.toFixed(2)} ms`));
      link.append(svg("rect", {x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: spout ? 22 : 6,
                               fill: `rgb(${r},${g},${b})`}));
      const ink = dark ? "#ffffff" : "#111111";
      link.append(svg("text", {x: p.x + NODE_W / 2, y: p.y + 19, "text-anchor": "middle", fill: ink, class: "node-name"}, id));
      const detail = spout ? `${latency.toFixed(2)} ms` : `${latency.toFixed(2)} ms · cap ${Number(c[":capacity"] || 0).toFixed(2)}`;
      link.append(svg("text", {x: p.x + NODE_W / 2, y: p.y + 35, "text-anchor": "middle", fill: ink, class: "node-detail"}, detail));
      nodeLayer.append(link);
    }
    root.append(nodeLayer);
    container.replaceChildren(root);
  }

  return {draw, layout, depths, capacityColour};
})();
