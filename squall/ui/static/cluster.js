// The cluster page: Storm's cluster, nimbus, topology and supervisor summaries.
"use strict";

(() => {
  const {api, table, fill, topologyLink, statusTag} = Squall;

  async function render() {
    const [cluster, nimbus, topologies, supervisors] = await Promise.all([
      api("/cluster/summary"), api("/nimbus/summary"), api("/topology/summary"), api("/supervisor/summary")]);
    fill("cluster", table([
      ["Version", "stormVersion"],
      ["Supervisors", "supervisors", {num: true}],
      ["Used slots", "slotsUsed", {num: true}],
      ["Free slots", "slotsFree", {num: true}],
      ["Total slots", "slotsTotal", {num: true}],
      ["Executors", "executorsTotal", {num: true}],
      ["Tasks", "tasksTotal", {num: true}],
    ], [cluster]));
    fill("nimbus", table([
      ["Host", "host"], ["Port", "port", {num: true, plain: true}], ["Status", "status"],
      ["Version", "version"], ["Uptime", "nimbusUpTime"],
    ], nimbus.nimbuses || []));
    fill("topologies", table([
      ["Name", t => topologyLink(t.id, t.name)], ["Id", "id"], ["Status", t => statusTag(t.status)],
      ["Uptime", "uptime"], ["Workers", "workersTotal", {num: true}],
      ["Executors", "executorsTotal", {num: true}], ["Tasks", "tasksTotal", {num: true}],
    ], topologies.topologies || [], "No topologies running"));
    fill("supervisors", table([
      ["Id", "id"], ["Host", "host"], ["Uptime", "uptime"],
      ["Slots", "slotsTotal", {num: true}], ["Used slots", "slotsUsed", {num: true}],
    ], supervisors.supervisors || [], "No supervisors"));
  }

  Squall.every(render);
})();
