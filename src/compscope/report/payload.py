"""A collected report as one JSON document the page reads: small arrays as lists, the pair
tables packed.

Pair values of a (metric, kind, measure) table are stored for every writer → later-reader pair,
layer pair by layer pair (``l1 < l2`` in order, then ``h1``, then ``h2``), as little-endian
float32, base64. When a model has so many heads that every table would not fit ``budget`` bytes,
tables are stored as uint16 codes of their own range (``lo + q (hi - lo) / 65534``, 65535 for
a missing value; error at most ``(hi - lo) / 131068``), and past that only the first tables (in
metric, kind, measure order) keep their pairs; every table keeps its layer × layer summary
(largest and mean value of each block).
"""

from __future__ import annotations

import base64
import math

import numpy as np
import torch

#: bytes of pair data a page holds at most (before base64), so a report stays under ~20 MB
PAIR_BUDGET = 9_000_000
#: edges per kind in the circuit graph, at most
GRAPH_EDGES = 40


def pair_order(L: int, H: int) -> np.ndarray:
    """Flat indices into a dense ``(L, H, L, H)`` table, in the stored order."""
    idx = np.arange(L * H * L * H).reshape(L, H, L, H)
    return np.concatenate([idx[l1, :, l2, :].ravel() for l1 in range(L) for l2 in range(l1 + 1, L)])


def _block_stats(dense: np.ndarray) -> tuple[list, list]:
    L = dense.shape[0]
    mx = [[None] * L for _ in range(L)]
    mean = [[None] * L for _ in range(L)]
    for l1 in range(L):
        for l2 in range(l1 + 1, L):
            b = dense[l1, :, l2, :]
            b = b[np.isfinite(b)]
            if b.size:
                mx[l2][l1], mean[l2][l1] = float(b.max()), float(b.mean())
    return mx, mean


def _pack(values: np.ndarray, enc: str) -> dict:
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    if enc == "f4":
        raw = values.astype("<f4").tobytes()
    else:
        span = hi - lo if hi > lo else 1.0
        q = np.where(np.isfinite(values), np.rint((np.nan_to_num(values, nan=lo) - lo) / span * 65534), 65535)
        raw = q.astype("<u2").tobytes()
    return {"enc": enc, "lo": lo, "hi": hi, "b64": base64.b64encode(raw).decode("ascii")}


