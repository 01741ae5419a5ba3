// compscope report: reads the embedded JSON document and draws every section with plotly.
"use strict";
const D = JSON.parse(document.getElementById("compscope-data").textContent);
const L = D.L, H = D.H;
const $ = (id) => document.getElementById(id);
const fmt = (v, n = 4) => (v === null || v === undefined || Number.isNaN(v)) ? "—" : Number(v).toPrecision(n);
const head = (l, h) => `${l}.${h}`;
const CONFIG = { displaylogo: false, responsive: true };

// ---------------------------------------------------------------- pair tables
const blockStart = {};
(function () { let i = 0; for (let l1 = 0; l1 < L; l1++) for (let l2 = l1 + 1; l2 < L; l2++) { blockStart[l1 * L + l2] = i; i += H * H; } })();
const decoded = {};
function pairs(key) {
  if (key in decoded) return decoded[key];
  const t = D.tables[key];
  if (!t || !t.enc) return (decoded[key] = null);
  const bin = atob(t.b64), bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  let out;
  if (t.enc === "f4") out = new Float32Array(bytes.buffer);
  else {
    const q = new Uint16Array(bytes.buffer), span = t.hi - t.lo;
    out = new Float32Array(q.length);
    for (let i = 0; i < q.length; i++) out[i] = q[i] === 65535 ? NaN : t.lo + (q[i] / 65534) * span;
  }
  return (decoded[key] = out);
}
function pairValue(arr, l1, h1, l2, h2) {
  if (!arr || l1 >= l2) return NaN;
  return arr[blockStart[l1 * L + l2] + h1 * H + h2];
}
// the model's interventional effects (with data) are one table per kind, whatever the metric
const EFFECTS = "interventions";
const tkey = (metric, kind, measure) => measure === EFFECTS ? `data|${kind}|${EFFECTS}` : `${metric}|${kind}|${measure}`;
const what = (s) => s.measure === EFFECTS ? `${s.kind} interventional effect on data (${D.effects_note})`
  : `${s.kind}-composition, ${s.measure}, metric ${s.metric}`;

function colours(measure) {
  const c = D.centres[measure];
  return (c === null || c === undefined) ? { colorscale: "Viridis" } : { colorscale: "RdBu", zmid: c };
}

// ---------------------------------------------------------------- model card
function drawCard() {
  $("title").textContent = `compscope report: ${D.model}`;
  $("card-table").innerHTML = D.card.map(([k, v]) => `<tr><th>${k}</th><td>${escapeHtml(String(v))}</td></tr>`).join("");
  $("notes").innerHTML = D.notes.map((n) => `<li>${escapeHtml(n)}</li>`).join("");
  $("command").textContent = `made by: ${D.command}   (compscope ${D.version}; pairs stored: ${D.stored})`;
}
function escapeHtml(s) { return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]); }

// ---------------------------------------------------------------- heatmaps
function fillSelect(id, items) { $(id).innerHTML = items.map((x) => `<option value="${x}">${x}</option>`).join(""); }
function state() { return { metric: $("sel-metric").value, kind: $("sel-kind").value, measure: $("sel-measure").value, view: $("sel-view").value }; }

function hoverText(s, l1, h1, l2, h2) {
  const parts = D.measures.map((m) => `${m === EFFECTS ? "effect on data" : m}: ${fmt(pairValue(pairs(tkey(s.metric, s.kind, m)), l1, h1, l2, h2))}`);
  return `writer ${head(l1, h1)} → reader ${head(l2, h2)} (${s.kind}, ${s.metric})<br>` + parts.join("<br>");
}


