"""``ScoreTable``: composition scores as a tidy table with a dense view.

Long form: one row per ``(measure, metric, kind, src_layer, src_head, dst_layer, dst_head)``
with its ``value``; the model's name, the processing applied and the rotary offset travel as
table metadata (and as constant columns in exports). Dense view: ``[src_layer, src_head,
dst_layer, dst_head]`` with NaN where a pair was not computed (same-layer, backward, or
outside the top-k of an X-route measure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from ..errors import LoadError, OptionError

#: entries closer than this times the largest ``|entry|`` count as equal when ranked (ordered by
#: index): heads that share a K/V head score the same to float32 rounding, which would otherwise
#: order them by that rounding, differently from one machine to the next
TIE = 1e-6


def top_entries(t: Tensor, n: int) -> list[tuple[tuple[int, ...], float]]:
    """The ``n`` largest finite entries of ``t`` (NaN entries are never chosen), as
    ``(index tuple, value)``, largest first; fewer when fewer are finite. Entries within
    ``TIE · max|t|`` of the first of a run of equal ones are ties, taken in index order."""
    import numbers

    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise OptionError(f"n={n!r}: expected how many entries, an integer >= 0")
    finite = torch.isfinite(t)
    n = min(int(n), int(finite.sum()))
    if n <= 0:
        return []
    flat = torch.where(finite, t, torch.full_like(t, -float("inf"))).flatten()
    tol = TIE * float(t[finite].abs().max())
    last = float(flat.topk(n).values[-1])
    cand = (flat >= last - tol).nonzero().squeeze(1)  # the top n and whatever ties with the n-th
    vals, order = flat[cand].sort(descending=True, stable=True)
    cand, vals = cand[order].tolist(), vals.tolist()
    ranked, i = [], 0
    while len(ranked) < n:  # runs of ties, each in index order
        j = i + 1
        while j < len(vals) and vals[i] - vals[j] <= tol:
            j += 1
        ranked += sorted(zip(cand[i:j], vals[i:j]))
        i = j
    ranked = ranked[:n]
    coords = torch.stack(torch.unravel_index(torch.tensor([k for k, _ in ranked]), t.shape), -1).tolist()
    return [(tuple(c), float(v)) for c, (_, v) in zip(coords, ranked)]


COLUMNS = ["measure", "metric", "kind", "src_layer", "src_head", "dst_layer", "dst_head", "value"]


def metric_origin(info: dict) -> str:
    """Where a table's metric came from, in words to follow its name: ``estimated on <data>`` for
    one estimated on data, ``with G given as <a matrix or file> (SHA-256 ...)`` for one of the
    caller's own; empty for one from the weights."""
    from ..core.metrics import GIVEN

    data = info.get("metric_data")
    if not data:
        return ""
    return f"with {data}" if str(data).startswith(GIVEN) else f"estimated on {data}"


def metric_info(metric) -> dict:
    """What a result records of its :class:`~compscope.core.metrics.Metric`: ``G``'s condition numbers
    (``{layer: (raw, regularised)}``, the layer ``"None"`` for every layer; empty without a ``G``), the
    ridge, and for a metric estimated on data or given, what its ``G`` came from (``metric_data``)."""
    info = {"condition": {str(k): v for k, v in metric.condition.items()}, "ridge": metric.ridge}
    if metric.data:
        info["metric_data"] = metric.data
    return info