def pack_tables(tables: dict, kinds: str, measures: list[str], budget: int = PAIR_BUDGET) -> tuple[dict, str]:
    """``{"metric|kind|measure": {enc, lo, hi, b64, max, mean}}`` and a sentence saying how
    the pairs were stored."""
    combos = [(met, k, m) for met, t in tables.items() for k in kinds for m in measures if (m, k) in t.values]
    if not combos:
        return {}, "no tables"
    first = tables[combos[0][0]].values[combos[0][2], combos[0][1]]
    L, H = first.shape[:2]
    order = pair_order(L, H)
    n = len(order)
    enc = "f4" if 4 * n * len(combos) <= budget else "u2"
    keep = len(combos) if enc == "f4" else min(len(combos), budget // (2 * n))
    out = {}
    for i, (met, k, m) in enumerate(combos):
        dense = tables[met].values[m, k].double().numpy()
        mx, mean = _block_stats(dense)
        entry = _pack(dense.ravel()[order], enc) if i < keep else {"enc": None}
        entry.update(max=mx, mean=mean)
        out[f"{met}|{k}|{m}"] = entry
    how = ("every pair, float32" if enc == "f4" else
           "every pair as 16-bit codes of each table's range (error <= range / 131068)" if keep == len(combos) else
           f"pairs of the first {keep} of {len(combos)} tables as 16-bit codes; the rest as layer x layer summaries only "
           f"(report fewer measures or metrics for every pair)")
    return out, how


def colour_centres(tables: dict, d: int, r: int) -> dict[str, float | None]:
    """The random-subspace baseline each measure's colours are centred on: ``frobenius``: the
    median over pairs of its Haar expectation (``frobenius - frobenius_baselined``) when both are
    computed, else ``d^-1/2`` (``E[frobenius²] = 1/d``); ``frobenius_baselined``: 0; ``overlap``:
    ``r/d`` and ``shared_dims``: ``r²/d`` (``E‖X‖_F² = r_A r_B / d`` at full head rank); others: none."""
    t = next(iter(tables.values()))
    out: dict[str, float | None] = {m: None for m in t.measures}
    if "frobenius" in t.measures:
        out["frobenius"] = d ** -0.5
        if "frobenius_baselined" in t.measures:
            e = torch.cat([(t.values["frobenius", k] - t.values["frobenius_baselined", k]).flatten() for k in t.kinds])
            e = e[torch.isfinite(e)]
            if e.numel():
                out["frobenius"] = float(e.median())
    if "frobenius_baselined" in t.measures:
        out["frobenius_baselined"] = 0.0
    if "overlap" in t.measures:
        out["overlap"] = r / d
    if "shared_dims" in t.measures:
        out["shared_dims"] = r * r / d
    return out


def graph_edges(table, kinds: str, measure: str, centre: float | None, n: int = GRAPH_EDGES) -> dict[str, list]:
    """Per kind, the ``n`` strongest pairs by ``measure`` above ``centre`` (its baseline; 0 for
    ``frobenius_baselined``): ``[l1, h1, l2, h2, value]`` rows."""
    from ..results.table import top_entries

    out = {}
    for k in kinds:
        dense = table.dense(measure, k)
        rows = [[*p, v] for p, v in top_entries(dense, n) if centre is None or v > centre]
        out[k] = rows
    return out


def _lists(t: torch.Tensor | None):
    if t is None:
        return None
    return [[None if not math.isfinite(float(x)) else round(float(x), 6) for x in row] for row in t]


def verdict_json(rows: list[dict] | None) -> list[dict] | None:
    """The verdict's rows in the order of its printed table (best measure x metric first, the kinds
    of one together): the page shows them in this order and sorts nothing itself."""
    from ..data.verdict import ranked

    return None if rows is None else [r for _, ks in ranked(rows) for r in ks.values()]


def labels_json(lab) -> dict | None:
    if lab is None:
        return None
    return {"source": lab.source, "rule": lab.rule, "scores": {k: _lists(v) for k, v in lab.scores.items()},
            "errors": {k: _lists(v) for k, v in lab.errors.items()},
            "roles": {k: [list(x) for x in v] for k, v in lab.roles.items()},
            "text": None if lab.text is None else {"data": lab.text.data, "scores": {k: _lists(v) for k, v in lab.text.scores.items()},
                                                   "errors": {k: _lists(v) for k, v in lab.text.errors.items()}}}


def details_json(details: dict) -> dict:
    r = lambda xs, deg=False: [round(float(x) * (180 / math.pi if deg else 1), 6) for x in xs]  # noqa: E731
    return {f"{met}|{k}|{l1}.{h1}|{l2}.{h2}": {
        "writer_sv": r(p.writer_singular_values), "reader_sv": r(p.reader_singular_values),
        "angles_deg": r(p.principal_angles, deg=True), "composed_sv": r(p.composed_singular_values),
        "measures": {m: round(v, 6) for m, v in p.measures.items()}}
        for (met, k, l1, h1, l2, h2), p in details.items()}


def axioms_json(results) -> dict:
    axioms = list(dict.fromkeys(r.axiom for r in results))
    rows = {}
    for r in results:
        mark = ({"satisfies": "yes" if r.holds else "VIOLATED", "fails": "(yes)" if r.holds else "no"}
                .get(r.declared, "yes?" if r.holds else "no?"))
        rows.setdefault(r.measure, []).append({"mark": mark, "reason": r.reason or "", "where": r.detail or ""})
    return {"axioms": axioms, "rows": [{"measure": m, "cells": c} for m, c in rows.items()]}


def track_json(tr, kinds: str) -> dict | None:
    """Per (kind, measure, metric), every pair's series; previous-token → induction pairs of the
    last checkpoint highlighted (toy runs)."""
    if tr is None:
        return None
    from ..errors import OptionError

    try:
        prev, ind = tr.roles()
        hl = {(l1, h1, l2, h2) for l1, h1 in prev for l2, h2 in ind if l1 < l2}
        formed = tr.formation_step()
    except OptionError:
        hl, formed = set(), None
    last = tr.tables[-1]
    L, H = last[0].dense(last[0].measures[0], last[0].kinds[0]).shape[:2]
    pairs = [(l1, h1, l2, h2) for l1 in range(L) for h1 in range(H) for l2 in range(l1 + 1, L) for h2 in range(H)]
    panels = []
    for t in last:
        for k in t.kinds:
            if k not in kinds:
                continue
            for m in t.measures:
                series = [{"pair": f"{a}.{b}->{c}.{e}", "highlight": (a, b, c, e) in hl,
                           "values": [round(v, 6) for v in tr.series(m, k, (a, b, c, e), t.metric)]}
                          for a, b, c, e in pairs]
                panels.append({"kind": k, "measure": m, "metric": t.metric, "series": series})
    return {"steps": tr.steps, "formation": formed, "panels": panels}