const HEAD_TICKS = 48;  // the most heads per axis of the pair heatmap that are each named on it
function drawHeatmap() {
  const s = state();
  const arr = pairs(tkey(s.metric, s.kind, s.measure));
  const t = D.tables[tkey(s.metric, s.kind, s.measure)];
  $("drill").innerHTML = "";
  if (!t) {  // the data measured other kinds than this one
    Plotly.purge("heatmap");
    $("heat-note").textContent = `No ${s.measure} table for ${s.kind}: the data behind this report measured other kinds.`;
    return;
  }
  const view = arr ? s.view : "layers";
  $("heat-note").textContent = (arr ? "" : "Pairs of this table were not stored (size budget); showing the layer summary. ") +
    `Colours ${D.centres[s.measure] === null || D.centres[s.measure] === undefined ? "on the measure's range" : "centred on the random-subspace baseline " + fmt(D.centres[s.measure], 3)}.`;
  if (view === "layers") return drawLayers(s, t);
  // rows: readers of layers 1..L-1; columns: writers of layers 0..L-2 (no other pair composes)
  const n = (L - 1) * H, z = [], text = [], withText = n * n <= 160000;
  for (let l2 = 1; l2 < L; l2++) for (let h2 = 0; h2 < H; h2++) {
    const row = [], trow = [];
    for (let l1 = 0; l1 < L - 1; l1++) for (let h1 = 0; h1 < H; h1++) {
      const v = pairValue(arr, l1, h1, l2, h2);
      row.push(Number.isNaN(v) ? null : v);
      if (withText) trow.push(l1 < l2 ? hoverText(s, l1, h1, l2, h2) : "");
    }
    z.push(row); text.push(trow);
  }
  // every head named (layer.head) where they fit, else each layer's block
  const tick = (first) => (n <= HEAD_TICKS
    ? { tickvals: [...Array(n).keys()], ticktext: [...Array(n).keys()].map((i) => `${Math.floor(i / H) + first}.${i % H}`) }
    : { tickvals: [...Array(L - 1).keys()].map((i) => i * H + (H - 1) / 2), ticktext: [...Array(L - 1).keys()].map((i) => `L${i + first}`) });
  const shapes = [];
  for (let i = 1; i < L - 1; i++) {
    shapes.push({ type: "line", x0: i * H - 0.5, x1: i * H - 0.5, y0: -0.5, y1: n - 0.5, line: { width: 0.5, color: "#888" } });
    shapes.push({ type: "line", y0: i * H - 0.5, y1: i * H - 0.5, x0: -0.5, x1: n - 0.5, line: { width: 0.5, color: "#888" } });
  }
  const trace = Object.assign({ type: "heatmap", z, hoverongaps: false, colorbar: { title: { text: s.measure } } }, colours(s.measure));
  if (withText) { trace.text = text; trace.hovertemplate = "%{text}<extra></extra>"; }
  else trace.hovertemplate = "writer col %{x} → reader row %{y}: %{z:.4g}<extra></extra>";
  const size = Math.min(900, Math.max(420, 12 * n + 120));
  Plotly.newPlot("heatmap", [trace], {
    title: { text: what(s) }, width: size + 120, height: size,
    xaxis: Object.assign({ title: { text: "writer head (earlier layer)" }, showgrid: false, zeroline: false }, tick(0)),
    yaxis: Object.assign({ title: { text: "reader head (later layer)" }, autorange: "reversed", showgrid: false, zeroline: false }, tick(1)),
    shapes, margin: { l: 70, r: 20, t: 50, b: 60 },
  }, CONFIG);
  $("heatmap").on("plotly_click", (ev) => {
    const p = ev.points[0], c = p.x, r = p.y;
    const l1 = Math.floor(c / H), h1 = c % H, l2 = 1 + Math.floor(r / H), h2 = r % H;
    if (l1 < l2) showPair(s.metric, s.kind, l1, h1, l2, h2);
  });
}