class Tabular:
    """A result that is a table (its ``to_pandas``): ``save`` writes it."""

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_pandas` as ``.csv`` or ``.parquet`` (by the suffix of ``path``)."""
        return write_frame(self.to_pandas(), path)


@dataclass(frozen=True)
class ScoreTable(Tabular):
    values: dict[tuple[str, str], Tensor]  # (measure, kind) -> (L, H, L, H) float64
    metric: str
    model: str
    processing: tuple[str, ...] = ()
    offset: float = 0.0
    #: e.g. the metric's condition numbers; ``'refined'``: per kind, (pairs whose float32 Gram-route
    #: values were recomputed from ``X``, pairs computed), see ``engine.gram_route.refine_small``
    info: dict = field(default_factory=dict)

    @classmethod
    def from_dense(cls, values, hw, metric, offset: float = 0.0) -> ScoreTable:
        return cls(values, metric.name, hw.meta.name, hw.meta.processing, offset, metric_info(metric))

    @property
    def measures(self) -> list[str]:
        return list(dict.fromkeys(m for m, _ in self.values))

    @property
    def kinds(self) -> list[str]:
        return list(dict.fromkeys(k for _, k in self.values))

    def __repr__(self) -> str:
        t = next(iter(self.values.values()), None)
        shape = f"{t.shape[0]} layers x {t.shape[1]} heads; " if t is not None else ""
        m, k = next(((m, k) for m, k in self.values if k == "K"), next(iter(self.values), (None, None)))
        best = self.top(k, m, 1) if m is not None else []
        strongest = (f"; strongest {k} by {m}: {best[0][0]}.{best[0][1]}->{best[0][2]}.{best[0][3]} {best[0][4]:.3g}"
                     if best else "")
        return (f"ScoreTable({self.model!r}, metric {self.metric}, processing {','.join(self.processing) or 'none'}; "
                f"{shape}measures {', '.join(self.measures)}; kinds {''.join(self.kinds)}{strongest})")

    def dense(self, measure: str, kind: str) -> Tensor:
        """``[src_layer, src_head, dst_layer, dst_head]`` (NaN where not computed)."""
        if (measure, kind) not in self.values:
            swapped = f"; did you mean measure={kind!r}, kind={measure!r}?" if (kind, measure) in self.values else ""
            raise OptionError(f"no scores for measure={measure!r}, kind={kind!r}; have {sorted(self.values)}{swapped}")
        return self.values[(measure, kind)]

    def rows(self):
        """Yield tidy rows ``(measure, metric, kind, src_layer, src_head, dst_layer, dst_head, value)``."""
        for (m, k), t in self.values.items():
            idx = torch.nonzero(torch.isfinite(t))
            vals = t[torch.isfinite(t)]
            for (l1, h1, l2, h2), v in zip(idx.tolist(), vals.tolist()):
                yield (m, self.metric, k, l1, h1, l2, h2, v)

    def top(self, kind: str, measure: str = "frobenius", n: int = 10) -> list[tuple[int, int, int, int, float]]:
        """The ``n`` strongest pairs ``(src_layer, src_head, dst_layer, dst_head, value)`` of ``kind``
        by ``measure`` (the kind first, as ``top('K', 'tight')``)."""
        return [(*c, v) for c, v in top_entries(self.dense(measure, kind), n)]

    def to_pandas(self):
        """The tidy table (rows in the order of :meth:`rows`), built column by column."""
        import numpy as np
        import pandas as pd

        parts = []
        for (m, k), t in self.values.items():
            ok = torch.isfinite(t)
            parts.append((m, k, ok.nonzero().numpy(), t[ok].numpy()))
        counts = [len(p[3]) for p in parts]
        idx = np.concatenate([p[2] for p in parts]) if parts else np.zeros((0, 4), dtype=np.int64)
        df = pd.DataFrame({
            "measure": np.repeat(np.array([p[0] for p in parts], dtype=object), counts),
            "metric": self.metric,
            "kind": np.repeat(np.array([p[1] for p in parts], dtype=object), counts),
            **{c: idx[:, i] for i, c in enumerate(COLUMNS[3:7])},
            "value": np.concatenate([p[3] for p in parts]) if parts else np.zeros(0),
        }, columns=COLUMNS)
        df["model"] = self.model
        df["processing"] = ",".join(self.processing) or "none"  # never empty: an empty CSV field reads back as NaN
        df["offset"] = self.offset
        from .. import __version__

        df.attrs.update(model=self.model, processing=list(self.processing), offset=self.offset, metric=self.metric,
                        compscope=__version__)  # what computed it (Parquet keeps the attributes; CSV does not)
        if self.info.get("metric_data"):  # what a metric estimated on data was estimated on
            df.attrs["metric_data"] = self.info["metric_data"]
        if "ridge" in self.info:  # G + ridge·tr(G)/d·I, and G's condition numbers: {layer: [raw, regularised]}
            df.attrs["ridge"] = self.info["ridge"]
            df.attrs["condition"] = {k: list(v) for k, v in self.info.get("condition", {}).items()}
        if self.info.get("partial"):  # measures computed for the top pairs only: {measure: [pairs, of all]}
            df.attrs["partial"] = {m: list(v) for m, v in self.info["partial"].items()}
        if self.info.get("refined"):  # float32 values recomputed from X: {kind: [pairs, of all]}
            df.attrs["refined"] = {k: list(v) for k, v in self.info["refined"].items()}
        return df


def write_frame(df, path: str | Path) -> Path:
    """Write a pandas frame as ``.csv`` or ``.parquet``, chosen by the suffix of ``path``."""
    path = Path(path)
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        raise OptionError(f"{path}: use a .csv or .parquet file name")
    return path


def write_records(records, path: str | Path) -> Path:
    """Write dataclass instances (an axiom result, a gauge row), one row each with a column per field, as
    ``.csv`` or ``.parquet`` (:func:`write_frame`)."""
    import dataclasses

    import pandas as pd

    return write_frame(pd.DataFrame([dataclasses.asdict(r) for r in records]), path)


def read_scores(path: str | Path, shape: tuple[int, int] | None = None, metric: str | None = None) -> ScoreTable:
    """Read a table written by :meth:`ScoreTable.save` (``shape=(layers, heads)`` if not inferable).
    A file holding several metrics (a report's ``scores.parquet``) needs ``metric`` named."""
    import pandas as pd

    from ..errors import one_line

    path = Path(path)
    if path.suffix not in (".csv", ".parquet"):
        raise LoadError(f"{path}: not a score table (expected a .csv or .parquet file)")
    if not path.is_file():
        raise LoadError(f"{path}: no such file")
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except Exception as e:  # pandas and pyarrow raise many kinds of errors on a damaged file
        raise LoadError(f"{path}: cannot be read as a score table ({one_line(e)})") from e
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise LoadError(f"{path}: not a compscope score table (missing columns {missing})")
    held = [str(x) for x in dict.fromkeys(df["metric"])]
    if metric is not None:
        if metric not in held:
            raise LoadError(f"{path}: no rows of metric {metric!r}; it holds {', '.join(held) or 'none'}")
        df = df[df["metric"] == metric]
    elif len(held) > 1:
        raise LoadError(f"{path}: holds the metrics {', '.join(held)}; name one (read_scores(path, metric=...))")
    L, H = _table_shape(df, path, shape)
    values = {}
    for (m, k), g in df.groupby(["measure", "kind"], sort=False):
        t = torch.full((L, H, L, H), float("nan"), dtype=torch.float64)
        idx = [torch.as_tensor(g[c].to_numpy(copy=True)) for c in ("src_layer", "src_head", "dst_layer", "dst_head")]
        t[idx[0], idx[1], idx[2], idx[3]] = torch.as_tensor(g.value.to_numpy(copy=True), dtype=torch.float64)
        values[(m, k)] = t
    model = str(df["model"].iloc[0]) if "model" in df and len(df) else "unknown"
    proc = tuple(p for p in str(df["processing"].iloc[0]).split(",") if p and p not in ("nan", "none")) if "processing" in df and len(df) else ()
    offset = float(df["offset"].iloc[0]) if "offset" in df and len(df) else 0.0
    info = {"partial": {m: tuple(v) for m, v in df.attrs["partial"].items()}} if df.attrs.get("partial") else {}
    if df.attrs.get("metric_data"):
        info["metric_data"] = str(df.attrs["metric_data"])
    if "ridge" in df.attrs:
        info["ridge"] = float(df.attrs["ridge"])
        info["condition"] = {str(k): tuple(float(x) for x in v) for k, v in df.attrs.get("condition", {}).items()}
    if df.attrs.get("refined"):
        info["refined"] = {k: tuple(int(x) for x in v) for k, v in df.attrs["refined"].items()}
    return ScoreTable(values, str(df["metric"].iloc[0]) if len(df) else "identity", model, proc, offset, info)


#: Most heads (layers × heads) a score table may declare: its dense view holds ``(L H)²`` float64
#: per measure and kind (2 GiB at this bound; a 405B-class model has about 16 000 heads)
MAX_HEADS_TOTAL = 1 << 14


def _table_shape(df, path: Path, shape: tuple[int, int] | None) -> tuple[int, int]:
    """``(layers, heads)`` of a score table, after checking its index columns: whole numbers, not
    negative (``-1`` must not wrap to the last layer), writers before readers, within ``shape``
    when given, and small enough that the dense view cannot ask for more than a few GiB."""
    import numpy as np

    cols = ("src_layer", "src_head", "dst_layer", "dst_head")
    idx = {}
    for c in cols:
        v = df[c].to_numpy()
        if len(v) and not (np.issubdtype(v.dtype, np.integer) or (np.issubdtype(v.dtype, np.floating) and np.all(np.isfinite(v)) and np.all(v == np.round(v)))):
            raise LoadError(f"{path}: column '{c}' holds values that are not whole numbers")
        idx[c] = v.astype(np.int64) if len(v) else v
        if len(v) and idx[c].min() < 0:
            raise LoadError(f"{path}: column '{c}' has the negative value {int(idx[c].min())}")
    if len(df) and (idx["src_layer"] >= idx["dst_layer"]).any():
        raise LoadError(f"{path}: a row has src_layer >= dst_layer (only earlier writers and later readers are scored)")
    top = lambda a, b: int(max(a.max(), b.max())) + 1 if len(df) else 1  # noqa: E731
    need = (top(idx["src_layer"], idx["dst_layer"]), top(idx["src_head"], idx["dst_head"]))
    if shape is None:
        shape = need
    elif need[0] > shape[0] or need[1] > shape[1]:
        raise LoadError(f"{path}: rows name layer {need[0] - 1} or head {need[1] - 1}, beyond the shape {tuple(shape)}")
    if not (shape[0] > 0 and shape[1] > 0 and shape[0] * shape[1] <= MAX_HEADS_TOTAL):
        raise LoadError(f"{path}: rows name {shape[0]} layers × {shape[1]} heads, more than a score table holds "
                        f"({MAX_HEADS_TOTAL} heads in all)")
    v = df["value"].to_numpy()
    if len(v) and (not np.issubdtype(v.dtype, np.number) or np.isinf(v.astype(np.float64)).any()):
        raise LoadError(f"{path}: column 'value' holds infinite or non-numeric values")
    bad_kinds = sorted(set(map(str, df["kind"])) - {"Q", "K", "V"})
    if bad_kinds:
        raise LoadError(f"{path}: column 'kind' holds {bad_kinds}; kinds are Q, K, V")
    return int(shape[0]), int(shape[1])


__all__ = ["COLUMNS", "ScoreTable", "read_scores", "write_frame"]
