"""Composition over training: scores for every checkpoint of an ordered list, one table.

``track(source)`` takes a run folder written by ``compscope train`` (its ``checkpoints/``), a
folder of checkpoint folders, or an explicit list of model paths (any format ``load`` reads,
e.g. Pythia-style revisions saved locally). Steps come from a toy checkpoint's manifest, else
from the last number in the folder or file name (``step_1000``, ``step143000``), else the
position in the list. In a folder, entries that are not models (a README, a log, a folder of
figures) are passed over and named (``Track.skipped``). Toy checkpoints also get activation labels (induction and
previous-token scores, ``head_labels``) computed on held-out repeated sequences, from which
the induction-formation step is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from ..engine.composition import scores
from ..core.metrics import ON_DATA, check_data_used, distinct_metrics, get_metric, on_data, ridge_for, shared_ridge
from ..errors import OptionError, check_keywords
from ..defaults import TRACKED_METRICS
from ..measures import TRACKED
from ..data.head_labels import HeadLabels, label_heads
from ..progress import progress_bar
from ..results.table import ScoreTable, Tabular


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path


#: the files in a checkpoint folder that make it a model (any one), and the files that are models
MODEL_MARKERS = ("toy.json", "compscope.json", "config.json")
MODEL_SUFFIXES = (".gguf", ".safetensors")


def looks_like_model(path: Path) -> bool:
    """Whether ``path`` can be a checkpoint: a folder holding a model's ``toy.json``,
    ``compscope.json``, ``config.json`` or ``*.safetensors``, or a ``.gguf`` / ``.safetensors``
    file (or a file that starts with GGUF's magic)."""
    if path.is_dir():
        return any((path / f).is_file() for f in MODEL_MARKERS) or any(path.glob("*.safetensors"))
    if path.suffix in MODEL_SUFFIXES:
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"GGUF"
    except OSError:
        return False


def list_checkpoints(source: str | Path | Sequence[str | Path]) -> list[Checkpoint]:
    """Checkpoints of ``source`` in step order (see the module docstring)."""
    return scan_checkpoints(source)[0]


def scan_checkpoints(source: str | Path | Sequence[str | Path]) -> tuple[list[Checkpoint], list[Path]]:
    """Checkpoints of ``source`` in step order, and the entries of a folder ``source`` passed over
    because they are not models (:func:`looks_like_model`: a README, a log, a folder of figures).
    Paths listed outright are all kept: one that is not a model fails when it is loaded."""
    from ..toy.storage import is_toy, read_manifest

    if not isinstance(source, (str, Path, list, tuple)):
        raise OptionError(f"source: expected a run folder, a folder of checkpoints, or a list of checkpoint paths, got "
                          f"{type(source).__name__}")
    skipped: list[Path] = []
    if isinstance(source, (str, Path)):
        folder = Path(source)
        if not folder.is_dir():
            raise OptionError(f"{folder}: not a folder of checkpoints")
        if (folder / "checkpoints").is_dir():
            folder = folder / "checkpoints"
        elif any((folder / f).is_file() for f in MODEL_MARKERS):
            raise OptionError(f"{folder}: is one model, not a folder of checkpoints (pass the run folder or several paths)")
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
        paths, skipped = [], []
        for p in entries:
            (paths if looks_like_model(p) else skipped).append(p)
        if not paths:
            what = f" (none of its {len(entries)} entries is a model folder or a .gguf/.safetensors file)" if entries else ""
            raise OptionError(f"{folder}: holds no checkpoints{what}")
    else:
        paths = [Path(p) for p in source]
        if not paths:
            raise OptionError("track needs at least one checkpoint")
    out = []
    for i, p in enumerate(paths):
        if not p.exists():
            raise OptionError(f"{p}: no such checkpoint")
        step = None
        if is_toy(p):
            step = read_manifest(p).get("step")
        if step is None:
            nums = re.findall(r"\d+", p.stem if p.is_file() else p.name)
            step = int(nums[-1]) if nums else i
        out.append(Checkpoint(int(step), p))
    steps = [c.step for c in out]
    if len(set(steps)) != len(steps):
        repeated = sorted({s for s in steps if steps.count(s) > 1})
        clash = [c.path.name for c in out if c.step == repeated[0]]
        raise OptionError(f"checkpoints of {source} have repeated steps {repeated[:5]}: "
                          f"{', '.join(clash[:3])}{' ...' if len(clash) > 3 else ''} all read as step {repeated[0]} "
                          f"(a step is the toy manifest's, else the last number in the name)")
    return sorted(out, key=lambda c: c.step), skipped


@dataclass
class Track(Tabular):
    """Score tables and (toy checkpoints only) activation labels per checkpoint, in step order."""

    checkpoints: list[Checkpoint]
    tables: list[list[ScoreTable]]  # per checkpoint, one table per metric
    labels: list[HeadLabels | None]
    #: per checkpoint, the SHA-256 (16 hex digits) of the weights scored (:func:`weights_hash`)
    hashes: list[str] | None = None
    #: entries of the checkpoint folder passed over as not models (:func:`scan_checkpoints`)
    skipped: list[Path] = field(default_factory=list)

    @property
    def steps(self) -> list[int]:
        return [c.step for c in self.checkpoints]

    def check_pairs(self, pairs) -> None:
        """An error naming the first of ``pairs`` (``(src_layer, src_head, dst_layer, dst_head)``)
        that is not an earlier → later head pair of the tracked model."""
        tab = self.tables[-1][0]
        check_pairs(pairs, *tab.dense(tab.measures[0], tab.kinds[0]).shape[:2])

    def series(self, measure: str, kind: str, pair: tuple[int, int, int, int], metric: str | None = None) -> list[float]:
        """The score of ``pair = (src_layer, src_head, dst_layer, dst_head)`` at every step."""
        out = []
        for tabs in self.tables:
            tab = next((t for t in tabs if metric is None or t.metric == metric), None)
            if tab is None:
                raise OptionError(f"metric {metric!r} was not tracked; have {[t.metric for t in tabs]}")
            out.append(float(tab.dense(measure, kind)[pair]))
        return out

    def to_pandas(self):
        """One row per (checkpoint, metric, measure, kind, pair): score-table columns plus
        ``step``, ``checkpoint``, ``weights_hash`` (the checkpoint's :func:`weights_hash`), ``ridge`` (the
        metric's ``G`` regularised as ``G + ridge·tr(G)/d·I``; 0 without a ``G``) and, when a metric has a
        ``G`` from data or of one's own, ``metric_data`` (what that checkpoint's ``G`` was estimated on, or
        how it was given; None for a metric from the weights)."""
        import pandas as pd

        said = any(t.info.get("metric_data") for tabs in self.tables for t in tabs)
        frames = []
        for i, (c, tabs) in enumerate(zip(self.checkpoints, self.tables)):
            for t in tabs:
                df = t.to_pandas()
                df.insert(0, "step", c.step)
                df["checkpoint"] = c.path.name
                if self.hashes is not None:
                    df["weights_hash"] = self.hashes[i]
                df["ridge"] = float(t.info.get("ridge", 0.0))
                if said:
                    df["metric_data"] = t.info.get("metric_data")
                frames.append(df)
        return pd.concat(frames, ignore_index=True)

    def labels_frame(self):
        """Per-head activation labels per step (toy checkpoints): ``step, layer, head,
        induction, previous, loss_first, loss_second``."""
        import pandas as pd

        rows = []
        for c, lab in zip(self.checkpoints, self.labels):
            if lab is None:
                continue
            L, H = lab.induction.shape
            for l in range(L):
                for h in range(H):
                    rows.append((c.step, l, h, float(lab.induction[l, h]), float(lab.previous[l, h]), lab.loss_first, lab.loss_second))
        return pd.DataFrame(rows, columns=["step", "layer", "head", "induction", "previous", "loss_first", "loss_second"])

    # ------------------------------------------------------------------ circuit reading
    def roles(self, threshold: float = 0.5) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Previous-token heads and induction heads of the *last* checkpoint: heads whose score
        there is ``>= threshold`` (at least the best one of each kind; induction heads after layer 0)."""
        lab = self.labels[-1]
        if lab is None:
            raise OptionError("the last checkpoint has no activation labels (not a toy model): name the pairs yourself")
        return _pick(lab.previous, threshold, min_layer=0), _pick(lab.induction, threshold, min_layer=1)

    def formation_step(self, threshold: float = 0.5) -> int | None:
        """First step at which the eventual induction heads' best induction score reaches half
        its final value (``None`` without labels, or when no head ends at ``threshold``)."""
        if any(lab is None for lab in self.labels):
            return None
        _, ind = self.roles(threshold)
        curve = [max(float(lab.induction[l, h]) for l, h in ind) for lab in self.labels]
        if curve[-1] < threshold:
            return None
        half = curve[-1] / 2
        return next(s for s, v in zip(self.steps, curve) if v >= half)


def _pick(score: torch.Tensor, threshold: float, min_layer: int) -> list[tuple[int, int]]:
    s = score.clone()
    s[:min_layer] = -1.0
    heads = [tuple(ix) for ix in torch.nonzero(s >= threshold).tolist()]
    if not heads:
        heads = [tuple(torch.unravel_index(s.argmax(), s.shape))]
        heads = [(int(heads[0][0]), int(heads[0][1]))]
    return [(int(l), int(h)) for l, h in heads]


def check_pairs(pairs, L: int, H: int) -> None:
    """An error naming the first of ``pairs`` (``(src_layer, src_head, dst_layer, dst_head)``)
    that is not an earlier → later head pair of a model of ``L`` layers × ``H`` heads."""
    for l1, h1, l2, h2 in pairs:
        if not (0 <= l1 < l2 < L and 0 <= h1 < H and 0 <= h2 < H):
            raise OptionError(f"pair {l1}.{h1}-{l2}.{h2}: not a pair of this model (layers 0..{L - 1}, heads "
                              f"0..{H - 1}; the writer's layer before the reader's)")


def track(
    source: str | Path | Sequence[str | Path],
    kinds: str = "K",
    measures: Sequence[str] | str = TRACKED,
    metrics: Sequence[str] | str = TRACKED_METRICS,
    *,
    labels: bool = True,
    label_sequences: int = 64,
    label_seed: int = 10_000,
    progress: bool = True,
    check: Sequence[tuple[int, int, int, int]] = (),
    metric_data=None,
    tokenizer=None,
    tokenizer_said: str | None = None,
    **score_options,
) -> Track:
    """Composition of every checkpoint of ``source`` (``compscope.scores`` per checkpoint and
    metric; ``score_options`` go to it, ``ridge`` to each metric with a ``G``: refused where every metric is
    the identity), plus activation labels for toy checkpoints.
    ``check``: head pairs the caller will read, checked against the first checkpoint before
    any scoring (:func:`check_pairs`). ``metric_data``: what a metric estimated on data is
    estimated on at each checkpoint (:class:`~compscope.data.residual_moments.MetricData`);
    ``tokenizer``: the tokenizer its natural text is read with, for checkpoints saved without one
    (:func:`~compscope.data.runner.runner_for`'s, with ``tokenizer_said``; refused where no metric
    is estimated on data)."""
    from ..data.runner import runner_for
    from ..loading.sources import load
    from ..toy.data import repeated_random
    from ..toy.storage import heads_of, is_toy, load_toy

    check_keywords(score_options, track, scores, "track")  # before any checkpoint is read
    ckpts, skipped = scan_checkpoints(source)
    metrics = distinct_metrics(metrics)
    check_data_used(metric_data, metrics)
    ridge = shared_ridge(metrics, score_options.pop("ridge", None))  # for each metric with a G
    if tokenizer is not None and not on_data(metrics):
        raise OptionError(f"tokenizer: for the metrics estimated on data ({', '.join(ON_DATA)}), and none is tracked")
    tables, labs, hashes = [], [], []
    bar = progress_bar(len(ckpts), "tracking", enabled=progress)
    for c in ckpts:
        model = lab = None
        if is_toy(c.path):  # read once: the weights for the scores, the model for the labels
            model, manifest = load_toy(c.path)
            hw = heads_of(model, manifest, c.path)
        else:
            hw = load(c.path)
        if c is ckpts[0]:
            check_pairs(check, hw.n_layers, hw.n_heads)
        hashes.append(weights_hash(hw))
        device = score_options.get("device")
        running = c.path if tokenizer is None else runner_for(c.path, hw, progress=False, device=device, tokenizer=tokenizer,
                                                               tokenizer_said=tokenizer_said)  # one per checkpoint
        mets = [get_metric(m, hw, ridge_for(m, ridge), model=running, device=None if tokenizer else device,
                           data=metric_data) for m in metrics]
        tables.append([scores(hw, kinds, measures, met, progress=False, **score_options) for met in mets])
        if labels and model is not None:
            half = min(24, model.cfg.n_ctx // 2)
            lab = label_heads(model, repeated_random(label_sequences, half, model.cfg.d_vocab, label_seed))
        labs.append(lab)
        bar.update(1)
    bar.close()
    return Track(ckpts, tables, labs, hashes, skipped)


def weights_hash(hw) -> str:
    """SHA-256 (first 16 hex digits) of a model's attention weights and embeddings as stored
    (``W_Q, W_K, W_V, W_O, W_E``: names, shapes, dtypes and bytes): which weights a result read."""
    import hashlib

    h = hashlib.sha256()
    for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
        t = getattr(hw, name).detach().contiguous().cpu()
        h.update(name.encode() + str(tuple(t.shape)).encode() + str(t.dtype).encode())
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:16]
