// What every page of squall's web UI shares: fetching the REST API (with the "master down"
// banner on 503), building tables, the window choice, live refresh and the action dialog.
// Plain JS with no build step and no CDN, so the UI works offline.
"use strict";

const Squall = (() => {
  const SECRET_KEY = "squall.secret";  // sessionStorage only: gone when the tab closes
  const REFRESH_MS = 5000;
  const WINDOWS = [["600", "10m"], ["10800", "3h"], ["86400", "1d"], [":all-time", "All time"]];

  class ApiError extends Error {
    constructor(status, body) {
      super((body && (body.errorMessage || body.error)) || `HTTP ${status}`);
      this.status = status;
      this.body = body;
    }
  }

  /** Creates an element: el("a", {href: "x", class: "c"}, "text", child, ...). */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function banner(kind, text) {
    const b = document.getElementById("banner");
    if (!b) return;
    if (!text) { b.hidden = true; b.textContent = ""; b.className = ""; return; }
    b.className = "banner " + kind;
    b.textContent = text;
    b.hidden = false;
  }

  /** GETs (or POSTs) /api/v1 + path and returns its JSON; shows the banner on 503 or no answer. */
  async function api(path, opts) {
    let resp;
    try {
      resp = await fetch("/api/v1" + path, opts);
    } catch (e) {
      banner("down", "The UI daemon does not answer (" + e.message + "). Retrying every few seconds.");
      throw e;
    }
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (resp.status === 503) {
      const why = body && body.errorMessage ? ": " + body.errorMessage : "";
      banner("down", "The master is down or unreachable" + why +
             ". The figures below are the last ones seen; the page retries every few seconds.");
      throw new ApiError(resp.status, body);
    }
    if (!resp.ok) throw new ApiError(resp.status, body);
    if (!opts || !opts.method || opts.method === "GET") banner(null, null);
    return body;
  }

  function param(name) { return new URLSearchParams(location.search).get(name); }

  function fmt(v) {
    if (v === null || v === undefined || v === "") return "";
    if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString("en-US") : v.toFixed(3);
    return String(v);
  }

  /** A table: columns are [title, value(row) or key, {num, plain, tip}] (plain: no thousands
   *  separators, for ports and ids); rows an array of objects. */
  function table(columns, rows, empty) {
    const head = el("tr", {}, columns.map(([title, , o]) =>
      el("th", {title: (o && o.tip) || null, class: o && o.num ? "num" : null}, title)));
    const body = rows.map(r => el("tr", {}, columns.map(([, get, o]) => {
      const v = typeof get === "function" ? get(r) : r[get];
      const text = v instanceof Node ? v : (o && o.plain ? (v ?? "") : fmt(v));
      return el("td", {class: o && o.num ? "num" : null}, text);
    })));
    if (!rows.length) body.push(el("tr", {}, el("td", {colspan: columns.length, class: "empty"}, empty || "None")));
    return el("table", {class: "stats"}, el("thead", {}, head), el("tbody", {}, body));
  }

  /** Replaces the children of #id with nodes. */
  function fill(id, ...nodes) {
    const target = document.getElementById(id);
    if (target) target.replaceChildren(...nodes.flat());
  }

  function windowParam() {
    const w = param("window");
    return WINDOWS.some(([k]) => k === w) ? w : ":all-time";
  }

  /** The 10m / 3h / 1d / All time choice: links that keep the other query parameters. */
  function windowChooser() {
    const current = windowParam();
    return el("span", {class: "windows"}, "Window: ", WINDOWS.map(([key, label]) => {
      const q = new URLSearchParams(location.search);
      q.set("window", key);
      return key === current ? el("b", {}, label) : el("a", {href: "?" + q.toString()}, label);
    }));
  }

  /** Calls render() now and every few seconds, never two at once; shows when it last worked. */
  function every(render) {
    let busy = false;
    async function tick() {
      if (busy) return;
      busy = true;
      try {
        await render();
        fill("updated", "Updated " + new Date().toLocaleTimeString());
      } catch (e) {
        if (!(e instanceof ApiError) || e.status !== 503) {
          if (e instanceof ApiError) banner("error", e.message);
          console.error(e);
        }
      } finally {
        busy = false;
      }
    }
    tick();
    return setInterval(tick, REFRESH_MS);
  }

  function logLink(topologyId, port, given) {
    if (given) return given;
    if (!topologyId || !port) return null;
    return "/api/v1/log?file=" + encodeURIComponent(`${topologyId}/${port}/worker.log`);
  }

  function topologyLink(id, text) {
    return el("a", {href: "/topology.html?id=" + encodeURIComponent(id)}, text || id);
  }

  function componentLink(topologyId, componentId) {
    return el("a", {href: "/component.html?id=" + encodeURIComponent(componentId) +
                    "&topology_id=" + encodeURIComponent(topologyId)}, componentId);
  }

  function statusTag(status) {
    return el("span", {class: "status " + String(status).toLowerCase()}, status);
  }

  /** A time Storm gives in seconds (topology page) or milliseconds (component page). */
  function when(t) {
    if (!t) return "";
    const n = Number(t);
    return new Date(n < 1e11 ? n * 1000 : n).toLocaleString();
  }

  // ---- actions -------------------------------------------------------------------------------

  const ACTIONS = {
    activate: {label: "Activate", says: "Spouts resume calling next_tuple."},
    deactivate: {label: "Deactivate", says: "Spouts stop emitting; tuples in flight finish."},
    rebalance: {label: "Rebalance", says: "Workers are deactivated for the wait, then the executors are redistributed.", wait: 30},
    kill: {label: "Kill", says: "The topology is deactivated for the wait, then its workers are shut down. This cannot be undone.", wait: 30},
  };

  /** Buttons for the four actions; onDone is called after one succeeds. */
  function actionButtons(topologyId, name, status, onDone) {
    return Object.entries(ACTIONS).map(([action, a]) => el("button", {
      type: "button", "data-action": action, class: action === "kill" ? "danger" : null,
      disabled: (action === "activate" && status === "ACTIVE") ||
                (action === "deactivate" && status === "INACTIVE") ||
                status === "KILLED",
      onclick: () => confirmAction(topologyId, name, action, onDone),
    }, a.label));
  }

  /** The confirmation dialog: the secret the user types is sent as X-Squall-Secret. */
  function confirmAction(topologyId, name, action, onDone) {
    const a = ACTIONS[action];
    const old = document.getElementById("action-dialog");
    if (old) old.remove();
    const secret = el("input", {id: "action-secret", type: "password", autocomplete: "off",
                                value: sessionStorage.getItem(SECRET_KEY) || ""});
    const wait = a.wait === undefined ? null :
      el("input", {id: "action-wait", type: "number", min: "0", value: String(a.wait)});
    const workers = action === "rebalance" ? el("input", {id: "action-workers", type: "number", min: "1"}) : null;
    const message = el("p", {id: "action-message", class: "message"});
    const dialog = el("dialog", {id: "action-dialog"},
      el("form", {method: "dialog"},
        el("h3", {}, `${a.label} topology ${name}?`),
        el("p", {}, a.says),
        wait && el("label", {}, "Wait (seconds) ", wait),
        workers && el("label", {}, "Workers (empty: unchanged) ", workers),
        el("label", {}, "Cluster secret ", secret),
        el("p", {class: "hint"}, "Sent in the X-Squall-Secret header; kept in this tab only."),
        message,
        el("div", {class: "buttons"},
          el("button", {type: "button", id: "action-cancel", onclick: () => dialog.close()}, "Cancel"),
          el("button", {type: "submit", id: "action-confirm", class: action === "kill" ? "danger" : "primary"},
             a.label))));
    dialog.querySelector("form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(SECRET_KEY, secret.value);
      let path = `/topology/${encodeURIComponent(topologyId)}/${action}`;
      if (wait) path += "/" + encodeURIComponent(wait.value || "0");
      const body = workers && workers.value ? {rebalanceOptions: {numWorkers: Number(workers.value)}} : null;
      message.textContent = "Sending...";
      try {
        await api(path, {method: "POST", headers: {"X-Squall-Secret": secret.value, "Content-Type": "application/json"},
                         body: body ? JSON.stringify(body) : null});
        dialog.close();
        dialog.remove();
        if (onDone) onDone(action);
      } catch (e) {
        message.textContent = "Refused: " + e.message;
      }
    });
    document.body.append(dialog);
    dialog.showModal();
    secret.focus();
  }

  return {ApiError, el, api, param, fmt, table, fill, banner, windowParam, windowChooser, every,
          logLink, topologyLink, componentLink, statusTag, when, actionButtons, WINDOWS};
})();
