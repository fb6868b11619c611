"use strict";
// The Dead letters page: the letters of <ds>.dlq by stage, code and table, newest first and paged, with
// their counts (dbus_dead_letter) and a chart of the last day. Values come as text; masked ones never come.
document.addEventListener("DOMContentLoaded", () => {
  const { el, fmt, poll, text } = dbus;
  const $ = (id) => document.getElementById(id);
  const COLORS = ["#cf222e", "#1f6feb", "#9a6700", "#1a7f37", "#8250df", "#bf3989", "#0a7ea4", "#57606a"];
  let page = 0;
  let pages = 1;
  const timers = [];

  const params = () => {
    const q = new URLSearchParams();
    for (const name of ["source", "stage", "code", "table", "scan"]) {
      const v = $(`dl-${name}`).value;
      if (v) q.set(name, v);
    }
    return q;
  };
  const when = (ms) => (ms ? new Date(ms).toLocaleString() : "-");
  const ago = (s) => (s === null || s === undefined ? "-" : s < 120 ? `${fmt(s, 0)} s ago` : `${fmt(s / 60, 0)} min ago`);

  // keep a filter's choice while its options follow the letters read
  const fillSelect = (sel, items) => {
    const chosen = sel.value;
    const names = items.map((i) => i.name);
    if (chosen && !names.includes(chosen)) names.push(chosen);
    sel.replaceChildren(el("option", { value: "" }, "any"),
      ...names.map((n) => el("option", { value: n }, n === "-" ? "(no table)" : n)));
    sel.value = chosen;
  };

  const letterCard = (v) =>
    el("div", { class: "card letter", "data-code": v.code, "data-stage": v.stage, "data-dlq-offset": v.dlq_offset },
      el("div", { class: "head" },
        el("span", { class: "code" }, v.code),
        el("span", { class: "stage-tag" }, v.stage),
        v.table ? el("span", {}, v.table) : el("span", { class: "muted" }, "no known table"),
        el("span", { class: "muted" }, when(v.at_ms))),
      el("p", { class: "reason" }, v.error || "(no reason given)"),
      el("div", { class: "coords" },
        v.topic ? `original: ${v.topic} partition ${v.partition} offset ${v.offset}` : "original record unknown",
        v.key !== null ? ` · key ${v.key}` : "",
        ` · in ${v.dlq_topic} partition ${v.dlq_partition} offset ${v.dlq_offset}`),
      v.withheld
        ? el("p", { class: "withheld" }, `value withheld: ${v.withheld}`)
        : el("pre", { class: "value" },
          v.value_text !== null ? v.value_text : `base64: ${v.value_base64}`,
          v.value_bytes > 2048 ? `\n... (${fmt(v.value_bytes, 0)} bytes in all)` : ""));

  const renderLetters = (data) => {
    fillSelect($("dl-stage"), data.facets.stages);
    fillSelect($("dl-code"), data.facets.codes);
    fillSelect($("dl-table"), data.facets.tables);
    page = data.page;
    pages = data.pages;
    const win = data.partitions.map((p) => `partition ${p.partition} offsets ${p.from}..${p.end}`).join(", ");
    text($("dl-summary"), `${fmt(data.total, 0)} of ${fmt(data.read, 0)} letters read from ${data.dlq_topic}` +
      (win ? ` (${win})` : " (no such topic yet)"));
    text($("dl-page"), `page ${data.page + 1} of ${data.pages}`);
    $("dl-newer").disabled = page <= 0;
    $("dl-older").disabled = page >= pages - 1;
    $("dl-letters").replaceChildren(...(data.letters.length ? data.letters.map(letterCard)
      : [el("p", { class: "muted" }, "No dead letter matches.")]));
    $("dl-window").replaceChildren(data.facets.stage_codes.length
      ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "stage"), el("th", {}, "code"), el("th", { class: "num" }, "letters"))),
        el("tbody", {}, data.facets.stage_codes.map((c) =>
          el("tr", {}, el("td", {}, c.stage), el("td", {}, c.code), el("td", { class: "num" }, fmt(c.count, 0))))))
      : el("p", { class: "muted" }, "none"));
    if (data.errors && data.errors.length) text($("problems"), data.errors.join("; "));
  };

  const svg = (tag, attrs) => {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    return e;
  };

  // the letters counted per hour of the last day, one stacked bar per hour, a colour per (stage, code)
  const chart = (c) => {
    if (!c.series.length) return el("p", { class: "muted" }, `No dead letters counted in the last ${c.hours} h.`);
    const W = 600, H = 120, P = 4;
    const buckets = c.series[0].points.length;
    const sums = c.series[0].points.map((_, i) => c.series.reduce((n, s) => n + (s.points[i] ? s.points[i][1] : 0), 0));
    const top = Math.max(1, ...sums);
    const step = (W - 2 * P) / Math.max(1, buckets);
    const root = svg("svg", { viewBox: `0 0 ${W} ${H + 14}`, preserveAspectRatio: "none", role: "img",
      "aria-label": `dead letters per hour, last ${c.hours} h` });
    root.append(svg("line", { x1: P, y1: H - P, x2: W - P, y2: H - P, stroke: "#d8dee4" }));
    const base = new Array(buckets).fill(0);
    const legend = el("div", { class: "legend" });
    c.series.forEach((s, k) => {
      const color = COLORS[k % COLORS.length];
      s.points.forEach(([t, n], i) => {
        if (!n) return;
        const h = ((H - 2 * P) * n) / top;
        const rect = svg("rect", { x: (P + i * step + 1).toFixed(1), y: (H - P - base[i] - h).toFixed(1),
          width: Math.max(1, step - 2).toFixed(1), height: h.toFixed(1), fill: color });
        const tip = svg("title", {});
        tip.textContent = `${s.stage} ${s.code}: ${n} at ${new Date(t).toLocaleString()}`;
        rect.append(tip);
        root.append(rect);
        base[i] += h;
      });
      const sw = el("span", { class: "swatch" });
      sw.style.background = color;
      legend.append(el("span", {}, sw, `${s.stage} ${s.code}`));
    });
    const label = svg("text", { x: P, y: H + 12, "font-size": 10, fill: "#66717c" });
    label.textContent = `${c.hours} h ago · peak ${top} per hour · now`;
    root.append(label);
    return el("div", {}, root, legend);
  };

  const renderCounts = (data) => {
    $("dl-counts").replaceChildren(data.counts.length
      ? el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "stage"), el("th", {}, "code"), el("th", { class: "num" }, "count"),
          el("th", {}, "newest"), el("th", {}, "where"))),
        el("tbody", {}, data.counts.map((c) =>
          el("tr", { "data-stage": c.stage, "data-code": c.code }, el("td", {}, c.stage), el("td", {}, c.code),
            el("td", { class: "num" }, fmt(c.count, 0)), el("td", {}, ago(c.age_s)),
            el("td", {}, `${c.origin || "-"} · ${c.dlq_topic} offset ${c.dlq_offset}`)))))
      : el("p", { class: "muted" }, "None counted (the heartbeat monitor counts them)."));
    $("dl-chart").replaceChildren(chart(data.chart));
    if (data.errors && data.errors.length) text($("problems"), data.errors.join("; "));
  };

  const start = () => {
    while (timers.length) clearInterval(timers.pop());
    const q = params();
    q.set("page", page);
    timers.push(poll(`/dead-letters/api/letters?${q}`, renderLetters));
    timers.push(poll(`/dead-letters/api/counts?source=${encodeURIComponent($("dl-source").value)}`, renderCounts));
  };
  $("dl-source").addEventListener("change", () => {
    for (const id of ["dl-stage", "dl-code", "dl-table"]) $(id).value = "";
  });
  for (const id of ["dl-source", "dl-stage", "dl-code", "dl-table", "dl-scan"]) {
    $(id).addEventListener("change", () => { page = 0; start(); });
  }
  $("dl-filters").addEventListener("submit", (ev) => { ev.preventDefault(); page = 0; start(); });
  $("dl-newer").addEventListener("click", () => { page = Math.max(0, page - 1); start(); });
  $("dl-older").addEventListener("click", () => { page = Math.min(pages - 1, page + 1); start(); });
  start();
});
