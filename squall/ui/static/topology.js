// The topology page: summary and actions, Storm's statistics tables in the chosen window, the
// last minutes as charts, the graph, spouts, bolts, workers, errors and configuration.
"use strict";

(() => {
  const {api, el, table, fill, param, windowParam, windowChooser, componentLink, logLink, statusTag, when} = Squall;
  const id = param("id");
  const win = windowParam();
  const enc = encodeURIComponent;
  const DEAD_TIP = "Records the spout gave up to its dead letters (a bolt's: those of them it failed last)";
  const BOLT_DEAD_TIP = "Records the spouts gave up to their dead letters after this bolt failed them last, and those this bolt gave up (a Trident spout's, spout-<txid>; a sink's dead_letter rows)";

  function errorCell(topologyId, c) {
    if (!c.lastError) return "";
    const link = logLink(topologyId, c.errorPort, c.errorWorkerLogLink);
    return el("span", {class: "error-text", title: c.lastError},
              c.lastError.split("\n")[0] + times(c.errorCount), link ? [" ", el("a", {href: link}, "log")] : null);
  }

  /** " (xN)" for an error that happened N > 1 times in a row (one record counted), as the CLI says it. */
  function times(count) {
    return count > 1 ? ` (x${count})` : "";
  }

  function renderSummary(t) {
    document.title = `${t.name} - squall UI`;
    fill("crumb", t.name);
    fill("summary", table([
      ["Name", "name"], ["Id", "id"], ["Status", x => statusTag(x.status)], ["Uptime", "uptime"],
      ["Workers", "workersTotal", {num: true}], ["Executors", "executorsTotal", {num: true}],
      ["Tasks", "tasksTotal", {num: true}], ["Message timeout (s)", "msgTimeout", {num: true}],
      // the statistics' own sampling, which makes a bolt's counts and every latency estimates;
      // Storm's samplingPct beside it is the debug switch's, not the statistics' (it read as
      // "Sampling % 10" whatever topology.stats.sample.rate said)
      ["Stats sample rate", x => (x.configuration || {})["topology.stats.sample.rate"] ?? "",
       {num: true, tip: "topology.stats.sample.rate: below 1, executed, a bolt's acked and the latencies are estimates"}],
      ["Debug", x => String(!!x.debug)],
      ["Debug sampling %", "samplingPct", {num: true, tip: "The debug switch's sampling percent (Storm's; squall has no event logger)"}],
    ], [t]));
    fill("actions", Squall.actionButtons(t.id, t.name, t.status, () => render()));
    fill("window-choice", windowChooser());
    for (const n of document.querySelectorAll(".window-name")) n.textContent = "(" + (t.windowHint || "") + ")";
  }

  function renderTrident(tr) {
    document.getElementById("trident-section").hidden = !tr;
    if (!tr) return;
    // a row per batch group (a connected part of the topology): each numbers its own txids
    fill("trident", table([
      ["Coordinator", "coordinator"],
      ["Current txid", "currentTxid", {num: true, plain: true, tip: "The oldest txid not committed yet"}],
      ["Batches in flight", "batchesInFlight", {num: true}],
      ["Max in flight", "maxBatchesInFlight", {num: true, tip: "topology.max.spout.pending"}],
      ["Batches committed", "batchesCommitted", {num: true}],
      ["Batch latency (ms)", "batchLatency", {num: true}],
    ], tr.groups || []));
    fill("trident-stats", table([
      ["Window", s => s.windowPretty || s.window], ["Batches committed", "batchesCommitted", {num: true}],
      ["Batch latency (ms)", "batchLatency", {num: true, tip: "Mean time from a txid's first $batch to its commit"}],
    ], tr.stats || []));
  }

  function renderStats(t) {
    fill("topology-stats", table([
      ["Window", s => s.windowPretty || s.window], ["Emitted", "emitted", {num: true}],
      ["Transferred", "transferred", {num: true}],
      ["Complete latency (ms)", "completeLatency", {num: true, tip: "Average time from a spout emit to its tuple tree's ack"}],
      ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}], ["Dead-lettered", "deadLettered", {num: true, tip: DEAD_TIP}],
    ], t.topologyStats || []));
    renderTrident(t.trident);
    fill("spouts", table([
      ["Id", s => componentLink(t.id, s.spoutId)], ["Executors", "executors", {num: true}],
      ["Tasks", "tasks", {num: true}], ["Emitted", "emitted", {num: true}],
      ["Transferred", "transferred", {num: true}], ["Complete latency (ms)", "completeLatency", {num: true}],
      ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}], ["Dead-lettered", "deadLettered", {num: true, tip: DEAD_TIP}],
      ["Last error", s => errorCell(t.id, s)],
    ], t.spouts || []));
    fill("bolts", table([
      ["Id", b => componentLink(t.id, b.boltId)], ["Executors", "executors", {num: true}],
      ["Tasks", "tasks", {num: true}], ["Emitted", "emitted", {num: true}],
      ["Transferred", "transferred", {num: true}],
      ["Capacity", "capacity", {num: true, tip: "Share of the window the executor was busy: executed x execute latency / window"}],
      ["Execute latency (ms)", "executeLatency", {num: true}], ["Executed", "executed", {num: true}],
      ["Process latency (ms)", "processLatency", {num: true}],
      ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}],
      ["Dead-lettered", "deadLettered", {num: true, tip: BOLT_DEAD_TIP}],
      ["Last error", b => errorCell(t.id, b)],
    ], t.bolts || []));
    fill("workers", table([
      ["Host", "host"], ["Port", "port", {num: true, plain: true}], ["Uptime", "uptime"],
      ["Executors", "executorsTotal", {num: true}],
      ["Components", w => Object.entries(w.componentNumTasks || {}).map(([c, n]) => `${c} (${n})`).join(", ")],
      ["CPU (s)", w => (w.cpuSecs ?? 0).toFixed(1), {num: true, tip: "CPU time of the worker's process"}],
      ["Memory (MB)", w => ((w.rssBytes ?? 0) / 1048576).toFixed(1), {num: true, tip: "Resident memory of the worker's process"}],
      ["GC runs", "gcCollections", {num: true, tip: "Garbage collector runs in the worker's process"}],
      ["Restarts", "restarts", {num: true, tip: "Times the slot was launched again after its worker died"}],
      ["Log", w => { const l = logLink(t.id, w.port, w.workerLogLink); return l ? el("a", {href: l}, "worker.log") : ""; }],
    ], t.workers || []));
    // the master's records of the workers (a worker killed by a signal, restarted for its
    // silence, ...) first, newest first: no component's, so under their own id, not a link
    const workerErrors = (t.workerErrors || []).map(e => [e.component, {...e, lastError: e.error, worker: true}]);
    const errors = [...workerErrors, ...(t.spouts || []).map(s => [s.spoutId, s]),
                    ...(t.bolts || []).map(b => [b.boltId, b])]
      .filter(([, c]) => c.lastError);
    fill("errors", table([
      ["Component", ([cid, c]) => c.worker ? cid : componentLink(t.id, cid)],
      ["Time", ([, c]) => when(c.errorTime)], ["Host", ([, c]) => c.errorHost],
      ["Port", ([, c]) => c.errorPort, {num: true, plain: true}],
      ["Count", ([, c]) => c.errorCount ?? 1, {num: true, tip: "Times it happened in a row"}],
      ["Error", ([, c]) => el("pre", {class: "error-text"}, c.lastError)],
      ["Log", ([, c]) => { const l = logLink(t.id, c.errorPort, c.errorWorkerLogLink); return l ? el("a", {href: l}, "worker.log") : ""; }],
    ], errors, "No errors reported"));
    const conf = t.configuration || {};
    fill("configuration", table([["Key", "key"], ["Value", r => JSON.stringify(r.value)]],
      Object.keys(conf).sort().map(key => ({key, value: conf[key]}))));
  }

  async function render() {
    const base = `/topology/${enc(id)}`;
    const [t, viz, history] = await Promise.all([
      api(`${base}?window=${enc(win)}`), api(`${base}/visualization?window=${enc(win)}`),
      api(`${base}/history`)]);
    renderSummary(t);
    renderStats(t);
    SquallCharts.draw(document.getElementById("charts"), history);
    SquallGraph.draw(document.getElementById("graph"), viz);
  }

  if (!id) Squall.banner("error", "No topology id in the address (topology.html?id=...).");
  else Squall.every(render);
})();
