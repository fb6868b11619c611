"use strict";
// The overview: one card per source, its topology (servers, topics, stages in the order the data flows, the
// stages beside it below), each stage with its state, rows/s and Kafka lag; /api/overview every refresh_s.
document.addEventListener("DOMContentLoaded", () => {
  const { el, fmt, poll } = dbus;
  const LABELS = {
    leader: "leader", epoch: "epoch", committed: "committed", gtid: "gtid", lag_s: "lag (s)",
    behind_bytes: "behind (bytes)", pulls_running: "pulls running", newest_heartbeat_s: "heartbeat (s ago)",
    tables: "tables",
  };
  const NUMERIC = new Set(["lag_s", "behind_bytes", "newest_heartbeat_s"]);
  const arrow = () => el("span", { class: "arrow", "aria-hidden": "true" }, "→");

  const figures = (pairs) =>
    el("dl", {}, pairs.filter(([, v]) => v !== null && v !== undefined).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));

  function stageNode(s, side) {
    const detail = Object.entries(s.detail || {}).map(([k, v]) => [LABELS[k] || k, NUMERIC.has(k) ? fmt(v) : v]);
    const procs = (s.processes || []).filter((p) => p.alive).map((p) => `${p.pid}@${p.host}`).join(", ");
    return el("div", { class: `node stage ${s.state}`, "data-node": s.stage, "data-state": s.state },
      el("div", { class: "head" },
        el("span", { class: "name" }, s.stage),
        el("span", { class: `state state-${s.state}` }, s.state === "waiting" ? "waiting for resources" : s.state)),
      el("div", { class: "kind" }, "stage"),
      figures([
        ...(side && s.age_s === null ? [] : [["rows/s", fmt(s.rows_per_s)], ["kafka lag", fmt(s.lag_records, 0)]]),
        ...detail,
        ["process", procs || null],
      ]),
      el("div", { class: "why" }, s.why));
  }

  function node(item, side) {
    if (item.type === "stage") return stageNode(item, side);
    if (item.type === "server") {
      return el("div", { class: "node server" }, el("div", { class: "kind" }, "source"),
        el("div", { class: "name" }, item.name), el("div", { class: "figs" }, item.detail));
    }
    const names = item.names || [];
    return el("div", { class: "node topic", "data-topics": names.join(" ") },
      el("div", { class: "kind" }, names.length === 1 ? "topic" : `${names.length} topics`),
      el("div", { class: "names" }, names.slice(0, 6).join("\n"), names.length > 6 ? ` +${names.length - 6} more` : ""));
  }

  const flow = (items, cls) =>
    el("div", { class: cls }, items.flatMap((item, i) => (i && cls === "pipeline" ? [arrow(), node(item, false)] : [node(item, cls !== "pipeline")])));

  // the stages of the flow as a table too: rows/s, lag, batch time and the age of the newest point
  const stageRow = (s) =>
    el("tr", { "data-stage": s.stage, "data-state": s.state },
      el("td", {}, s.stage),
      el("td", {}, el("span", { class: `state state-${s.state}`, title: s.why }, s.state)),
      el("td", { class: "num" }, fmt(s.rows_per_s)), el("td", { class: "num lag" }, fmt(s.lag_records, 0)),
      el("td", { class: "num" }, fmt(s.batch_ms, 0)), el("td", { class: "num" }, fmt(s.age_s, 0)),
      el("td", { class: "muted" }, s.why));
  const stageTable = (items) =>
    el("table", { class: "stages" },
      el("thead", {}, el("tr", {}, el("th", {}, "stage"), el("th", {}, "state"), el("th", { class: "num" }, "rows/s"),
        el("th", { class: "num" }, "kafka lag"), el("th", { class: "num" }, "batch ms"),
        el("th", { class: "num" }, "last point (s ago)"), el("th", {}, "why"))),
      el("tbody", {}, items.filter((i) => i.type === "stage").map(stageRow)));

  const card = (src) =>
    el("section", { class: "card source", "data-source": src.source },
      el("h2", {}, src.source, el("span", { class: "muted" }, `${src.kind} source`),
        src.alerts_open ? el("a", { class: "alerts-link", href: "/alerts/" }, `${src.alerts_open} open alert(s)`) : ""),
      flow(src.pipeline || [], "pipeline"),
      flow(src.side || [], "pipeline side"),
      stageTable(src.pipeline || []),
      (src.errors || []).length ? el("p", { class: "problems" }, `could not read: ${src.errors.join("; ")}`) : "");

  poll("/api/overview", (data) => document.getElementById("sources").replaceChildren(...data.sources.map(card)));
});