function drawLayers(s, t) {
  const z = t.max;
  const text = t.max.map((row, l2) => row.map((v, l1) => (v === null ? "" :
    `writer layer ${l1} → reader layer ${l2}<br>largest ${fmt(v)}<br>mean ${fmt(t.mean[l2][l1])}`)));
  const trace = Object.assign({ type: "heatmap", z, text, hovertemplate: "%{text}<extra></extra>", hoverongaps: false,
    colorbar: { title: { text: `${s.measure} (max)` } } }, colours(s.measure));
  Plotly.newPlot("heatmap", [trace], {
    title: { text: `${what(s)}: largest value per layer pair` }, width: 640, height: 560,
    xaxis: { title: { text: "writer layer" }, dtick: 1 }, yaxis: { title: { text: "reader layer" }, autorange: "reversed", dtick: 1 },
  }, CONFIG);
  $("heatmap").on("plotly_click", (ev) => { const p = ev.points[0]; if (p.x < p.y) drill(s, p.x, p.y); });
}

function drill(s, l1, l2) {
  const arr = pairs(tkey(s.metric, s.kind, s.measure));
  if (!arr) { $("drill").innerHTML = `<p class="small">The pairs of this table were not stored; rerun with fewer measures or metrics.</p>`; return; }
  const z = [], text = [];
  for (let h2 = 0; h2 < H; h2++) {
    z.push([...Array(H).keys()].map((h1) => pairValue(arr, l1, h1, l2, h2)));
    text.push([...Array(H).keys()].map((h1) => hoverText(s, l1, h1, l2, h2)));
  }
  const trace = Object.assign({ type: "heatmap", z, text, hovertemplate: "%{text}<extra></extra>" }, colours(s.measure));
  $("drill").innerHTML = "";
  Plotly.newPlot("drill", [trace], { title: { text: `layer ${l1} → layer ${l2}` }, width: 560, height: 500,
    xaxis: { title: { text: `writer head of layer ${l1}` } }, yaxis: { title: { text: `reader head of layer ${l2}` }, autorange: "reversed" } }, CONFIG);
  $("drill").on("plotly_click", (ev) => { const p = ev.points[0]; showPair(s.metric, s.kind, l1, p.x, l2, p.y); });
}

