"use strict";
// The overview: one card per source with its stages (rows/s, lag, state), refreshed every refresh_s.
document.addEventListener("DOMContentLoaded", () => {
  const { el, fmt, poll } = dbus;
  const state = (s) => (s.waiting ? "waiting" : s.age_s === null || s.age_s === undefined ? "down" : "running");
  const card = (src) =>
    el("section", { class: "card source", "data-source": src.source },
      el("h2", {}, `${src.source} `, el("span", { class: "muted" }, src.kind)),
      el("table", { class: "stages" },
        el("thead", {}, el("tr", {}, el("th", {}, "stage"), el("th", {}, "state"), el("th", { class: "num" }, "rows/s"),
          el("th", { class: "num" }, "lag (records)"), el("th", { class: "num" }, "last point (s ago)"))),
        el("tbody", {}, (src.stages || []).map((s) =>
          el("tr", { "data-stage": s.stage }, el("td", {}, s.stage),
            el("td", {}, el("span", { class: `state state-${state(s)}` }, state(s))),
            el("td", { class: "num" }, fmt(s.rows_per_s)), el("td", { class: "num lag" }, fmt(s.lag_records, 0)),
            el("td", { class: "num" }, fmt(s.age_s, 0)))))),
      (src.errors || []).length ? el("p", { class: "problems" }, src.errors.join("; ")) : "");
  poll("/api/overview", (data) => document.getElementById("sources").replaceChildren(...data.sources.map(card)));
});
