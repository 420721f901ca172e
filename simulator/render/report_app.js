// The report's page logic (simulator/render/html.py inlines it once after BokehJS). Every number drawn comes from
// the DATA block the simulator wrote; controls switch between its precomputed views; nothing is fetched.
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("report-data").textContent);
  const P = Bokeh.Plotting;
  const COLORS = {prior: "#d95f02", refined: "#1b9e77", sd: "#1b9e77", plain: "#7570b3"};
  const STACK = ["#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"];
  const state = {rendered: {}, errors: [], view: null, tables: {}};
  window.__report = state;

  function el(id) { return document.getElementById(id); }
  function key() { return DATA.controls.map(c => el("ctl-" + c.name).value).join("|"); }
  function clear(id) { const d = el(id); while (d.firstChild) d.removeChild(d.firstChild); return d; }

  function csv(rows) {
    return rows.map(r => r.map(v => (typeof v === "string" && /[",\n]/.test(v)) ? '"' + v.replace(/"/g, '""') + '"'
      : String(v)).join(",")).join("\n") + "\n";
  }
  function download(name, rows) {
    const a = document.createElement("a");
    a.href = "data:text/csv;charset=utf-8," + encodeURIComponent(csv(rows));
    a.download = name;
    document.body.appendChild(a); a.click(); a.remove();
  }
  function columns(obj) {  // {name: array} -> rows with a header
    const names = Object.keys(obj);
    const n = Math.max(...names.map(k => obj[k].length));
    const rows = [names];
    for (let i = 0; i < n; i++) rows.push(names.map(k => obj[k][i] === undefined ? "" : obj[k][i]));
    return rows;
  }
  function table(chart, obj) { state.tables[chart] = columns(obj); }

  function fig(opts) {
    return P.figure(Object.assign({height: 330, width: 620, tools: "pan,wheel_zoom,box_zoom,reset,save,hover",
      toolbar_location: "right"}, opts));
  }
  async function show(p, id) {
    await P.show(p, clear(id));
    state.rendered[id] = (state.rendered[id] || 0) + 1;
  }

  async function speedup(v) {
    const s = v.speedup;
    const p = fig({title: "Speedup at the best draft length vs batch (band shaded; SD pays where its low end > 1)",
      x_axis_type: "log", x_axis_label: "batch (concurrent requests)", y_axis_label: "speedup over plain decoding (x)"});
    for (const [lo, hi] of s.pays) {
      p.add_layout(new Bokeh.BoxAnnotation({left: lo, right: hi, fill_alpha: 0.08, fill_color: "#1b9e77",
        line_alpha: 0}));
    }
    for (const m of ["prior", "refined"]) {
      const src = new Bokeh.ColumnDataSource({data: {b: s.batch, y: s[m], lo: s[m + "_low"], hi: s[m + "_high"]}});
      p.varea({x: {field: "b"}, y1: {field: "lo"}, y2: {field: "hi"}, source: src, fill_color: COLORS[m],
        fill_alpha: 0.18, legend_label: m + " band"});
      p.line({x: {field: "b"}, y: {field: "y"}, source: src, line_color: COLORS[m], line_width: 2,
        line_dash: m === "prior" ? "dashed" : "solid", legend_label: m});
      p.scatter({x: {field: "b"}, y: {field: "y"}, source: src, color: COLORS[m], size: 6});
    }
    p.line({x: [s.batch[0], s.batch[s.batch.length - 1]], y: [1, 1], line_color: "#666", line_dash: "dotted"});
    p.legend.location = "top_right";
    table("speedup", {batch: s.batch, best_k_refined: s.k, speedup_prior: s.prior, speedup_prior_low: s.prior_low,
      speedup_prior_high: s.prior_high, speedup_refined: s.refined, speedup_refined_low: s.refined_low,
      speedup_refined_high: s.refined_high});
    await show(p, "chart-speedup");
  }

  async function throughput(v) {
    const t = v.throughput;
    const p = fig({title: "Tokens/s per GPU vs tokens/s per user, with and without SD (labels: batch, K)",
      x_axis_type: "log", y_axis_type: "log", x_axis_label: "tokens/s per user", y_axis_label: "tokens/s per GPU"});
    for (const arm of ["plain", "sd"]) {
      const src = new Bokeh.ColumnDataSource({data: {x: t["user_" + arm], y: t["gpu_" + arm], b: t.batch, k: t.k}});
      p.line({x: {field: "x"}, y: {field: "y"}, source: src, line_color: COLORS[arm], line_width: 2,
        line_dash: arm === "plain" ? "dashed" : "solid", legend_label: arm === "sd" ? "with SD (table K)" : "without SD"});
      p.scatter({x: {field: "x"}, y: {field: "y"}, source: src, color: COLORS[arm], size: 6});
    }
    if (v.serving) {
      const s = v.serving;
      for (const arm of ["plain", "sd"]) {
        p.scatter({x: s["user_" + arm], y: s["gpu_" + arm], marker: "triangle", size: 8, color: COLORS[arm],
          legend_label: "served ISL/OSL " + (arm === "sd" ? "with SD" : "without SD")});
      }
    }
    p.legend.location = "bottom_left";
    table("throughput", Object.assign({batch: t.batch, k: t.k, tokens_per_s_user_sd: t.user_sd,
      tokens_per_s_gpu_sd: t.gpu_sd, tokens_per_s_user_plain: t.user_plain, tokens_per_s_gpu_plain: t.gpu_plain},
      v.serving ? {served_concurrency: v.serving.concurrency, served_k: v.serving.k, served_user_sd: v.serving.user_sd,
        served_gpu_sd: v.serving.gpu_sd, served_user_plain: v.serving.user_plain, served_gpu_plain: v.serving.gpu_plain}
        : {}));
    await show(p, "chart-throughput");
  }

  async function breakdown(v) {
    const b = v.breakdown;
    const x = [];
    for (const bb of b.batch) { x.push("B" + bb + " plain"); x.push("B" + bb + " SD K" + b.k[b.batch.indexOf(bb)]); }
    const p = fig({title: "Time per output token of a request by part (µs; SD: the round at the best K / its AL)",
      x_range: x, y_axis_label: "µs per output token"});
    p.xaxis.major_label_orientation = 0.9;
    const bottom = x.map(() => 0);
    const cols = {bar: x};
    b.categories.forEach((c, i) => {
      const vals = [];
      b.batch.forEach((_, j) => { vals.push(b.plain[c][j]); vals.push(b.sd[c][j]); });
      const top = vals.map((y, j) => bottom[j] + y);
      p.vbar({x: x, bottom: bottom.slice(), top: top, width: 0.8, fill_color: STACK[i % STACK.length],
        line_color: "white", legend_label: c});
      top.forEach((y, j) => { bottom[j] = y; });
      cols[c.replace(/ /g, "_") + "_us"] = vals;
    });
    cols.total_us = bottom.slice();
    p.legend.location = "top_left";
    table("breakdown", cols);
    await show(p, "chart-breakdown");
  }

  async function walk(v) {
    const w = v.walk;
    const names = w.steps.concat(["refined"]);
    const p = fig({title: "explain walk prior → refined at batch " + w.batch + ", K = " + w.k + " (speedup)",
      x_range: names, y_axis_label: "speedup over plain decoding (x)"});
    p.xaxis.major_label_orientation = 0.7;
    const bottoms = [0], tops = [w.speedup[0]], colors = ["#7f7f7f"];
    for (let i = 1; i < w.speedup.length; i++) {
      bottoms.push(w.speedup[i - 1]); tops.push(w.speedup[i]);
      colors.push(w.speedup[i] >= w.speedup[i - 1] ? "#1b9e77" : "#d95f02");
    }
    bottoms.push(0); tops.push(w.speedup[w.speedup.length - 1]); colors.push("#386cb0");
    p.vbar({x: names, bottom: bottoms, top: tops, width: 0.75, fill_color: colors, line_color: "black"});
    p.line({x: [names[0], names[names.length - 1]], y: [1, 1], line_color: "#666", line_dash: "dotted"});
    table("walk", {step: w.steps, speedup: w.speedup, decode_verify_ratio: w.ratio, t_round_us: w.t_round_us});
    await show(p, "chart-walk");
  }

  function text(id, s) { el(id).textContent = s; }
  function assumptions(v) {
    const box = clear("assumptions");
    for (const [k, val] of Object.entries(v.assumptions)) {
      const dt = document.createElement("dt"); dt.textContent = k; box.appendChild(dt);
      const dd = document.createElement("dd"); dd.textContent = val; box.appendChild(dd);
    }
  }

  async function render() {
    const k = key();
    const v = DATA.views[k];
    state.view = k;
    state.tables = state.tables.plan ? {plan: state.tables.plan} : {};
    if (!v) {
      for (const id of ["chart-speedup", "chart-throughput", "chart-breakdown", "chart-walk"]) clear(id);
      text("view-note", "not priced: " + (DATA.missing[k] || "this combination is not in the report"));
      text("schedule-text", ""); clear("assumptions");
      return false;
    }
    text("view-note", v.title);
    await speedup(v); await throughput(v); await breakdown(v); await walk(v);
    text("schedule-summary", v.schedule.summary);
    text("schedule-text", v.schedule.config);
    table("schedule", {batch_from: v.schedule.ranges.map(r => r[0]), batch_to: v.schedule.ranges.map(r => r[1]),
      k: v.schedule.ranges.map(r => r[2])});
    assumptions(v);
    return true;
  }

  async function plan() {
    if (!DATA.plan) return;
    el("plan-section").style.display = "";
    const pl = DATA.plan;
    const p = fig({title: pl.title, x_axis_type: "log", y_axis_type: "log", x_axis_label: "tokens/s per user",
      y_axis_label: "tokens/s per GPU"});
    for (const arm of ["no_sd", "sd"]) {
      const f = pl["front_" + arm];
      p.line({x: f.user, y: f.gpu, line_color: arm === "sd" ? COLORS.sd : COLORS.plain, line_width: 2,
        line_dash: arm === "sd" ? "solid" : "dashed", legend_label: arm === "sd" ? "Pareto front with SD" :
        "Pareto front without SD"});
      p.scatter({x: f.user, y: f.gpu, size: 6, color: arm === "sd" ? COLORS.sd : COLORS.plain});
    }
    p.scatter({x: pl.all.user, y: pl.all.gpu, size: 3, color: "#999", alpha: 0.35, legend_label: "every point"});
    if (pl.best) p.scatter({x: [pl.best.user], y: [pl.best.gpu], size: 14, marker: "star", color: "#e7298a",
      legend_label: "best under the SLA"});
    p.legend.location = "bottom_left";
    text("plan-text", pl.text);
    state.tables.plan = columns(pl.table);
    await show(p, "chart-plan");
  }

  function controls() {
    const box = el("controls");
    for (const c of DATA.controls) {
      const lab = document.createElement("label");
      lab.textContent = c.name + " ";
      const sel = document.createElement("select");
      sel.id = "ctl-" + c.name;
      for (const o of c.options) {
        const opt = document.createElement("option"); opt.value = o; opt.textContent = o; sel.appendChild(opt);
      }
      sel.value = c.options[0];
      sel.addEventListener("change", () => {
        state.pending = render().catch(e => { state.errors.push(String(e && e.stack || e)); return false; });
      });
      lab.appendChild(sel); box.appendChild(lab);
    }
    for (const b of document.querySelectorAll("button[data-csv]")) {
      b.addEventListener("click", () => {
        const c = b.getAttribute("data-csv");
        if (c === "all") download("report-all-views.csv", DATA.all_csv);
        else if (state.tables[c]) download(c + "-" + state.view.replace(/\|/g, "_") + ".csv", state.tables[c]);
      });
    }
  }

  async function selftest() {  // every option of every control renders a view; used by tests/render/test_report_browser
    const out = {switched: 0, views: [], missing: 0};
    for (const c of DATA.controls) {
      const sel = el("ctl-" + c.name);
      for (const o of c.options) {
        sel.value = o;
        sel.dispatchEvent(new Event("change"));  // the page's own handler renders the view
        const ok = await state.pending;
        out.switched += 1;
        if (ok) out.views.push(state.view); else out.missing += 1;
      }
      if (sel.value !== c.options[0]) {
        sel.value = c.options[0];
        sel.dispatchEvent(new Event("change"));
        await state.pending;
      }
    }
    out.rendered = state.rendered;
    out.csv_rows = Object.fromEntries(Object.entries(state.tables).map(([k, v]) => [k, v.length]));
    out.errors = state.errors.concat(window.__errors || []);
    out.canvases = (function f(r) { let n = 0; for (const e of r.querySelectorAll("*")) {
      if (e.tagName === "CANVAS" && e.width > 50 && e.height > 50) n += 1; if (e.shadowRoot) n += f(e.shadowRoot); }
      return n; })(document);
    el("selftest").textContent = JSON.stringify(out);
  }

  controls();
  render().then(plan).then(() => { if (location.hash === "#selftest") return selftest(); })
    .then(() => { document.body.setAttribute("data-ready", "1"); })
    .catch(e => { state.errors.push(String(e && e.stack || e)); el("selftest").textContent =
      JSON.stringify({errors: state.errors}); });
})();