// ---------------------------------------------------------------- one pair
function showPair(metric, kind, l1, h1, l2, h2) {
  const key = `${metric}|${kind}|${head(l1, h1)}|${head(l2, h2)}`;
  const det = D.details[key];
  $("pair-title").textContent = `writer ${head(l1, h1)} → reader ${head(l2, h2)}, ${kind}-composition, metric ${metric}`;
  if (!det) {
    Plotly.purge("pair-fig");
    $("pair-fig").innerHTML = `<p>Spectra are stored for the strongest pairs only. For this one run:<br><code>${escapeHtml(pairCommand(metric, kind, l1, h1, l2, h2))}</code></p>`;
    $("pair-measures").innerHTML = effectRow(kind, l1, h1, l2, h2, "<tr><th>measure</th><th>value</th></tr>");
    return;
  }
  $("pair-fig").innerHTML = "";
  const bar = (y, ax, name) => ({ type: "bar", y, x: y.map((_, i) => i + 1), xaxis: "x" + ax, yaxis: "y" + ax, name });
  Plotly.newPlot("pair-fig", [bar(det.writer_sv, "", "writer singular values"), bar(det.reader_sv, "2", "reader singular values"),
    bar(det.angles_deg, "3", "principal angles (deg)"), bar(det.composed_sv, "4", "composed map's singular values")], {
    grid: { rows: 2, columns: 2, pattern: "independent" }, height: 520, width: 900, showlegend: false,
    annotations: [["writer W_OV singular values", 0.22, 1.0], ["reader singular values", 0.78, 1.0],
      ["principal angles (degrees)", 0.22, 0.45], ["singular values of BA", 0.78, 0.45]].map(([text, x, y]) =>
      ({ text, x, y, xref: "paper", yref: "paper", showarrow: false, xanchor: "center", yanchor: "bottom" })),
    margin: { t: 40 },
  }, CONFIG);
  $("pair-measures").innerHTML = "<tr><th>measure</th><th>value</th></tr>" +
    Object.entries(det.measures).map(([m, v]) => `<tr><td>${m}</td><td>${fmt(v, 5)}</td></tr>`).join("") + effectRow(kind, l1, h1, l2, h2);
}
// the command that prints one pair in full: the model as the report was given it (MODEL when it was
// an object) and loaded (its processing flags), and for a metric estimated on data, the data it was
// estimated on (the options that are not the defaults), and a ridge given
function shellWord(w) {
  return /^[\w@%+=:,.\/-]+$/.test(w) ? w : `'${w.replace(/'/g, "'\\''")}'`;
}
// the model as the command line names it again (MODEL for a model object, which has no name there)
function modelWord() {
  return D.model_arg === null || D.model_arg === undefined ? "MODEL" : shellWord(D.model_arg);
}
function pairCommand(metric, kind, l1, h1, l2, h2) {
  const m = modelWord();
  const arg = (D.metric_args || {})[metric] === undefined ? metric : D.metric_args[metric];
  if (arg === null)  // a metric given in Python only: the call that names it
    return `compscope.compose_pair(${D.model_arg === null || D.model_arg === undefined ? "model" : JSON.stringify(D.model_arg)}, ` +
      `"${head(l1, h1)}", "${head(l2, h2)}", "${kind}", metric=...)  # metric: the ${metric} you gave`;
  const onData = (D.on_data || []).includes(metric) ? D.metric_data_flags || [] : [];
  const ridge = D.ridge === null || D.ridge === undefined || metric === "identity" ? [] : ["--ridge", String(D.ridge)];
  return [`compscope pair ${m} ${head(l1, h1)} ${head(l2, h2)} --kind ${kind} --metric ${shellWord(arg)}`, ...(D.model_flags || []),
    ...ridge, ...onData].join(" ");
}
// with data, the pair's own interventional effect of this kind under the measures (empty without)
function effectRow(kind, l1, h1, l2, h2, before = "") {
  if (!D.measures.includes(EFFECTS)) return "";
  const v = pairValue(pairs(tkey(null, kind, EFFECTS)), l1, h1, l2, h2);
  return before + `<tr id="pair-effect"><td title="${escapeHtml(D.effects_note || "")}">effect on data (${kind} intervention)</td>` +
    `<td>${Number.isNaN(v) ? "not intervened" : fmt(v, 3)}</td></tr>`;
}

// ---------------------------------------------------------------- circuit graph
const ROLE_COLOUR = { induction: "#d62728", previous_token: "#1f77b4", copying: "#2ca02c", none: "#bbbbbb" };
const KIND_COLOUR = { Q: "#9467bd", K: "#ff7f0e", V: "#17becf" };
function roleOf(l, h) {
  const r = D.labels.roles;
  for (const name of ["induction", "previous_token", "copying"]) if ((r[name] || []).some(([a, b]) => a === l && b === h)) return name;
  return "none";
}
function drawGraph() {
  $("graph-note").textContent = `Heads by layer; edges: the strongest pairs per kind by ${D.edge_measure} (metric ${D.edge_metric}) above the random baseline. ` +
    `Node colours: labels from ${D.labels.source} (${D.labels.rule}).`;
  const traces = [];
  for (const kind of D.kinds) {
    const xs = [], ys = [], text = [];
    for (const [l1, h1, l2, h2, v] of D.edges[kind] || []) { xs.push(l1, l2, null); ys.push(h1, h2, null); text.push(v); }
    traces.push({ type: "scatter", mode: "lines", x: xs, y: ys, name: `${kind}-composition`, hoverinfo: "skip",
      line: { color: KIND_COLOUR[kind], width: 1.5 }, opacity: 0.6 });
  }
  for (const role of ["induction", "previous_token", "copying", "none"]) {
    const xs = [], ys = [], text = [];
    for (let l = 0; l < L; l++) for (let h = 0; h < H; h++) if (roleOf(l, h) === role) {
      xs.push(l); ys.push(h);
      const scored = (scores, err) => Object.entries(scores).map(([k, v]) => `${k} ${fmt(v[l][h], 3)}` +
        (err[k] && err[k][l][h] !== null ? ` ± ${fmt(err[k][l][h], 3)}` : "")).join("<br>");  // ± the standard error over the sequences
      const t = D.labels.text;  // the labels on natural text too (validate --text-labels)
      text.push(`head ${head(l, h)}<br>${scored(D.labels.scores, D.labels.errors || {})}` +
        (t ? `<br>on ${escapeHtml(t.data)}:<br>${scored(t.scores, t.errors || {})}` : ""));
    }
    traces.push({ type: "scatter", mode: "markers", x: xs, y: ys, text, hovertemplate: "%{text}<extra></extra>",
      name: role === "none" ? "other heads" : role.replace("_", "-"), marker: { size: Math.max(5, Math.min(14, 300 / Math.max(L, H))), color: ROLE_COLOUR[role], line: { width: 0.5, color: "#333" } } });
  }
  Plotly.newPlot("graph-fig", traces, { width: Math.max(560, Math.min(1200, 200 + 40 * L)), height: Math.max(380, Math.min(900, 160 + 28 * H)),
    xaxis: { title: { text: "layer" }, dtick: 1 }, yaxis: { title: { text: "head" }, dtick: H > 20 ? 4 : 1 } }, CONFIG);
}

