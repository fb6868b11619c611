"use strict";
// The alerts page: open incidents (an operator acknowledges one: POST with the CSRF token) and the history of
// closed ones, from /alerts/api/alerts every refresh_s.
document.addEventListener("DOMContentLoaded", () => {
  const { el, fmt, poll, post, text, isOperator } = dbus;
  const when = (ms) => (ms ? new Date(ms).toLocaleString() : "-");
  const acked = (a) => (a.acked_by ? `${a.acked_by}, ${when(a.acked_ms)}` : null);
  const result = document.getElementById("ack-result");

  async function acknowledge(a, button) {
    button.disabled = true;
    try {
      await post("/alerts/api/ack", { source: a.source, key: a.key });
      text(result, `acknowledged ${a.source} ${a.key}`);
    } catch (e) {
      text(result, `not acknowledged: ${e.message}`);
      button.disabled = false;
    }
  }

  function ackCell(a) {
    if (acked(a)) return el("td", { class: "acked-by" }, acked(a));
    if (!isOperator()) return el("td", { class: "muted" }, "no");
    const button = el("button", { class: "ack", type: "button" }, "Acknowledge");
    button.addEventListener("click", () => acknowledge(a, button));
    return el("td", {}, button);
  }

  const kindCell = (a) => el("td", { class: "kind" }, el("code", { class: `kind-${a.kind}` }, a.kind));

  const openRow = (a) =>
    el("tr", { class: a.acked_by ? "acked" : "", "data-key": a.key, "data-source": a.source, "data-origin": a.origin },
      el("td", {}, a.source), kindCell(a), el("td", {}, a.subject), el("td", {}, when(a.since_ms)),
      el("td", { class: "num" }, fmt(a.open_s, 0)), el("td", { class: "message" }, a.message), ackCell(a));

  const closedRow = (a) =>
    el("tr", { "data-key": a.key, "data-source": a.source },
      el("td", {}, a.source), kindCell(a), el("td", {}, a.subject), el("td", {}, when(a.since_ms)),
      el("td", {}, when(a.closed_ms)), el("td", { class: "num" }, fmt(a.lasted_s, 0)), el("td", {}, a.closed),
      el("td", {}, acked(a) || "no"));

  function render(data) {
    const open = document.querySelector("#open-alerts tbody");
    open.replaceChildren(...(data.open.length ? data.open.map(openRow)
      : [el("tr", {}, el("td", { colspan: "7", class: "muted" }, "No open incidents."))]));
    text(document.getElementById("open-count"), `(${data.open.length})`);
    const hist = document.querySelector("#alert-history tbody");
    hist.replaceChildren(...(data.history.length ? data.history.map(closedRow)
      : [el("tr", {}, el("td", { colspan: "8", class: "muted" }, "None closed yet."))]));
    text(document.getElementById("alert-errors"), (data.errors || []).length ? `could not read: ${data.errors.join("; ")}` : "");
  }

  poll("/alerts/api/alerts", render);
});
