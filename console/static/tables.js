"use strict";
// The Tables page (every table of every source) and a table's page (its figures and two charts), both
// refreshed every refresh_s. The charts are SVG drawn here (no chart library: the console works offline);
// every value goes into the page as text or as an SVG attribute, never as HTML.
document.addEventListener("DOMContentLoaded", () => {
  const { el, fmt, poll, text } = dbus;
  const SVG = "http://www.w3.org/2000/svg";

  const ago = (s) => (s === null || s === undefined ? "-" : s < 120 ? `${fmt(s, 0)} s ago` : s < 7200 ? `${fmt(s / 60, 0)} min ago` : `${fmt(s / 3600, 1)} h ago`);
  const latency = (ms) => (ms === null || ms === undefined ? "-" : ms < 1000 ? `${fmt(ms, 0)} ms` : `${fmt(ms / 1000, 2)} s`);
  const tableUrl = (t) => `/tables/${encodeURIComponent(t.source)}/${encodeURIComponent(`${t.schema}.${t.table}`)}`;

  // ------------------------------------------------------------------------------------- the list
  const list = document.getElementById("table-sources");
  if (list) {
    const row = (t) =>
      el("tr", { "data-table": `${t.schema}.${t.table}` },
        el("td", {}, el("a", { href: tableUrl(t) }, `${t.schema}.${t.table}`)),
        el("td", { class: "num version" }, t.version === null ? "-" : t.version),
        el("td", {}, t.kind === "database" ? el("code", {}, t.position || "-") : "-"),
        el("td", { class: "num latency" }, latency(t.latency_ms)),
        el("td", { class: "num rows" }, fmt(t.rows, 0)),
        el("td", { class: "num" }, ago(t.heartbeat_age_s)),
        el("td", {}, t.monitored === null ? "-" : t.monitored ? "yes" : "no"));
    const card = (src) =>
      el("section", { class: "card source", "data-source": src.source },
        el("h2", {}, `${src.source} `, el("span", { class: "muted" }, `${src.kind} source, ${src.tables.length} tables`)),
        src.tables.length
          ? el("table", { class: "tables" },
              el("thead", {}, el("tr", {}, el("th", {}, "table"), el("th", { class: "num" }, "version"),
                el("th", {}, src.kind === "database" ? "since (binlog)" : ""), el("th", { class: "num" }, "heartbeat latency"),
                el("th", { class: "num" }, "rows between heartbeats"), el("th", { class: "num" }, "last heartbeat"),
                el("th", {}, src.kind === "database" ? "monitored" : ""))),
              el("tbody", {}, src.tables.map(row)))
          : el("p", { class: "muted" }, "No table yet."),
        (src.errors || []).length ? el("p", { class: "problems" }, `could not read ${src.errors.join("; ")}`) : "");
    poll("/tables/api/tables", (data) => list.replaceChildren(...data.sources.map(card)));
  }

  // ------------------------------------------------------------------------------- one table
  const pageEl = document.getElementById("table-page");
  if (pageEl) {
    poll(pageEl.dataset.api, (data) => {
      text(document.getElementById("fig-version"), data.version === null ? "-" : data.version);
      const hb = data.heartbeat || {};
      text(document.getElementById("fig-latency"), latency(hb.latency_ms));
      text(document.getElementById("fig-rows"), fmt(hb.rows, 0));
      text(document.getElementById("fig-age"), data.heartbeat ? ago(hb.age_s) : "none in the last day");
      for (const fig of document.querySelectorAll("figure.chart")) {
        lineChart(fig, data.charts[fig.dataset.series] || [], data.window_s, fig.dataset.unit);
      }
      const problems = document.getElementById("problems");
      if (data.errors.length) text(problems, `could not read ${data.errors.join("; ")}`);
    });
  }

  // ------------------------------------------------------------------------ an SVG line chart
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  const hhmm = (ms) => new Date(ms).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });

  // points: [[t_ms, value | null], ...] (null: a gap); the x axis is the last window_s up to now
  function lineChart(fig, points, windowS, unit) {
    const W = 560, H = 200, L = 58, R = 12, T = 10, B = 26;
    const x1 = Date.now(), x0 = x1 - 1000 * windowS;
    const values = points.filter((p) => p[1] !== null).map((p) => p[1]);
    const top = Math.max(...values, 0) * 1.1 || 1;
    const x = (t) => L + ((t - x0) / (x1 - x0)) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", class: "line-chart",
      "data-points": values.length, "aria-label": `${fig.querySelector("figcaption")?.textContent || ""}` });
    for (let i = 0; i <= 4; i++) {
      const v = (top * i) / 4;
      chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
      chart.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, fmt(v, v < 10 ? 1 : 0)));
    }
    for (let i = 0; i <= 4; i++) {
      const t = x0 + ((x1 - x0) * i) / 4;
      chart.append(svg("text", { x: x(t), y: H - 8, "text-anchor": i === 0 ? "start" : i === 4 ? "end" : "middle", class: "tick" }, hhmm(t)));
    }
    chart.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
    chart.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
    // one path per run of points without a gap; a point alone gets a dot
    let run = [];
    const flush = () => {
      if (run.length === 1) chart.append(svg("circle", { cx: x(run[0][0]), cy: y(run[0][1]), r: 2.5, class: "dot" }));
      if (run.length > 1) {
        const d = run.map((p, i) => `${i ? "L" : "M"}${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" ");
        chart.append(svg("path", { d, class: "series" }));
      }
      run = [];
    };
    for (const p of points) {
      if (p[1] === null || p[0] < x0) flush(); else run.push(p);
    }
    flush();
    if (!values.length) {
      chart.append(svg("text", { x: (L + W - R) / 2, y: (T + H - B) / 2, "text-anchor": "middle", class: "empty" }, "no heartbeat in this window"));
    } else {
      const last = values[values.length - 1];
      chart.append(svg("text", { x: W - R, y: T + 12, "text-anchor": "end", class: "last" }, `${fmt(last, last < 10 ? 2 : 0)} ${unit}`));
    }
    fig.querySelector("svg")?.remove();
    fig.append(chart);
  }
});