// ---------------------------------------------------------------- axioms, verdict, training
function drawAxioms() {
  const a = D.axioms;
  $("axioms-table").innerHTML = `<tr><th>measure</th>${a.axioms.map((x) => `<th>${x}</th>`).join("")}</tr>` +
    a.rows.map((r) => `<tr><td>${r.measure}</td>${r.cells.map((c) => `<td title="${escapeHtml(c.reason || c.where)}" class="${c.mark === "VIOLATED" ? "bad" : ""}">${c.mark}</td>`).join("")}</tr>`).join("");
}
function drawVerdict() {
  if (!D.verdict) {
    $("verdict").innerHTML = D.cannot_run ?  // suggesting `validate` would send the reader to a refusal
      `<p>No data for this report: ${escapeHtml(D.cannot_run)}</p>` :
      `<p>No data for this report. Run <code>compscope validate ${escapeHtml(modelWord())} --out DIR</code> and ` +
      `pass <code>--data DIR</code> to <code>compscope report</code>.</p>`;
    return;
  }
  const by = {};
  for (const r of D.verdict) (by[`${r.measure}|${r.metric}`] = by[`${r.measure}|${r.metric}`] || {})[r.kind] = r;
  const kinds = D.kinds.split("");
  // the rows come ranked as the printed verdict ranks them (payload.verdict_json); digits as it prints them
  const fixed = (v, n) => (v === null || v === undefined || Number.isNaN(v)) ? "—" : Number(v).toFixed(n);
  // the span over the heads near a threshold: shown when some K AUROC moves with them (verdicts since it was kept)
  const near = D.verdict.some((r) => r.kind === "K" && typeof r.auroc_near_low === "number" && typeof r.auroc_near_high === "number" &&
    r.auroc_near_high > r.auroc_near_low);
  // DeLong's standard error of each K AUROC (verdicts since it was kept)
  const se = D.verdict.some((r) => r.kind === "K" && typeof r.auroc_se === "number");
  let h = verdictSummary(D.verdict_summary) + `<table id="verdict-table"><tr><th>measure</th><th>metric</th>${kinds.map((k) => `<th>Spearman ${k}</th>`).join("")}<th>AUROC K</th>` +
    (se ? `<th title="DeLong's standard error of AUROC K, the pairs taken as independent draws (pairs that share a head are not: a lower bound)">± SE</th>` : "") + `<th title="AUROC K over the true pairs the K interventions confirm">confirmed</th><th title="AUROC K over the comparisons between pairs into the same reader">within readers</th><th title="AUROC K over the comparisons between pairs from the same writer">within writers</th>` +
    (near ? `<th title="the lowest and highest AUROC K with the heads near a threshold (within 2 standard errors) put on either side of it">near a threshold</th>` : "") +
    `<th>axioms kept</th></tr>`;
  for (const [key, ks] of Object.entries(by)) {
    const [m, met] = key.split("|"), any = Object.values(ks)[0], K = ks.K || {};
    h += `<tr><td>${m}</td><td>${met}</td>${kinds.map((k) => `<td>${fixed((ks[k] || {}).spearman, 2)}</td>`).join("")}<td>${fixed(K.auroc, 3)}</td>` +
      (se ? `<td>${fixed(K.auroc_se, 3)}</td>` : "") + `<td>${fixed(K.auroc_confirmed, 3)}</td><td>${fixed(K.auroc_within_readers, 3)}</td><td>${fixed(K.auroc_within_writers, 3)}</td>` +
      (near ? `<td>${fixed(K.auroc_near_low, 3)}–${fixed(K.auroc_near_high, 3)}</td>` : "") + `<td>${any.axioms}</td></tr>`;
  }
  h += "</table>";
  if (D.verdict_heads && D.verdict_heads.length) {
    // the per-head rankings as `compscope validate` prints them (2 decimals), one row per score and content
    const rotary = D.verdict_heads.some((r) => r.content === "activations");
    const CONTENT = { embed: "embeddings", activations: "residual on data" };
    h += `<p>Each head's score from the weights against its label from data (over all heads):</p><table id="verdict-heads"><tr><th>score from the weights</th>` +
      (rotary ? `<th title="the distribution of the content part of a rotary or ALiBi head's previous-token score">relative-position content</th>` : "") +
      `<th>label</th><th>Spearman</th><th>precision of the top 5</th><th title="heads at or above the label's threshold">heads labelled</th></tr>` +
      D.verdict_heads.map((r) => `<tr><td>${escapeHtml(r.score)}</td>${rotary ? `<td>${CONTENT[r.content] || escapeHtml(r.content)}</td>` : ""}` +
        `<td>${r.score === "previous_token" ? "previous-token" : "induction"}</td><td>${fixed(r.spearman, 2)}</td>` +
        `<td>${fixed(r.precision_top5, 2)}</td><td>${r.true_heads === undefined || r.true_heads === null ? "—" : r.true_heads}</td></tr>`).join("") +
      "</table>";
  }
  if (D.verdict_by_head && D.verdict_by_head.length) {
    // one measure x metric at a time, the first the best the verdict ranks among those this report computed
    const keys = [...new Set(D.verdict_by_head.map((r) => `${r.measure}|${r.metric}`))];
    const order = Object.keys(by);
    keys.sort((a, b) => (order.indexOf(a) < 0 ? 1e9 : order.indexOf(a)) - (order.indexOf(b) < 0 ? 1e9 : order.indexOf(b)));
    h += `<p>Where a measure finds the true previous-token → induction K-pairs and where it misses them: for each ` +
      `previous-token writer and induction reader, the share of the false K-pairs its true pairs score above ` +
      `(weighted by their number, each side averages to the AUROC), and the same share for its other pairs; ` +
      `then both by the model's own K interventions. Scores as this report computed them. ` +
      `<select id="by-head-choice">${keys.map((k) => `<option value="${escapeHtml(k)}">${escapeHtml(k.replace("|", ", "))}</option>`).join("")}</select></p>` +
      `<table id="verdict-by-head"></table>`;
  }
  $("verdict").innerHTML = h;
  const choice = $("by-head-choice");
  if (choice) { choice.onchange = () => drawByHead(choice.value); drawByHead(choice.value); }
}
// the verdict's K AUROC of one measure x metric ("measure|metric") taken apart by head (collect.verdict_by_head)
function drawByHead(key) {
  const fixed = (v) => (v === null || v === undefined || Number.isNaN(v)) ? "—" : Number(v).toFixed(3);
  const rows = D.verdict_by_head.filter((r) => `${r.measure}|${r.metric}` === key);
  $("verdict-by-head").innerHTML = `<tr><th>head</th><th>as</th><th>label</th><th>true pairs</th>` +
    `<th title="share of the false K-pairs its true pairs score above, by the measure">measure: true</th><th>other</th>` +
    `<th title="the same by the K interventions">K effect: true</th><th>other</th></tr>` +
    rows.map((r) => `<tr><td>${r.layer}.${r.head}</td><td>${r.side === "writer" ? "previous-token writer" : "induction reader"}</td>` +
      `<td>${Number(r.label).toFixed(2)}</td><td>${r.true_pairs}</td><td>${fixed(r.measure_true)}</td><td>${fixed(r.measure_other)}</td>` +
      `<td>${fixed(r.effect_true)}</td><td>${fixed(r.effect_other)}</td></tr>`).join("");
}
// the lines `compscope validate` prints above its table: what it ran on and the label truth; an
// indented line goes in a list under the line before it
function verdictSummary(lines) {
  if (!lines || !lines.length) return "";
  let h = "", open = false;
  for (const line of lines) {
    const sub = line.startsWith("  ");
    if (sub && !open) { h += "<ul>"; open = true; }
    if (!sub && open) { h += "</ul>"; open = false; }
    h += sub ? `<li>${escapeHtml(line.trim())}</li>` : `<p>${escapeHtml(line)}</p>`;
  }
  return `<div id="verdict-summary">${h}${open ? "</ul>" : ""}</div>`;
}
function drawTraining() {
  const T = D.track;
  if (!T) { $("training-body").innerHTML = "<p>No training run given (<code>--run DIR</code>, a folder written by <code>compscope train</code>).</p>"; return; }
  const panels = T.panels.filter((p) => p.kind === "K").concat(T.panels.filter((p) => p.kind !== "K")).slice(0, 6);
  $("training-body").innerHTML = panels.map((_, i) => `<div id="train-${i}" class="fig"></div>`).join("");
  panels.forEach((p, i) => {
    const traces = p.series.map((s) => ({ type: "scatter", mode: "lines", x: T.steps.map((x) => Math.max(x, 1)), y: s.values, name: s.pair,
      line: { width: s.highlight ? 2.5 : 1, color: s.highlight ? undefined : "#bbb" }, showlegend: s.highlight }));
    const shapes = T.formation === null ? [] : [{ type: "line", x0: Math.max(T.formation, 1), x1: Math.max(T.formation, 1), yref: "paper", y0: 0, y1: 1, line: { dash: "dash" } }];
    Plotly.newPlot(`train-${i}`, traces, { title: { text: `${p.kind}-composition: ${p.measure}, metric ${p.metric}` }, width: 760, height: 340,
      xaxis: { type: "log", title: { text: "training step (step 0 drawn at 1)" } }, shapes }, CONFIG);
  });
}

function drawComposition() {
  fillSelect("sel-metric", D.metrics); fillSelect("sel-kind", D.kinds.split("")); fillSelect("sel-measure", D.measures);
  if (D.kinds.includes("K")) $("sel-kind").value = "K";
  if (L * H > 320) $("sel-view").value = "layers";
  for (const id of ["sel-metric", "sel-kind", "sel-measure", "sel-view"]) $(id).addEventListener("change", drawHeatmap);
  drawHeatmap();
  const first = (D.edges[$("sel-kind").value] || [])[0];
  if (first) showPair(D.metrics[0], $("sel-kind").value, first[0], first[1], first[2], first[3]);
}

drawCard();
drawComposition();
drawGraph();
drawAxioms();
drawVerdict();
drawTraining();
