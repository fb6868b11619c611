// The Log rules editor (console/rules.py): a table's rule groups as operators with their grammar entries,
// the step-by-step preview on sample lines, save draft / publish (operators only), and the diff of two
// versions. Every value goes into the page as text (dbus.el), never as HTML.
"use strict";
(() => {
  const root = document.getElementById("rules");
  if (!root) return;
  const { el, post, getJson, text, isOperator } = dbus;
  const ds = root.dataset.source, table = root.dataset.table;
  const api = `/rules/api/${encodeURIComponent(ds)}/${encodeURIComponent(table)}`;
  const editable = isOperator();
  const state = { groups: [], operators: [], fields: {}, versions: [], info: null };
  const $ = (id) => document.getElementById(id);

  // ------------------------------------------------------------ the editor

  const fieldsOf = (rule) => {
    const known = state.fields[rule.ruleTypeName] || [];
    const extra = [];
    for (const e of rule.ruleGrammar) for (const k of Object.keys(e)) if (!known.includes(k) && !extra.includes(k) && k !== "key") extra.push(k);
    return [...known, ...extra];
  };

  function move(list, i, by) {
    const j = i + by;
    if (j < 0 || j >= list.length) return;
    [list[i], list[j]] = [list[j], list[i]];
    render();
  }

  function button(label, title, onclick, cls = "secondary small") {
    return el("button", { type: "button", class: cls, title, onclick }, label);
  }

  function entryRow(rule, entry, ei, keys) {
    const cells = keys.map((k) => el("td", {}, el("input", {
      type: "text", class: "param", "data-key": k, value: entry[k] ?? "", disabled: !editable, spellcheck: "false",
      oninput: (ev) => { if (ev.target.value === "") delete entry[k]; else entry[k] = ev.target.value; },
    })));
    if (editable) cells.push(el("td", {}, button("✕", "remove this entry", () => { rule.ruleGrammar.splice(ei, 1); render(); })));
    return el("tr", { class: "entry", "data-entry": ei + 1 }, cells);
  }

  function ruleItem(group, rule, ri) {
    const keys = fieldsOf(rule);
    const opSelect = el("select", {
      class: "op", disabled: !editable,
      onchange: (ev) => { rule.ruleTypeName = ev.target.value; render(); },
    }, state.operators.map((op) => el("option", { value: op, selected: op === rule.ruleTypeName }, op)));
    const head = el("div", { class: "rule-head" },
      el("span", { class: "pos" }, `${ri + 1}`), opSelect, el("span", { class: "spacer" }),
      editable ? [
        button("↑", "move up", () => move(group.rules, ri, -1)),
        button("↓", "move down", () => move(group.rules, ri, 1)),
        button("Remove", "remove this operator", () => { group.rules.splice(ri, 1); render(); }),
      ] : []);
    const body = keys.length
      ? el("table", { class: "grammar" },
        el("thead", {}, el("tr", {}, keys.map((k) => el("th", {}, k)), editable ? el("th", {}, "") : [])),
        el("tbody", {}, rule.ruleGrammar.map((e, ei) => entryRow(rule, e, ei, keys))))
      : el("p", { class: "muted" }, "no parameters");
    const add = editable && keys.length
      ? button("Add entry", "another grammar entry", () => { rule.ruleGrammar.push({}); render(); })
      : [];
    return el("li", { class: "rule", "data-position": ri + 1, "data-op": rule.ruleTypeName }, head, body, add);
  }

  function groupCard(group, gi) {
    const name = el("input", {
      type: "text", class: "group-name", value: group.groupName || "", disabled: !editable,
      oninput: (ev) => { group.groupName = ev.target.value; },
    });
    const active = el("label", { class: "inline check" }, el("input", {
      type: "checkbox", class: "group-active", checked: group.active !== false, disabled: !editable,
      onchange: (ev) => { group.active = ev.target.checked; },
    }), "active (publish includes it)");
    const head = el("div", { class: "group-head" }, el("span", { class: "muted" }, "group"), name, active,
      el("span", { class: "spacer" }),
      editable ? [
        button("↑", "move the group up", () => move(state.groups, gi, -1)),
        button("↓", "move the group down", () => move(state.groups, gi, 1)),
        button("Remove group", "remove the group from the draft", () => { state.groups.splice(gi, 1); render(); }),
      ] : []);
    const items = el("ol", { class: "rule-list" }, group.rules.map((r, ri) => ruleItem(group, r, ri)));
    let adder = [];
    if (editable) {
      const pick = el("select", { class: "new-op" }, state.operators.map((op) => el("option", { value: op }, op)));
      adder = el("div", { class: "toolbar" }, pick, button("Add operator", "append this operator to the group", () => {
        group.rules.push({ ruleTypeName: pick.value, ruleGrammar: [{}] });
        render();
      }));
    }
    return el("div", { class: "group", "data-group": group.groupName }, head, items, adder);
  }

  function render() {
    const box = $("groups");
    box.replaceChildren(...state.groups.map(groupCard));
    if (!state.groups.length) box.append(el("p", { class: "muted" }, "No group in the draft."));
  }

  function showProblems(problems) {
    const list = $("problems-list");
    list.replaceChildren(...(problems || []).map((p) => el("li", {}, p.message)));
    document.querySelectorAll("li.rule.bad").forEach((n) => n.classList.remove("bad"));
    for (const p of problems || []) {
      if (!p.rule) continue;
      const g = [...document.querySelectorAll("#groups .group")].find((n) => n.dataset.group === p.group);
      g?.querySelector(`li.rule[data-position="${p.rule}"]`)?.classList.add("bad");
    }
  }

  const said = (message, bad = false) => {
    const p = $("action-result");
    text(p, message);
    p.classList.toggle("bad", bad);
  };

  // ------------------------------------------------------------ loading

  function fillVersions() {
    const opts = (sel, chosen) => [el("option", { value: "draft", selected: chosen === "draft" }, "the draft"),
      ...state.versions.map((v) => el("option", { value: `${v.version}`, selected: chosen === `${v.version}` },
        `version ${v.version} (${v.published})`))];
    const last = state.versions.length ? `${state.versions[state.versions.length - 1].version}` : "draft";
    const prev = state.versions.length > 1 ? `${state.versions[state.versions.length - 2].version}` : last;
    $("load-version").replaceChildren(...opts($("load-version"), "draft"));
    $("diff-a").replaceChildren(...opts($("diff-a"), state.versions.length > 1 ? prev : last));
    $("diff-b").replaceChildren(...opts($("diff-b"), "draft"));
  }

  async function load() {
    const info = await getJson(api);
    state.info = info;
    state.operators = info.operators;
    state.fields = info.fields;
    state.versions = info.versions;
    state.groups = info.draft;
    const cols = info.columns.map((c) => `${c.name} ${c.type}`).join(", ");
    text($("table-state"), `${info.where}: ${info.log_type}, status ${info.status}, ` +
      (info.version ? `version ${info.version} in force (${cols})` : "nothing published yet") +
      (editable ? "" : " · read-only: only an operator saves or publishes"));
    text($("editing"), "(the draft)");
    fillVersions();
    render();
  }

  async function loadVersion(which) {
    if (which === "draft") { await load(); return; }
    const v = await getJson(`${api}/version/${which}`);
    state.groups = v.groups;
    text($("editing"), `(version ${which} loaded: saving or publishing makes it the draft)`);
    render();
  }

  // ------------------------------------------------------------ the preview

  function rowText(row, columns) {
    if (columns && columns.length === row.length) {
      return "{" + columns.map((c, i) => `${JSON.stringify(c)}: ${JSON.stringify(row[i])}`).join(", ") + "}";
    }
    return "[" + row.map((v) => JSON.stringify(v)).join(", ") + "]";  // as dbus logrules test prints it
  }

  function groupResult(g) {
    const steps = el("table", { class: "steps" }, el("tbody", {}, g.steps.map((s) => el("tr", {
      class: `step${s.error ? " broken" : s.rows.length ? "" : " empty"}`, "data-position": s.position, "data-op": s.op,
    }, el("td", { class: "num" }, `${s.position}`), el("td", {}, s.op),
    el("td", { class: "rows" }, s.error ? `error: ${s.error}`
      : s.rows.length ? s.rows.map((r) => el("div", { class: "row" }, rowText(r, s.columns))) : "no rows"),
    el("td", { class: "muted" }, s.masked && s.masked.length ? `masked: ${s.masked.join(", ")}` : "")))));
    return el("div", { class: `group-result outcome-${g.outcome}`, "data-group": g.group },
      el("div", { class: "outcome" }, el("strong", {}, `group ${g.group}`), `: ${g.outcome} · ${g.reason}`,
        g.active === false ? " (inactive)" : ""),
      steps);
  }

  function recordResult(r) {
    const head = el("div", { class: "record-head" }, el("strong", {}, `record ${r.number}`), " ",
      r.withheld ? el("em", {}, "withheld") : el("code", {}, r.record));
    const parts = [head];
    if (r.withheld) parts.push(el("p", { class: "verdict" }, `withheld: ${r.withheld}`));
    if (r.refused) parts.push(el("p", { class: "verdict bad" }, `refused by the adapter (a dead letter): ${r.refused}`));
    if (r.heartbeat) parts.push(el("p", { class: "verdict" }, `a heartbeat of host ${r.heartbeat}: no rows`));
    for (const line of r.lines) {
      if (r.lines.length > 1) parts.push(el("div", { class: "muted" }, `input: ${line.line}`));
      parts.push(el("p", { class: "verdict" }, line.table), ...line.groups.map(groupResult));
    }
    return el("div", { class: "record", "data-record": r.number }, parts);
  }

  async function runPreview() {
    const records = $("sample").value.split("\n").filter((l) => l.trim());
    text($("preview-summary"), "Running...");
    try {
      const got = await post(`${api}/preview`, { groups: state.groups, records, raw: $("sample-raw").checked });
      showProblems(got.problems);
      const s = got.summary;
      text($("preview-summary"), `${s.records} record(s): ${s.accepted} accepted, ${s.rejected} accepted by no group, ` +
        `${s.broken} broke a rule, ${s.refused} refused by the adapter` +
        (got.problems.length ? ` · ${got.problems.length} problem(s): the groups with one were not run` : ""));
      $("preview").replaceChildren(...got.records.map(recordResult));
    } catch (e) {
      text($("preview-summary"), `preview failed: ${e.message}`);
    }
  }

  async function takeSample() {
    text($("preview-summary"), "Reading the raw topic...");
    try {
      const got = await getJson(`${api}/sample?n=${root.dataset.sampleLines}`);
      $("sample").value = got.records.join("\n");
      $("sample-raw").checked = false;
      text($("preview-summary"), `${got.records.length} record(s) from ${got.topic}` + (got.masked ? ` · ${got.masked}` : ""));
    } catch (e) {
      text($("preview-summary"), `reading the raw topic failed: ${e.message}`);
    }
  }

  // ------------------------------------------------------------ save, publish, diff

  async function save() {
    try {
      const got = await post(`${api}/draft`, { groups: state.groups });
      showProblems([]);
      said(got.message);
      await load();
    } catch (e) {
      said(`not saved: ${e.message}`, true);
    }
  }

  async function followReload(id) {
    const p = el("span", { id: "reload-state", class: "muted" }, ` · reload ${id}: waiting for the log processor...`);
    $("action-result").append(p);
    for (let i = 0; i < 180; i++) {
      await new Promise((done) => setTimeout(done, 1000));
      try {
        const got = await getJson(`/rules/api/${encodeURIComponent(ds)}/reload/${id}`);
        if (got.state !== "waiting") { text(p, ` · ${got.message}`); p.dataset.state = got.state; return; }
      } catch (e) {
        text(p, ` · reload ${id}: ${e.message}`);
      }
    }
    text(p, ` · reload ${id}: no answer from the log processor (is it running?)`);
  }

  async function publish() {
    try {
      const got = await post(`${api}/publish`, { groups: state.groups });
      showProblems([]);
      await load();
      said(got.message);
      if (got.reload) followReload(got.reload);
    } catch (e) {
      said(`not published: ${e.message}`, true);
    }
  }

  async function runDiff() {
    const a = $("diff-a").value, b = $("diff-b").value;
    try {
      const got = await getJson(`${api}/diff?a=${a}&b=${b}`);
      const lines = got.lines.length ? got.lines : [`${got.a} and ${got.b} are the same`];
      $("diff").replaceChildren(...lines.map((l) => el("span", {
        class: l.startsWith("+") && !l.startsWith("+++") ? "add" : l.startsWith("-") && !l.startsWith("---") ? "del" : "",
      }, l + "\n")));
    } catch (e) {
      text($("diff"), `diff failed: ${e.message}`);
    }
  }

  $("run-preview").addEventListener("click", runPreview);
  $("take-sample").addEventListener("click", takeSample);
  $("run-diff").addEventListener("click", runDiff);
  $("load-version").addEventListener("change", (ev) => loadVersion(ev.target.value).catch((e) => said(e.message, true)));
  if (editable) {
    $("save-draft").addEventListener("click", save);
    $("publish").addEventListener("click", publish);
    $("add-group").addEventListener("click", () => {
      state.groups.push({ groupName: `group${state.groups.length + 1}`, active: true, rules: [] });
      render();
    });
  }
  load().catch((e) => text($("table-state"), `could not read the table: ${e.message}`));
})();
