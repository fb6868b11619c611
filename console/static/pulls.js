"use strict";
// The Full pulls page: request a pull (operators), follow each pull's progress, see the ended ones.
document.addEventListener("DOMContentLoaded", () => {
  const { el, fmt, poll, text } = dbus;
  // dbus.post, keeping the refusal's fields (which input is wrong) for the form
  const post = async (url, data) => {
    const r = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json",
        "X-CSRFToken": document.querySelector('meta[name="csrf-token"]').content },
      body: JSON.stringify(data),
    });
    const body = await r.json().catch(() => ({ error: `${r.status}` }));
    if (!r.ok) throw Object.assign(new Error(body.error || `${r.status}`), { fields: body.fields || {} });
    return body;
  };
  const sourceSel = document.getElementById("pull-source");
  const form = document.getElementById("pull-form");
  const source = () => (sourceSel ? sourceSel.value : "");
  const when = (s) => (s ? new Date(s * 1000).toLocaleString() : "-");
  const dur = (s) => {
    if (s === null || s === undefined) return "-";
    if (s < 90) return `${fmt(s, 0)} s`;
    if (s < 5400) return `${fmt(s / 60, 1)} min`;
    return `${fmt(s / 3600, 1)} h`;
  };

  const bar = (fraction) => {
    const fill = el("span", {});
    fill.style.width = `${Math.round(100 * Math.max(0, Math.min(1, fraction || 0)))}%`;
    return el("div", { class: "bar", role: "progressbar", "aria-valuenow": Math.round(100 * (fraction || 0)) }, fill);
  };

  const opened = new Set(); // pulls whose shard list the user opened or closed stay so across refreshes
  const closed = new Set();
  const shardTable = (p) =>
    el("details", { open: closed.has(p.id) ? null : (!p.finished || opened.has(p.id)) || null },
      el("summary", {
        onclick: (ev) => { // the click opens a closed list and closes an open one
          const wasOpen = ev.currentTarget.parentElement.open;
          (wasOpen ? closed : opened).add(p.id);
          (wasOpen ? opened : closed).delete(p.id);
        },
      }, `${p.shards_done}/${p.shards_total} shards done`),
      el("table", { class: "shards" },
        el("thead", {}, el("tr", {}, el("th", {}, "shard"), el("th", {}, "state"), el("th", { class: "num" }, "rows"),
          el("th", {}, "from"), el("th", {}, "to"))),
        el("tbody", {}, p.shards.map((s) =>
          el("tr", { "data-shard": s.index }, el("td", {}, s.index),
            el("td", {}, el("span", { class: `state state-${s.state}` }, s.state)),
            el("td", { class: "num" }, fmt(s.rows, 0)),
            el("td", { class: s.lower === "withheld" ? "withheld" : "" }, s.lower === null ? "-inf" : s.lower),
            el("td", { class: s.upper === "withheld" ? "withheld" : "" }, s.upper === null ? "+inf" : s.upper))))),
      p.shards_cut ? el("p", { class: "muted" }, `${p.shards_cut} more shards not shown`) : "");

  const pullCard = (p) =>
    el("div", { class: "card pull", "data-pull": p.id, "data-status": p.status },
      el("div", { class: "head" },
        el("span", { class: "table" }, p.table),
        el("span", { class: `state state-${p.status}` }, p.status),
        el("span", { class: "muted" }, `request ${p.id}`),
        el("span", { class: "muted" }, `started ${when(p.started_at)}`)),
      bar(p.fraction),
      el("div", { class: "figs" },
        el("span", {}, el("b", { class: "rows" }, fmt(p.rows, 0)), ` / ${fmt(p.total_rows, 0)} rows`),
        el("span", {}, el("b", { class: "shards-done" }, `${p.shards_done}/${p.shards_total}`), " shards"),
        el("span", {}, el("b", { class: "rate" }, fmt(p.rows_per_s, 0)), " rows/s"),
        el("span", {}, "ETA ", el("b", { class: "eta" }, p.finished ? "-" : dur(p.eta_s))),
        el("span", {}, "took ", el("b", {}, dur(p.seconds))),
        el("span", { class: "muted" }, `split by ${p.split_col || "nothing"}`),
        p.version !== null ? el("span", { class: "muted" }, `v${p.version} batch ${p.batch}`) : "",
        p.resumes ? el("span", { class: "muted" }, `resumed ${p.resumes}x`) : ""),
      p.warning ? el("p", { class: "warning" }, `warning: ${p.warning}`) : "",
      p.error ? el("p", { class: "error" }, `${p.error_code}: ${p.error}`) : "",
      p.shards.length ? shardTable(p) : "");

  const pendingCard = (r) =>
    el("div", { class: "card pull", "data-pull": r.id, "data-status": r.status },
      el("div", { class: "head" },
        el("span", { class: "table" }, r.table),
        el("span", { class: `state state-${r.status}` }, r.status),
        el("span", { class: "muted" }, `request ${r.id} by ${r.user}, sent ${when(r.sent_at)}`)),
      r.status === "pending" ? el("p", { class: "muted" }, "waiting for the full puller to accept it...") : "",
      r.error ? el("p", { class: "error" }, `${r.error_code}: ${r.error}`) : "");

  const render = (data) => {
    // a request still waiting for the full puller is with the running pulls; a refused one with the ended
    const waiting = data.pending.filter((r) => r.status === "pending");
    const refused = data.pending.filter((r) => r.status !== "pending");
    const running = [...waiting.map(pendingCard), ...data.running.map(pullCard)];
    const ended = [...refused.map(pendingCard), ...data.ended.map(pullCard)];
    document.getElementById("pulls-running").replaceChildren(
      ...(running.length ? running : [el("p", { class: "muted" }, "No pull is running.")]));
    document.getElementById("pulls-ended").replaceChildren(
      ...(ended.length ? ended : [el("p", { class: "muted" }, "No pull has ended yet.")]));
    if (data.errors && data.errors.length) text(document.getElementById("problems"), data.errors.join("; "));
  };

  let timer = null;
  const start = () => {
    if (timer) clearInterval(timer);
    timer = poll(`/pulls/api/pulls?source=${encodeURIComponent(source())}`, render);
  };
  if (sourceSel) sourceSel.addEventListener("change", start);
  start();

  if (form) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const button = document.getElementById("pull-request");
      const result = document.getElementById("pull-result");
      form.querySelectorAll(".field-error").forEach((e) => text(e, ""));
      const data = { source: source() };
      for (const name of ["table", "split_col", "shard_size", "where"]) data[name] = form.elements[name].value;
      button.disabled = true;
      text(result, "sending...");
      try {
        const r = await post("/pulls/api/request", data);
        result.className = "result";
        text(result, `request ${r.id} for ${r.table} sent to ${r.topic}`);
        start();
      } catch (e) {
        result.className = "result problems";
        text(result, e.message);
        for (const [field, why] of Object.entries(e.fields || {})) {
          text(form.querySelector(`.field-error[data-field="${field}"]`), why);
        }
      } finally {
        button.disabled = false;
      }
    });
  }
});
