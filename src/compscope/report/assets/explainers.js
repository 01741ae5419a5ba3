// compscope report: the geometry explainers. The composition measures are computed here as the
// package computes them (thin SVDs from the factors, X = V_B^T U_A, then each measure).
"use strict";
(function () {
  const EX = D.explainer;
  const EPS = 2.220446049250313e-16;
  const el = (id) => document.getElementById(id);
  const num = (id) => parseFloat(el(id).value);
  const f3 = (v) => (Math.abs(v) < 5e-13 ? 0 : v).toFixed(3);

  // ------------------------------------------------------------ small linear algebra (rows)
  const T = (M) => M[0].map((_, j) => M.map((r) => r[j]));
  const mm = (A, B) => A.map((r) => B[0].map((_, j) => r.reduce((s, x, k) => s + x * B[k][j], 0)));
  function qr(M) { // modified Gram-Schmidt, M: m x n (m >= n): Q m x n, R n x n
    const m = M.length, n = M[0].length, Q = M.map((r) => r.slice()), R = [...Array(n)].map(() => Array(n).fill(0));
    for (let j = 0; j < n; j++) {
      for (let k = 0; k < j; k++) {
        let d = 0; for (let i = 0; i < m; i++) d += Q[i][k] * Q[i][j];
        R[k][j] = d; for (let i = 0; i < m; i++) Q[i][j] -= d * Q[i][k];
      }
      let nrm = 0; for (let i = 0; i < m; i++) nrm += Q[i][j] * Q[i][j];
      nrm = Math.sqrt(nrm); R[j][j] = nrm;
      for (let i = 0; i < m; i++) Q[i][j] = nrm > 0 ? Q[i][j] / nrm : 0;
    }
    return [Q, R];
  }
  function svd(A) { // one-sided Jacobi on a small n x n matrix: U, s (descending), V
    const n = A.length, U = A.map((r) => r.slice()), V = [...Array(n)].map((_, i) => [...Array(n)].map((_, j) => (i === j ? 1 : 0)));
    for (let sweep = 0; sweep < 60; sweep++) {
      let off = 0;
      for (let p = 0; p < n - 1; p++) for (let q = p + 1; q < n; q++) {
        let a = 0, b = 0, c = 0;
        for (let i = 0; i < n; i++) { a += U[i][p] * U[i][p]; b += U[i][q] * U[i][q]; c += U[i][p] * U[i][q]; }
        if (Math.abs(c) <= EPS * Math.sqrt(a * b)) continue;
        off = Math.max(off, Math.abs(c) / Math.sqrt(a * b));
        const zeta = (b - a) / (2 * c), t = Math.sign(zeta || 1) / (Math.abs(zeta) + Math.sqrt(1 + zeta * zeta));
        const cs = 1 / Math.sqrt(1 + t * t), sn = cs * t;
        for (const M of [U, V]) for (let i = 0; i < n; i++) { const x = M[i][p], y = M[i][q]; M[i][p] = cs * x - sn * y; M[i][q] = sn * x + cs * y; }
      }
      if (off === 0) break;
    }
    const s = [...Array(n).keys()].map((j) => Math.sqrt(U.reduce((acc, r) => acc + r[j] * r[j], 0)));
    const order = [...Array(n).keys()].sort((i, j) => s[j] - s[i]);
    const Un = U.map((r) => order.map((j) => (s[j] > 0 ? r[j] / s[j] : 0)));
    return [Un, order.map((j) => s[j]), V.map((r) => order.map((j) => r[j]))];
  }
  function thinSvd(left, right) { // left d x r, right r x d  ->  U (d x k), s, V (d x k), cut to the numerical rank
    const d = left.length;
    const [ql, rl] = qr(left), [qrr, rr] = qr(T(right));
    const [u, s, v] = svd(mm(rl, T(rr)));
    const k = s.filter((x) => x > s[0] * d * EPS).length;
    const U = mm(ql, u).map((r) => r.slice(0, k)), V = mm(qrr, v).map((r) => r.slice(0, k));
    return [U, s.slice(0, k), V];
  }
  const effRank = (s2) => {
    const tot = s2.reduce((x, y) => x + y, 0);
    if (!(tot > 0)) return 0;
    return Math.exp(-s2.reduce((h, x) => (x > 0 ? h + (x / tot) * Math.log(x / tot) : h), 0));
  };
  // every measure of writer A = wl wr and reader B = rl rr (d x d), as compscope's PairSpectra measures
  function measures(wl, wr, rl, rr) {
    const d = wl.length;
    const [UA, a] = thinSvd(wl, wr), [, b, VB] = thinSvd(rl, rr);
    const ra = a.length, rb = b.length;
    const out = { frobenius: 0, frobenius_baselined: null, tight: 0, overlap: 0, shared_dims: 0, bandwidth: 0, spectral: 0, read_gain: 0 };
    if (!ra || !rb) return out;
    const X = mm(T(VB), UA);
    let ba2 = 0, x2 = 0;
    for (let i = 0; i < rb; i++) for (let j = 0; j < ra; j++) { ba2 += b[i] ** 2 * X[i][j] ** 2 * a[j] ** 2; x2 += X[i][j] ** 2; }
    const na = a.reduce((s, x) => s + x * x, 0), nb = b.reduce((s, x) => s + x * x, 0);
    out.frobenius = Math.sqrt(ba2) / Math.sqrt(na * nb);
    if (d === 2 && ra === 1 && rb === 1) out.frobenius_baselined = out.frobenius - EX.rank1_baseline_d2;
    const k = Math.min(ra, rb);
    let den = 0; for (let i = 0; i < k; i++) den += a[i] ** 2 * b[i] ** 2;
    out.tight = den > 0 ? Math.sqrt(ba2 / den) : 0;
    out.overlap = x2 / ra; out.shared_dims = x2;
    const core = [...Array(Math.max(ra, rb))].map((_, i) => [...Array(Math.max(ra, rb))].map((_, j) => (i < rb && j < ra ? b[i] * X[i][j] * a[j] : 0)));
    const s2 = svd(core)[1].map((x) => x * x);
    const floor = (EPS * Math.sqrt(d * Math.max(ra, rb)) * a[0] * b[0]) ** 2;
    out.bandwidth = effRank(s2.map((x) => (x > floor ? x : 0)));
    out.spectral = Math.sqrt(Math.max(...s2)) / (a[0] * b[0]);
    out.read_gain = Math.sqrt(ba2 / na);
    return out;
  }
  window.compscopeMeasures = measures;

  // ------------------------------------------------------------ drawing helpers
  let seed = 7;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const gauss = () => Math.sqrt(-2 * Math.log(rand() + 1e-12)) * Math.cos(2 * Math.PI * rand());
  const cloud = [...Array(120)].map(() => [1.5 * gauss(), 1.0 * gauss()]);
  const ones = [...Array(60)].map((_, i) => -2 + (4 * i) / 59);
  const sq = { width: 640, height: 340, margin: { l: 40, r: 10, t: 30, b: 30 } };
  const axis = (r, anchor, domain) => ({ range: [-r, r], anchor, domain, zeroline: true });
  const line = (dx, dy, r, name, color) => ({ type: "scatter", mode: "lines", x: [-r * dx, r * dx], y: [-r * dy, r * dy], name, line: { color, dash: "dot" } });
  const pts = (P, name, color, ax = "") => ({ type: "scatter", mode: "markers", x: P.map((p) => p[0]), y: P.map((p) => p[1]), name, marker: { size: 5, color }, xaxis: "x" + ax, yaxis: "y" + ax });
  const mat = (M) => M.map((r) => "[" + r.map((x) => f3(x).padStart(7)).join(" ") + " ]").join("\n");

  // ------------------------------------------------------------ 2D -> 1D
  let oriented = false;
  function drawDown() {
    const a = num("pd-a"), b = num("pd-b"), n = Math.hypot(a, b) || 1, c = a / n, s = b / n;
    const P = oriented ? cloud.map(([x, y]) => [c * x + s * y, -s * x + c * y]) : cloud;
    const dir = oriented ? [1, 0] : [c, s];
    const y = cloud.map(([x0, x1]) => [a * x0 + b * x1, 0]);
    const t1 = pts(P, "x (2-D)", "#555"), t2 = line(dir[0], dir[1], 6, "W's line", "#d62728"), t3 = pts(y, "y = W x (1-D)", "#1f77b4", "2");
    Plotly.react("ex-down", [t1, t2, t3], Object.assign({}, sq, { xaxis: axis(6, "y", [0, 0.48]), yaxis: axis(6, "x"),
      xaxis2: Object.assign(axis(12, "y2", [0.55, 1])), yaxis2: axis(1, "x2"), title: { text: oriented ? "rotated so W's line is horizontal" : "" } }), CONFIG);
  }
  // ------------------------------------------------------------ 1D -> 2D
  function drawUp() {
    const a = num("pu-a"), b = num("pu-b");
    const z = ones.map((y) => [a * y, b * y]);
    Plotly.react("ex-up", [pts(ones.map((y) => [y, 0]), "y (1-D)", "#1f77b4"), pts(z, "z = W y", "#d62728", "2")],
      Object.assign({}, sq, { xaxis: axis(3, "y", [0, 0.48]), yaxis: axis(1, "x"), xaxis2: axis(8, "y2", [0.55, 1]), yaxis2: axis(8, "x2") }), CONFIG);
  }
  // ------------------------------------------------------------ bottleneck
  function drawBottleneck() {
    const Wd = [[num("bn-d0"), num("bn-d1")]], Wu = [[num("bn-u0")], [num("bn-u1")]];
    const W = mm(Wu, Wd);
    const [, s] = svd(W);
    el("bn-text").textContent = `W_up W_down =\n${mat(W)}\nsingular values ${s.map(f3).join(", ")}  (rank ${s.filter((x) => x > s[0] * 2 * EPS).length})`;
    const z = cloud.map(([x0, x1]) => [W[0][0] * x0 + W[0][1] * x1, W[1][0] * x0 + W[1][1] * x1]);
    Plotly.react("ex-bottleneck", [pts(cloud, "x", "#aaa"), pts(z, "W_up W_down x", "#d62728")],
      Object.assign({}, sq, { xaxis: axis(12, "y"), yaxis: Object.assign(axis(12, "x"), { scaleanchor: "x" }) }), CONFIG);
  }
  // ------------------------------------------------------------ polarizer
  const jones = (deg) => { const t = (deg * Math.PI) / 180, c = Math.cos(t), s = Math.sin(t); return [[c * c, c * s], [c * s, s * s]]; };
  function drawPolarizer() {
    const th = num("pz-theta"), W = jones(th);
    el("pz-theta-val").textContent = `${th}°`;
    el("pz-text").textContent = `W_θ =\n${mat(W)}`;
    const z = cloud.map(([x0, x1]) => [W[0][0] * x0 + W[0][1] * x1, W[1][0] * x0 + W[1][1] * x1]);
    const t = (th * Math.PI) / 180;
    Plotly.react("ex-polarizer", [pts(cloud, "light in", "#aaa"), pts(z, "through W_θ", "#d62728"), line(Math.cos(t), Math.sin(t), 6, "axis", "#333")],
      Object.assign({}, sq, { xaxis: axis(6, "y"), yaxis: Object.assign(axis(4, "x"), { scaleanchor: "x" }) }), CONFIG);
    const phi = num("tp-phi");
    el("tp-phi-val").textContent = `${phi}°`;
    const two = mm(jones(90), jones(0)), three = mm(jones(90), mm(jones(phi), jones(0)));
    const amp = Math.hypot(three[0][0], three[1][0]);
    el("tp-text").textContent = `W_90 W_0 =\n${mat(two)}\nW_90 W_${phi} W_0 =\n${mat(three)}\nlight polarised along 0° in: amplitude out ${f3(amp)}, intensity ${f3(amp * amp)} (= cos²φ sin²φ)`;
  }
  // ------------------------------------------------------------ hidden-basis symmetry
  function drawHidden() {
    const a = num("hb-a") || 1e-9;
    el("hb-a-val").textContent = a.toFixed(2);
    const Wu = [[-1.5], [3.2]], Wd = [[2, -1]];
    const Wua = Wu.map((r) => [r[0] * a]), Wda = [Wd[0].map((x) => x / a)];
    el("hb-text").textContent = `W_up A = ${mat(T(Wua))}ᵀ    A⁻¹ W_down = ${mat(Wda)}\nproduct (W_up A)(A⁻¹ W_down) =\n${mat(mm(Wua, Wda))}\nW_up W_down =\n${mat(mm(Wu, Wd))}`;
  }
  // ------------------------------------------------------------ two heads, one channel
  function channel() {
    const wa = num("ch-wa"), wl = num("ch-wl"), ra = num("ch-ra"), rl = num("ch-rl");
    for (const id of ["ch-wa", "ch-wl", "ch-ra", "ch-rl"]) el(id + "-val").textContent = el(id).value + (id.endsWith("a") ? "°" : "");
    const u = [Math.cos((wa * Math.PI) / 180) * wl, Math.sin((wa * Math.PI) / 180) * wl];
    const w = [Math.cos((ra * Math.PI) / 180) * rl, Math.sin((ra * Math.PI) / 180) * rl];
    const m = measures([[u[0]], [u[1]]], [EX.read_1], [[EX.write_2[0]], [EX.write_2[1]]], [w]);
    el("ch-measures").innerHTML = "<tr><th>measure</th><th>value</th></tr>" + Object.entries(m).map(([k, v]) =>
      `<tr><td>${k}</td><td id="ch-m-${k}">${v === null ? "—" : v.toFixed(10)}</td></tr>`).join("");
    const cosang = (u[0] * w[0] + u[1] * w[1]) / (wl * rl);
    el("ch-note").textContent = `cos(angle between u1 and w2) = ${cosang.toFixed(4)}. frobenius_baselined subtracts ${EX.rank1_baseline_d2.toFixed(4)}, ` +
      `compscope's seeded Monte-Carlo estimate of E[frobenius] for two rank-1 maps in 2-D (exactly 2/π = 0.6366).`;
    const arrow = (v, name, color) => ({ type: "scatter", mode: "lines+markers", x: [0, v[0]], y: [0, v[1]], name, line: { color, width: 3 }, marker: { size: [0, 10], color } });
    const proj = cosang * wl;
    const wn = [w[0] / rl, w[1] / rl];
    Plotly.react("ex-channel", [arrow(u, "u1: head 1 writes", "#d62728"), arrow(w, "w2: head 2 reads", "#1f77b4"),
      { type: "scatter", mode: "lines", x: [u[0], proj * wn[0]], y: [u[1], proj * wn[1]], name: "projection", line: { dash: "dot", color: "#555" } }],
      Object.assign({}, sq, { width: 460, height: 420, dragmode: false, legend: { orientation: "h", y: -0.12 }, xaxis: axis(3.2, "y"), yaxis: Object.assign(axis(3.2, "x"), { scaleanchor: "x" }) }), CONFIG);
  }
  function channelPointer() {
    const gd = el("ex-channel");
    let down = false;
    const move = (e) => {
      const fl = gd._fullLayout; if (!fl) return;
      const bb = gd.getBoundingClientRect();
      const x = fl.xaxis.p2d(e.clientX - bb.left - fl.xaxis._offset), y = fl.yaxis.p2d(e.clientY - bb.top - fl.yaxis._offset);
      const which = el("ch-which").value;
      el(`ch-${which}a`).value = Math.round(((Math.atan2(y, x) * 180) / Math.PI + 360) % 360);
      el(`ch-${which}l`).value = Math.min(3, Math.max(0.1, Math.hypot(x, y))).toFixed(1);
      channel();
    };
    gd.addEventListener("mousedown", (e) => { down = true; move(e); }, true);  // capture: before plotly's drag layer
    gd.addEventListener("mousemove", (e) => { if (down) move(e); }, true);
    window.addEventListener("mouseup", () => { down = false; });
  }

  const on = (ids, f) => ids.forEach((id) => el(id).addEventListener("input", f));
  on(["pd-a", "pd-b"], drawDown); el("pd-orient").addEventListener("click", () => { oriented = !oriented; drawDown(); });
  on(["pu-a", "pu-b"], drawUp); on(["bn-d0", "bn-d1", "bn-u0", "bn-u1"], drawBottleneck);
  on(["pz-theta", "tp-phi"], drawPolarizer); on(["hb-a"], drawHidden); on(["ch-wa", "ch-wl", "ch-ra", "ch-rl"], channel);
  drawDown(); drawUp(); drawBottleneck(); drawPolarizer(); drawHidden(); channel(); channelPointer();
})();
