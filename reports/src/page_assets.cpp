// The style sheet and scripts inlined into the lab and case pages. The scripts
// only look values up in the page's embedded JSON and build the DOM; every
// number comes from the C++ side (lab_page.cpp, case_page.cpp).
#include "page_support.h"

namespace attncheck::pages {

const char* const kPageCss = R"CSS(
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; max-width: 88em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.5em; } h3 { font-size: 1em; margin: 0 0 .3em; }
.zh { font-weight: normal; color: #555; font-size: .85em; }
.shape { font-weight: normal; color: #555; font-family: ui-monospace, monospace; }
.intro, .legend { max-width: 60em; } .legend { color: #444; font-size: .9em; }
.controls { display: flex; flex-wrap: wrap; gap: .8em 2em; align-items: center; margin: 1em 0;
  padding: .6em .8em; background: #f3f5f8; border: 1px solid #d5dbe3; }
.controls fieldset { border: 0; margin: 0; padding: 0; display: flex; gap: .6em; align-items: center; }
.controls legend { float: left; margin-right: .6em; font-weight: bold; }
.control { display: flex; gap: .5em; align-items: center; }
#tau { width: 16em; } output { font-family: ui-monospace, monospace; min-width: 5em; }
.note { background: #fff4d6; border: 1px solid #e0b84d; padding: .4em .7em; max-width: 60em; }
.summary { font-weight: bold; max-width: 70em; }
.grid { display: flex; flex-wrap: wrap; gap: 1.2em 2em; align-items: flex-start; }
figure.table { margin: 0; }
.scroll { max-height: 30em; max-width: 60em; width: fit-content; overflow: auto; border: 1px solid #d5dbe3; }
table { border-collapse: collapse; font-family: ui-monospace, monospace; font-size: .85em; }
th, td { padding: .15em .5em; text-align: right; border: 1px solid #e3e7ec; white-space: nowrap; }
thead th { background: #eef1f5; position: sticky; top: 0; z-index: 1; }
tbody th { background: #f7f8fa; text-align: left; position: sticky; left: 0; }
tr.current td, tr.current th { background: #fff1a8; border-top: 2px solid #7a5d00; border-bottom: 2px solid #7a5d00; font-weight: bold; }
td.masked { color: #555; background: repeating-linear-gradient(45deg, #fff, #fff 4px, #e6e6e6 4px, #e6e6e6 8px); }
tr.current td.masked { background: repeating-linear-gradient(45deg, #fff1a8, #fff1a8 4px, #e6d98a 4px, #e6d98a 8px); }
td.sum { background: #f3f5f8; }
td.beyond { outline: 2px solid #b00020; outline-offset: -2px; color: #b00020; font-weight: bold; }
.cap { color: #444; font-size: .85em; max-width: 30em; }
table.heat td { min-width: 3.6em; height: 2.2em; text-align: center; border: 1px solid #fff; }
table.heat tr.current th { background: #fff1a8; }
table.heat tr.current td { outline: 3px solid #7a5d00; outline-offset: -3px; }
/* Heat buckets outrank the current-row background: the row is marked by its outline and ▶. */
table.heat td.h0 { background: #f7fbff; } table.heat td.h1 { background: #deebf7; } table.heat td.h2 { background: #c6dbef; }
table.heat td.h3 { background: #9ecae1; } table.heat td.h4 { background: #6baed6; }
table.heat td.h5 { background: #4292c6; color: #fff; } table.heat td.h6 { background: #2171b5; color: #fff; }
table.heat td.h7 { background: #08519c; color: #fff; } table.heat td.h8 { background: #08408a; color: #fff; }
table.heat td.h9 { background: #083070; color: #fff; } table.heat td.h10 { background: #08205a; color: #fff; }
table.heat td.hx { background: #fbe3e6; }
#steps li { margin: .4em 0; max-width: 70em; } #steps ul { margin: .2em 0; }
.pair { display: flex; flex-wrap: wrap; gap: 1.2em 2em; align-items: flex-start; }
dl.labels { display: grid; grid-template-columns: max-content auto; gap: .1em 1em; font-size: .9em; }
dl.labels dt { font-weight: bold; } dl.labels dd { margin: 0; word-break: break-word; }
.listed { font-family: ui-monospace, monospace; font-size: .85em; }
)CSS";

const char* const kPageKitJs = R"JS(
// Table and heatmap rendering shared by the lab and case pages.
const attnPage = (function () {
  "use strict";
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "text") node.textContent = value;
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children || []) node.append(child);
    return node;
  }
  // spec: id, title, zh (optional), rows, cols (full shape), rowHeads, colHeads,
  // cells [[text]], titles [[text]] (optional), cellClass(i, j) (optional),
  // current (row index or -1), extra [{head, cells: [text]}] (optional),
  // cap (text, optional), heat [[bucket]] (heatmap when given)
  function table(spec) {
    const head = el("tr", {}, [el("th", {scope: "col", text: spec.corner || ""})]);
    for (const h of spec.colHeads) head.append(el("th", {scope: "col", text: h}));
    for (const x of spec.extra || []) head.append(el("th", {scope: "col", text: x.head}));
    const body = el("tbody");
    spec.cells.forEach((row, i) => {
      const current = i === spec.current;
      const tr = el("tr", {class: current ? "current" : null, "aria-current": current ? "true" : null,
                           "data-row": i});
      tr.append(el("th", {scope: "row", text: (current ? "▶ " : "") + spec.rowHeads[i]}));
      row.forEach((text, j) => {
        const classes = [];
        if (spec.cellClass) classes.push(spec.cellClass(i, j));
        if (spec.heat) {
          const bucket = spec.heat[i][j];
          classes.push(bucket >= 0 ? "h" + bucket : bucket === -1 ? "masked" : "hx");
        }
        tr.append(el("td", {class: classes.filter(Boolean).join(" ") || null, "data-row": i, "data-col": j,
                            title: spec.titles ? spec.titles[i][j] : null, text: text}));
      });
      for (const x of spec.extra || []) tr.append(el("td", {class: "sum", text: x.cells[i]}));
      body.append(tr);
    });
    const heading = el("h3", {}, [spec.title + " "]);
    if (spec.zh) heading.append(el("span", {class: "zh", text: spec.zh + " "}));
    heading.append(el("span", {class: "shape", text: "[" + spec.rows + "×" + spec.cols + "]"}));
    const children = [heading,
      el("div", {class: "scroll"}, [el("table", {id: spec.id, class: spec.heat ? "heat" : null},
                                       [el("thead", {}, [head]), body])])];
    if (spec.cap) children.push(el("p", {class: "cap", text: spec.cap}));
    return el("figure", {class: "table", id: spec.id + "-figure"}, children);
  }
  return {el, table};
})();
)JS";

const char* const kLabJs = R"JS(
(function () {
  "use strict";
  const P = attnPage;
  const $ = (id) => document.getElementById(id);
  const data = JSON.parse($("lab-data").textContent);
  const tokens = data.tokens, n = tokens.length;
  const keys = ["query", "tau", "causal"];
  const defaults = {query: data.defaults.query, tau: data.taus.indexOf(data.defaults.tau),
                    causal: data.defaults.causal === 1};
  let state = Object.assign({}, defaults);

  function fragmentOf(s) {
    return "query=" + s.query + "&tau=" + data.taus[s.tau] + "&causal=" + (s.causal ? 1 : 0);
  }
  function shareUrl() { return location.href.split("#")[0] + "#" + fragmentOf(state); }

  // A fragment restores all three controls, or none: anything else is reported.
  function parseFragment(hash) {
    const text = hash.replace(/^#/, "");
    if (text === "") return {state: Object.assign({}, defaults)};
    const fail = (why) => ({state: Object.assign({}, defaults), error: why});
    const seen = {};
    for (const part of text.split("&")) {
      const eq = part.indexOf("=");
      if (eq < 0) return fail("“" + part + "” is not key=value");
      const key = part.slice(0, eq);
      let value;
      try { value = decodeURIComponent(part.slice(eq + 1)); } catch (e) { return fail("“" + part + "” is not valid URL text"); }
      if (!keys.includes(key)) return fail("unknown key “" + key + "” (expected query, tau, causal)");
      if (key in seen) return fail("“" + key + "” is given twice");
      seen[key] = value;
    }
    for (const key of keys) if (!(key in seen)) return fail("“" + key + "” is missing");
    const query = tokens.findIndex((t, i) => String(i + 1) === seen.query);
    if (query < 0) return fail("query must be 1 to " + n + ", not “" + seen.query + "”");
    const tau = /^[0-9]+(\.[0-9]+)?$/.test(seen.tau) ? data.taus.findIndex((label) => Number(label) === Number(seen.tau)) : -1;
    if (tau < 0) return fail("tau must be a slider step (" + data.taus[0] + " to " + data.taus[data.taus.length - 1] +
                             " in steps of 0.05), not “" + seen.tau + "”");
    if (seen.causal !== "0" && seen.causal !== "1") return fail("causal must be 0 or 1, not “" + seen.causal + "”");
    return {state: {query: query + 1, tau: tau, causal: seen.causal === "1"}};
  }

  function applyFragment() {
    const parsed = parseFragment(location.hash);
    state = parsed.state;
    const note = $("note");
    if (parsed.error) {
      note.textContent = "The link's state “" + decodeSafe(location.hash) + "” was not understood: " + parsed.error +
                         ". Showing the defaults (" + fragmentOf(defaults) + ") instead.";
      note.hidden = false;
    } else {
      note.hidden = true;
    }
    render();
  }
  function decodeSafe(text) { try { return decodeURIComponent(text); } catch (e) { return text; } }

  const rowHeads = tokens.map((t, i) => (i + 1) + " " + t);
  const keyHeads = tokens.map((t, j) => "k" + (j + 1) + " " + t);
  const dims = (count, prefix) => Array.from({length: count}, (_, j) => prefix + (j + 1));

  function buildControls() {
    const fieldset = $("query-control");
    tokens.forEach((t, i) => {
      const input = P.el("input", {type: "radio", name: "query", id: "query-" + (i + 1), value: i + 1});
      input.addEventListener("change", () => { state.query = i + 1; update(); });
      fieldset.append(P.el("label", {for: "query-" + (i + 1)}, [input, " " + (i + 1) + " " + t]));
    });
    const slider = $("tau");
    slider.max = data.taus.length - 1;
    slider.addEventListener("input", () => { state.tau = Number(slider.value); update(); });
    $("causal").addEventListener("change", () => { state.causal = $("causal").checked; update(); });
    $("reset").addEventListener("click", () => { state = Object.assign({}, defaults); $("note").hidden = true; update(); });
    $("copy").addEventListener("click", copyShareUrl);
    window.addEventListener("hashchange", () => { if (location.hash.replace(/^#/, "") !== fragmentOf(state)) applyFragment(); });
  }

  function copyShareUrl() {
    const url = shareUrl(), status = $("copy-status"), field = $("share-url");
    const copied = () => { status.textContent = "Copied."; };
    const manual = () => { field.select(); status.textContent = "Select the link and copy it (Ctrl+C)."; };
    const fallback = () => { try { field.select(); if (document.execCommand("copy")) copied(); else manual(); } catch (e) { manual(); } };
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(url).then(copied, fallback);
    else fallback();
  }

  function update() {
    const fragment = "#" + fragmentOf(state);
    if (location.hash !== fragment) {
      try { history.replaceState(null, "", fragment); } catch (e) { location.replace(fragment); }
    }
    render();
  }

  function render() {
    const st = data.states[data.taus[state.tau] + "/" + (state.causal ? 1 : 0)];
    const q = state.query - 1, tau = data.taus[state.tau], row = st.rows[q];
    $("query-" + state.query).checked = true;
    $("tau").value = state.tau;
    $("tau").setAttribute("aria-valuetext", "τ = " + tau);
    $("tau-value").textContent = "τ = " + tau;
    $("causal").checked = state.causal;
    $("share-url").value = shareUrl();
    $("copy-status").textContent = "";

    const masked = (i, j) => (st.M[i][j] === "0" ? null : "masked");
    const tables = $("tables");
    tables.replaceChildren(
      P.table({id: "table-Q", title: "Q", zh: "queries", rows: n, cols: data.d_k, rowHeads, colHeads: dims(data.d_k, "d"),
               cells: data.Q, current: q}),
      P.table({id: "table-K", title: "K", zh: "keys", rows: n, cols: data.d_k, rowHeads, colHeads: dims(data.d_k, "d"),
               cells: data.K, current: -1}),
      P.table({id: "table-V", title: "V", zh: "values", rows: n, cols: data.d_v, rowHeads, colHeads: dims(data.d_v, "d"),
               cells: data.V, current: -1}),
      P.table({id: "table-R", title: "QKᵀ", zh: "raw scores", rows: n, cols: n, rowHeads, colHeads: keyHeads,
               cells: data.R, current: q}),
      P.table({id: "table-S", title: "QKᵀ/√d_k", zh: "缩放分数 scaled scores, √3 ≈ " + data.sqrt_d_k, rows: n, cols: n,
               rowHeads, colHeads: keyHeads, cells: data.S, current: q}),
      P.table({id: "table-M", title: "M", zh: "mask: 0 may read, −∞ masked", rows: n, cols: n, rowHeads,
               colHeads: keyHeads, cells: st.M, current: q, cellClass: masked}),
      P.table({id: "table-L", title: "L = (S + M)/τ", zh: "Mask 后 logits, τ = " + tau, rows: n, cols: n, rowHeads,
               colHeads: keyHeads, cells: st.L, current: q, cellClass: masked}),
      P.table({id: "table-A", title: "A = softmax(L)", zh: "weights, row by row", rows: n, cols: n, rowHeads,
               colHeads: keyHeads, cells: st.A, titles: st.A_full, current: q, cellClass: masked,
               extra: [{head: "sum shown", cells: st.rows.map((r) => r.sum_shown)},
                       {head: "sum unrounded", cells: st.rows.map((r) => r.sum_exact)}]}),
      P.table({id: "table-O", title: "O = AV", zh: "outputs", rows: n, cols: data.d_v, rowHeads,
               colHeads: dims(data.d_v, "d"), cells: st.O, current: q}),
      P.table({id: "heat-A", title: "Heatmap of A", rows: n, cols: n, rowHeads, colHeads: keyHeads, cells: st.A,
               titles: st.A_full, current: q, heat: st.heat,
               cap: "Darker means a larger weight; every cell carries its number. Hatched: masked (exactly 0). " +
                    "Colour only encodes a weight's size: it is not the cause of a prediction."}));

    const maskedNames = row.masked.map((j) => j + " " + tokens[j - 1]);
    $("summary").textContent = "Query " + state.query + " (" + tokens[q] + "), τ = " + tau + ", causal mask " +
      (state.causal ? "on" : "off") + ": largest weight " + row.max + " on key " + row.argmax + " (" +
      tokens[row.argmax - 1] + "); masked: " + (maskedNames.length ? maskedNames.join(", ") + " (weights exactly 0)" : "none") +
      "; row sum " + row.sum_shown + " as displayed, " + row.sum_exact + " unrounded; entropy " + row.entropy + " nats.";
    renderSteps(st, q, tau, row, maskedNames);
  }

  function renderSteps(st, q, tau, row, maskedNames) {
    const li = (children) => P.el("li", {}, children);
    const ul = (items) => P.el("ul", {}, items.map((t) => P.el("li", {text: t})));
    const qrow = data.Q[q], allowed = (j) => st.M[q][j] === "0";
    const dot = tokens.map((t, j) => "q" + (q + 1) + "·k" + (j + 1) + " = " +
      qrow.map((x, c) => x + "×" + data.K[j][c]).join(" + ") + " = " + data.R[q][j]);
    const scaled = tokens.map((t, j) => data.R[q][j] + " / " + data.sqrt_d_k + " = " + data.S[q][j]);
    const logits = tokens.map((t, j) => allowed(j) ? data.S[q][j] + " / " + tau + " = " + st.L[q][j]
                                                  : "key " + (j + 1) + " (" + t + "): −∞ (masked)");
    const terms = tokens.map((t, j) => st.A[q][j] + "×(" + data.V[j].join(", ") + ")").join(" + ");
    $("steps").replaceChildren(
      li(["Q, K and V have " + data.d_k + ", " + data.d_k + " and " + data.d_v + " columns (d_k = " + data.d_k +
          ", d_v = " + data.d_v + "). The current query " + tokens[q] + " is row " + (q + 1) + " of Q: (" +
          qrow.join(", ") + ")."]),
      li(["Row " + (q + 1) + " of QKᵀ: the query row dotted with each row of K.", ul(dot)]),
      li(["Divide by √d_k = √3 ≈ " + data.sqrt_d_k + " (not by τ) and compare with QKᵀ/√d_k (to three decimals).", ul(scaled)]),
      li([state.causal ? "Causal mask on: row i of M holds −∞ at every key j > i; in row " + (q + 1) + ": " +
                         (maskedNames.length ? maskedNames.join(", ") : "no key") + "."
                       : "Causal mask off: M is all 0."]),
      li(["L = (S + M)/τ with τ = " + tau + ": allowed keys are the scaled score divided by τ, masked keys stay −∞.", ul(logits)]),
      li(["Stable softmax of row " + (q + 1) + ": subtract its largest finite logit " + row.max_l + "; exp(L − " +
          row.max_l + ") = " + st.E[q].join(", ") + "; their sum is " + row.sum_e + "; the weights exp ÷ sum are " +
          st.A[q].join(", ") + ". The shown weights add up to " + row.sum_shown + "; the unrounded sum is " +
          row.sum_exact + "."]),
      li(["Row " + (q + 1) + " of O = Σ_j a_j·V_j = " + terms + " = (" + st.O[q].join(", ") + "). O is " + n + "×" +
          data.d_v + " whatever the state."]));
  }

  buildControls();
  applyFragment();
})();
)JS";

const char* const kCaseJs = R"JS(
(function () {
  "use strict";
  const P = attnPage;
  const $ = (id) => document.getElementById(id);
  const data = JSON.parse($("case-data").textContent);
  const range = (count) => Array.from({length: count}, (_, i) => String(i));

  function capNote(t) {
    const shownRows = t.v.length, shownCols = t.v.length ? t.v[0].length : 0;
    if (shownRows === t.rows && shownCols === t.cols) return null;
    return "Showing rows 0–" + (shownRows - 1) + " of " + t.rows + " and columns 0–" + (shownCols - 1) + " of " + t.cols +
           " (at most " + data.limits.rows + "×" + data.limits.cols + " cells per table); the counts above cover every cell.";
  }
  function tableOf(id, title, zh, t, extra) {
    return P.table(Object.assign({id, title, zh, rows: t.rows, cols: t.cols, corner: "i \\ j",
                                  rowHeads: range(t.v.length), colHeads: range(t.v.length ? t.v[0].length : 0),
                                  cells: t.v, titles: t.t, current: -1, cap: capNote(t)}, extra || {}));
  }
  function markedTable(id, title, t) {
    const cells = t.v.map((row, i) => row.map((x, j) => (t.beyond[i][j] ? "✗ " : "") + x));
    const figure = tableOf(id, title, null, Object.assign({}, t, {v: cells}),
                           {cellClass: (i, j) => (t.beyond[i][j] ? "beyond" : null)});
    figure.querySelectorAll("td.beyond").forEach((td) => td.setAttribute("data-beyond", "1"));
    return figure;
  }

  document.title = "attncheck case: " + data.problem;
  $("title").textContent = data.title ? data.title : "Case " + data.problem;
  $("details").textContent = "Problem " + data.problem + ": " + data.details + ". Reference: " + data.oracle +
    (data.implementation ? "; implementation: " + data.implementation + " (" + data.precision + ")" : "") + ".";
  for (const [key, value] of Object.entries(data.labels || {}))
    $("labels").append(P.el("dt", {text: key}), P.el("dd", {text: value}));
  for (const [id, count] of [["batch", data.batch], ["head", data.heads]])
    for (const i of range(count)) $(id).append(P.el("option", {value: i, text: i}));
  const embedded = (b, h) => data.slices.find((s) => s.b === b && s.h === h);

  function show() {
    const b = Number($("batch").value), h = Number($("head").value), slice = embedded(b, h);
    const note = $("note");
    if (!slice) {
      note.textContent = "Slice (batch " + b + ", head " + h + ") is not on this page. " + (data.left_out || "");
      note.hidden = false;
      return;
    }
    note.hidden = !data.left_out;
    if (data.left_out) note.textContent = data.left_out + ".";
    render(slice);
  }

  function render(slice) {
    const ref = slice.reference, where = "slice (batch " + slice.b + ", head " + slice.h + ")";
    const listed = $("listed");
    listed.replaceChildren();
    const comparison = $("comparison");
    comparison.replaceChildren();
    if (!data.implementation) {
      $("summary").textContent = "The reference's nine tables of " + where + " (" + data.oracle +
        "); no implementation was given (--impl NAME shows one beside it).";
    } else if (data.implementation_error) {
      $("summary").textContent = "The implementation " + data.implementation + " did not return a result for this case: " +
        data.implementation_error;
    } else {
      const parts = [], s = slice.summary;
      for (const name of ["O", "A"]) if (s[name])
        parts.push(s[name].beyond + " of " + s[name].cells + " cells of " + name + " beyond their bound");
      const beyond = (s.O.beyond || 0) + ((s.A && s.A.beyond) || 0);
      const worst = [s.O].concat(s.A ? [s.A] : []).filter((x) => x.worst_cell)
                          .map((x) => x.worst + " at " + x.worst_cell).join(", ");
      $("summary").textContent = data.implementation + " against the " + data.oracle + " reference, " + where + ": " +
        parts.join("; ") + (beyond ? " (marked ✗ and outlined)" : "") + "; worst error ÷ bound " + (worst || "0") +
        ". Hover a cell for its error and error ÷ bound." + (data.inconclusive ? " Inconclusive rows: " + data.inconclusive : "") +
        (s.A ? "" : " The implementation does not return A; only O is compared.");
      for (const text of slice.listed) listed.append(P.el("li", {text}));
      const impl = slice.implementation;
      const pairA = impl.A ? [tableOf("ref-A", "A, reference", null, impl.reference_A),
                              markedTable("impl-A", "A, " + data.implementation, impl.A)] : [];
      const heat = impl.A ? [tableOf("heat-ref-A", "Heatmap of A, reference", null, impl.reference_A, {heat: ref.A.heat}),
                             tableOf("heat-impl-A", "Heatmap of A, " + data.implementation, null, impl.A, {heat: impl.A.heat})] : [];
      comparison.append(P.el("h2", {text: "The reference beside " + data.implementation}),
                        P.el("div", {class: "pair"}, pairA),
                        P.el("div", {class: "pair"}, [tableOf("ref-O", "O, reference", null, impl.reference_O),
                                                      markedTable("impl-O", "O, " + data.implementation, impl.O)]),
                        P.el("p", {class: "legend", text: "Heatmaps: darker means a larger weight; every cell carries its number; hatched cells are masked."}),
                        P.el("div", {class: "pair"}, heat));
    }
    const masked = (i, j) => (ref.M.v[i][j] === "0" ? null : "masked");
    $("tables").replaceChildren(
      tableOf("table-Q", "Q", null, ref.Q), tableOf("table-K", "K", null, ref.K), tableOf("table-V", "V", null, ref.V),
      tableOf("table-R", "R = QKᵀ", null, ref.R), tableOf("table-S", "S = QKᵀ·scale", null, ref.S),
      tableOf("table-M", "M", "0 may read, −∞ masked", ref.M, {cellClass: masked}),
      tableOf("table-L", "L = (S + M)/τ", null, ref.L, {cellClass: masked}),
      tableOf("table-A", "A = softmax(L)", null, ref.A, {cellClass: masked, extra: [{head: "row sum", cells: ref.A.row_sums}]}),
      tableOf("table-O", "O = AV", null, ref.O),
      tableOf("heat-A", "Heatmap of A", "reference", ref.A, {heat: ref.A.heat}));
  }

  $("batch").value = String(data.slices[0].b);
  $("head").value = String(data.slices[0].h);
  $("batch").addEventListener("change", show);
  $("head").addEventListener("change", show);
  show();
})();
)JS";

}  // namespace attncheck::pages
