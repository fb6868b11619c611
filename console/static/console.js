// The console's few lines of script: poll a JSON endpoint and hand it to a page's render function, and
// POST with the CSRF token. Every value goes into the page as text (textContent), never as HTML.
"use strict";
const dbus = (() => {
  const meta = (name) => document.querySelector(`meta[name="${name}"]`)?.content;
  const refreshMs = () => 1000 * Number(meta("refresh-s") || 3);

  async function getJson(url) {
    const r = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (r.status === 401) { window.location.reload(); throw new Error("logged out"); }
    const body = await r.json();
    if (!r.ok) throw new Error(body.error || `${r.status}`);
    return body;
  }

  async function post(url, data) {
    const r = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": meta("csrf-token") },
      body: JSON.stringify(data || {}),
    });
    const body = await r.json().catch(() => ({ error: `${r.status}` }));
    if (!r.ok) throw new Error(body.error || `${r.status}`);
    return body;
  }

  // poll(url, render): render(json) now and every refresh_s; a failed fetch shows in the footer
  function poll(url, render) {
    const once = async () => {
      try {
        render(await getJson(url));
        text(document.getElementById("updated"), `updated ${new Date().toLocaleTimeString()}`);
        text(document.getElementById("problems"), "");
      } catch (e) {
        text(document.getElementById("problems"), `refresh failed: ${e.message}`);
      }
    };
    once();
    return setInterval(once, refreshMs());
  }

  function text(el, value) { if (el) el.textContent = value === null || value === undefined ? "" : String(value); }

  // el("td", {class: "x"}, "text" | Node, ...): an element with attributes and children as text
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) e.append(c instanceof Node ? c : document.createTextNode(c === null || c === undefined ? "" : String(c)));
    return e;
  }

  function fmt(n, digits = 1) {
    if (n === null || n === undefined) return "-";
    return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits });
  }

  const isOperator = () => document.body.dataset.role === "operator";
  return { getJson, post, poll, text, el, fmt, isOperator };
})();
