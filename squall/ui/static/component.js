// The component page: a spout's or bolt's statistics per window, per input and output stream,
// per executor (its tasks), and its errors with time, task, host and a link to the worker log.
"use strict";

(() => {
  const {api, el, table, fill, param, windowParam, windowChooser, componentLink, logLink, topologyLink, statusTag, when} = Squall;
  const id = param("id");
  const topologyId = param("topology_id");
  const win = windowParam();
  const enc = encodeURIComponent;
  const DEAD_TIP = "Records the spout gave up to its dead letters (a bolt's: those of them it failed last, and those a Trident spout's bolt gave up)";

  function logCell(port, given) {
    const l = logLink(topologyId, port, given);
    return l ? el("a", {href: l}, "worker.log") : "";
  }

  function render_(c) {
    const spout = c.componentType === "spout";
    document.title = `${c.id} - squall UI`;
    fill("crumb", c.id);
    const crumb = document.getElementById("topology-crumb");
    crumb.textContent = c.name || topologyId;
    crumb.href = "/topology.html?id=" + enc(topologyId);
    fill("summary", table([
      ["Id", "id"], ["Topology", x => topologyLink(x.topologyId, x.name || x.topologyId)],
      ["Type", "componentType"], ["Executors", "executors", {num: true}], ["Tasks", "tasks", {num: true}],
      ["Topology status", x => statusTag(x.topologyStatus)], ["Debug", x => String(!!x.debug)],
    ], [c]));
    fill("window-choice", windowChooser());
    document.getElementById("stats-title").firstChild.textContent = spout ? "Spout Stats " : "Bolt Stats ";
    for (const n of document.querySelectorAll(".window-name")) n.textContent = "(" + (c.windowHint || "") + ")";
    const common = [["Window", s => s.windowPretty || s.window], ["Emitted", "emitted", {num: true}],
                    ["Transferred", "transferred", {num: true}]];
    if (spout) {
      fill("window-stats", table([...common,
        ["Complete latency (ms)", "completeLatency", {num: true}],
        ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}], ["Dead-lettered", "deadLettered", {num: true, tip: DEAD_TIP}]], c.spoutSummary || []));
    } else {
      fill("window-stats", table([...common,
        ["Execute latency (ms)", "executeLatency", {num: true}], ["Executed", "executed", {num: true}],
        ["Process latency (ms)", "processLatency", {num: true}], ["Capacity", "capacity", {num: true}],
        ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}], ["Dead-lettered", "deadLettered", {num: true, tip: DEAD_TIP}]], c.boltStats || []));
    }
    document.getElementById("input-section").hidden = spout;
    if (!spout) {
      fill("inputs", table([
        // "": the acker's acks and fails, which reach it without their sender
        ["Component", s => s.component ? componentLink(topologyId, s.component) : "(any task)"], ["Stream", "stream"],
        ["Execute latency (ms)", "executeLatency", {num: true}], ["Executed", "executed", {num: true}],
        ["Process latency (ms)", "processLatency", {num: true}],
        ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}],
      ], c.inputStats || []));
    }
    const outputs = [["Stream", "stream"], ["Emitted", "emitted", {num: true}], ["Transferred", "transferred", {num: true}]];
    if (spout) outputs.push(["Complete latency (ms)", "completeLatency", {num: true}],
                            ["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}]);
    fill("outputs", table(outputs, c.outputStats || []));
    // why: by spout, the component that failed the records last ("" none did: a timeout, a worker
    // lost, a record the spout could not read) and the failure's kind
    fill("dead-letters", table([
      ["Spout", d => componentLink(topologyId, d.spout)],
      ["Failed by", d => d.failedBy ? componentLink(topologyId, d.failedBy) : "(no component)"],
      ["Reason", "reason"], ["Dead-lettered", "deadLettered", {num: true}],
    ], c.deadLetterStats || [], "No dead letters"));
    const executors = [["Id (tasks)", "id"], ["Host", "host"], ["Port", "port", {num: true, plain: true}], ["Uptime", "uptime"],
                       ["Emitted", "emitted", {num: true}], ["Transferred", "transferred", {num: true}]];
    if (spout) executors.push(["Complete latency (ms)", "completeLatency", {num: true}], ["Dead-lettered", "deadLettered", {num: true, tip: DEAD_TIP}],
                              ["Max spout pending", "maxSpoutPending",
                               {num: true, tip: "The executor's limit now: fixed, automatic, or found by the tuner (auto)"}]);
    else executors.push(["Capacity", "capacity", {num: true}], ["Execute latency (ms)", "executeLatency", {num: true}],
                        ["Executed", "executed", {num: true}], ["Process latency (ms)", "processLatency", {num: true}]);
    executors.push(["Acked", "acked", {num: true}], ["Failed", "failed", {num: true}],
                   ["Log", e => logCell(e.port, e.workerLogLink)]);
    fill("executors", table(executors, c.executorStats || []));
    const errors = [...(c.componentErrors || [])].sort((a, b) => Number(b.errorTime) - Number(a.errorTime));
    fill("errors", table([
      ["Time", e => when(e.errorTime)], ["Task", e => e.errorTask ?? "", {num: true, plain: true}],
      ["Host", "errorHost"], ["Port", "errorPort", {num: true, plain: true}],
      ["Count", e => e.errorCount ?? 1, {num: true, tip: "Times it happened in a row"}],
      ["Error", e => el("pre", {class: "error-text"}, e.error)],
      ["Log", e => logCell(e.errorPort, e.errorWorkerLogLink)],
    ], errors, "No errors reported"));
  }

  async function render() {
    const c = await api(`/topology/${enc(topologyId)}/component/${enc(id)}?window=${enc(win)}`);
    render_(c);
  }

  if (!id || !topologyId) Squall.banner("error", "The address needs ?id=<component>&topology_id=<topology id>.");
  else Squall.every(render);
})();
