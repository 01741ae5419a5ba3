"""Interventional composition on data (spec, "Ground truth from data"), for every model compscope
can run (:mod:`compscope.data.runner`: its toy models, ``transformers`` and TransformerLens models).

For a pair ``(h1 → h2, kind)``, ``h1`` in an earlier layer than ``h2``: on a batch of token
sequences, ``h1``'s output is removed from the residual that ``h2`` reads through ``kind``
only, by mean-ablation (replaced by its mean over all the sequences at each position, the default) or
zero-ablation. Every other head, and ``h2``'s other inputs, read the clean residual: the direct
path ``h1 → h2`` alone is cut. The effect:

- Q or K: the mean total-variation distance ``½ Σ_j |p_ij − p'_ij|`` between ``h2``'s clean and
  patched attention patterns, over sequences and query positions ``i`` (in ``[0, 1]``);
- V: the mean relative change of the norm of ``h2``'s output, ``|‖o'‖ − ‖o‖| / ‖o‖``, over
  sequences and positions (positions where ``‖o‖ = 0`` are left out); beside it the
  direction-sensitive ``‖o' − o‖ / ‖o‖`` (:attr:`Effects.v_direction`), which also sees a turn
  at equal norm.

"Removed" means: the layer of ``h1`` recomputed with ``h1``'s output replaced (its mean, or 0),
and the difference ``δ`` of what the layer adds to the residual; ``h2`` then reads
``resid + δ`` through ``kind``. Without an attention-output norm ``δ`` is just ``mean(o) − o``
of ``h1``; with one (Gemma 3) the norm of the changed sum is taken, so ``δ`` is exact for the
layer.

Post-LN models (BERT) renormalise the residual itself after every sublayer,
``m_l = LN1_l(r_l + a_l)``, ``r_{l+1} = LN2_l(m_l + f_l)`` (``a_l``: attention output, ``f_l``:
MLP output), so a head's write reaches a later layer only through those norms. The direct path
there: ``δ`` enters ``h1``'s sum, ``LN1(r + a + δ)``, and passes through every norm between the
layers, with every sublayer's output (``a_l``, ``f_l``, the MLP of ``h1``'s own layer included)
held at its clean value; ``h2`` reads the residual so obtained through ``kind``. The norms are
the running model's own modules (``Runner.post_norms``). With no norm between the layers this is
exactly the pre-LN definition.

Every path (``paths='all'``, not the specification's measure but beside it): the model runs again
with ``δ`` added to what layer ``l1``'s attention writes, so that every later layer — heads,
MLPs, norms — sees the change, and ``h2`` reads the residual of that run through ``kind``
(its other inputs clean). That is the total effect of ``h1`` on ``h2``'s ``kind`` input: the
direct path plus every path through the heads and MLPs in between. One forward pass per
(writer, batch) on top of the direct path's work (on a GPU one per group of writers, their
sequences stacked), from ``l1`` on: the layers before it compute what they did on the clean
run, which gives their values (``Runner.trace``'s ``clean``; the toy model runs them).

Two implementations, one definition:

- :func:`intervention_effects` on a runner: one clean forward (:meth:`Runner.trace`), then per
  writer ``h1`` its ``δ`` once, and for every later layer and kind only the changed side — the
  queries, keys or values of all that layer's heads at once — recomputed from ``HeadWeights``
  (:mod:`compscope.core.attention`), nothing propagated: about one layer's attention per
  (writer, later layer, kind), never a whole forward pass, in memory of a few layers' states.
  The V effects read each head's output in ``d_head`` coordinates, ``R z`` with ``W_O = U R``
  (``U``'s columns orthonormal), whose norms and differences are those of ``W_O z``
  (:func:`output_frames`). Where the direct path is ``r + W_O u`` read through a pre-norm (no
  attention-output norm, not post-LN) on the CPU, the changed queries, keys and values are
  computed in the writer's ``d_head`` coordinates too, from the clean ones
  (:mod:`compscope.data.factored_path`); elsewhere (a GPU, an attention-output norm, post-LN,
  every path) the changed residual is read as the model reads it, and on a GPU a writer layer's
  heads are changed together, as many in one batch as fit (:func:`writers_per_batch`): their
  ``δ`` stacked, each later layer's reads (with every path, the changed forward pass) of
  ``writer × sequence`` rows (:func:`route`);
- :func:`interventional_composition` on a ``ToyTransformer``: the toy's own forward pass with
  ``edits=``, one pass per ``(h1, kind, layer of h2)`` — the brute-force reference the tests
  hold the first against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..core.attention import attend, combine, gate, project, read_input, written
from ..core.factors import check_composes, check_kinds
from ..defaults import PATHS, SEED
from ..errors import OptionError, check_int, check_tokens
from ..progress import progress_bar
from ..results.table import Tabular
from . import factored_path as factored

#: whether interventions on the CPU read the direct path in the writer's coordinates where they
#: can (:mod:`compscope.data.factored_path`); False: always the plain route (the tests compare the
#: two). On a GPU the plain route is taken: there the blocks are small launches, and the factored
#: route measured no faster (docs/results.md)
FACTORED = True

#: where the factored route is not taken (a GPU, an attention-output norm, post-LN, every path),
#: the writers of one layer are intervened on together, as many as fit in about this many bytes
#: (:func:`writers_per_batch`): one batch of launches per writer layer rather than per writer (a GPU
#: runs these small blocks bound by their launches). None: on a GPU 2 GiB or a quarter of its free
#: memory (:func:`compscope.core.memory.free_memory`: torch's cached memory counts as free); on the
#: CPU one writer at a time (batches measured no faster there: bench/RESULTS.md)
WRITER_BATCH_BYTES: int | None = None


def writers_per_batch(hw, tokens_shape, device: torch.device, paths: str = "direct") -> int:
    """How many writers of one layer the plain route intervenes on at once (:data:`WRITER_BATCH_BYTES`)
    for a batch of ``tokens_shape = (batch, seq)`` (``paths='all'``: a changed forward pass each), at least 1."""
    budget = WRITER_BATCH_BYTES
    if budget is None:
        if device.type != "cuda":
            return 1
        from ..core.memory import free_memory

        budget = min(2**31, free_memory(device) // 4)
    return max(1, int(budget) // writer_bytes(hw, tokens_shape, paths))


def factored_route(hw, paths: str, post_ln_mlp, device: torch.device) -> bool:
    """Whether :func:`intervention_effects` takes the factored route (see :data:`FACTORED`)."""
    return FACTORED and device.type == "cpu" and factored.applies(hw, paths, post_ln_mlp)


@dataclass(frozen=True)
class Route:
    """How :func:`intervention_effects` reads the changed inputs of later heads (module docstring):
    ``'factored'`` (in the writer's ``d_head`` coordinates, one writer at a time) or ``'plain'``
    (the changed residual read as the model reads it, ``group`` writers of a layer at once)."""

    name: str
    group: int = 1

    def __str__(self) -> str:
        return f"plain (writers in batches of up to {self.group})" if self.name == "plain" else self.name


def route(hw, tokens_shape, device: torch.device, paths: str = "direct", post_ln_mlp=None) -> Route:
    """The :class:`Route` :func:`intervention_effects` takes for a batch of ``tokens_shape = (batch,
    seq)`` on ``device`` (``post_ln_mlp``: the trace's clean MLP outputs of a post-LN model, else None)."""
    if factored_route(hw, paths, post_ln_mlp, device):
        return Route("factored")
    return Route("plain", min(writers_per_batch(hw, tokens_shape, device, paths), hw.n_heads))


@dataclass(frozen=True)
class Effects(Tabular):
    """Interventional effects ``(L, H, L, H)`` float64 per kind (NaN except earlier → later layer
    pairs); ``v_direction``: ``‖o' − o‖ / ‖o‖`` for V; the ablation and the data's shape."""

    by_kind: dict[str, Tensor]
    v_direction: Tensor | None
    ablation: str
    sequences: int
    seq_len: int
    paths: str = "direct"
    #: the writers intervened on, ``(layer, head)`` in order; None: every head before the last layer
    writers: tuple[tuple[int, int], ...] | None = None

    def to_pandas(self):
        """One row per pair and kind: ``kind, src_layer, src_head, dst_layer, dst_head, effect`` (and
        ``effect_direction`` for V); the ablation, paths, writers and data's shape in ``attrs``."""
        import pandas as pd

        frames = []
        for kind, t in self.by_kind.items():
            at = torch.isfinite(t).nonzero()  # (pairs, 4): writer layer and head, reader layer and head
            columns = dict(zip(("src_layer", "src_head", "dst_layer", "dst_head"), at.T.tolist()))
            frame = {"kind": [kind] * len(at), **columns, "effect": t[tuple(at.T)].tolist()}
            if kind == "V" and self.v_direction is not None:
                frame["effect_direction"] = self.v_direction[tuple(at.T)].tolist()
            frames.append(pd.DataFrame(frame))
        df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        df.attrs.update(ablation=self.ablation, sequences=self.sequences, seq_len=self.seq_len, paths=self.paths,
                        writers=None if self.writers is None else [list(w) for w in self.writers])
        return df

    def __repr__(self) -> str:
        from ..results.table import top_entries

        t = next(iter(self.by_kind.values()))
        strongest = "; ".join(f"strongest {k} " + ", ".join(f"{a}.{b}->{c}.{d} {v:.3g}" for (a, b, c, d), v in
                                                          top_entries(e, 1)) for k, e in self.by_kind.items())
        chosen = "" if self.writers is None else f", {len(self.writers)} writer{'s' * (len(self.writers) != 1)}"
        return (f"Effects({t.shape[0]} layers x {t.shape[1]} heads; {self.ablation}-ablation, {self.paths} path"
                f"{'s' if self.paths == 'all' else ''}{chosen}, {self.sequences} sequences of {self.seq_len} tokens; "
                f"{strongest})")


def check_ablation(ablation: str, sequences: int) -> None:
    """``ablation`` is 'mean' or 'zero'; a mean over one sequence is that sequence itself (every
    effect 0, every rank correlation undefined), so mean-ablation needs two or more."""
    if ablation not in ("mean", "zero"):
        raise OptionError(f"ablation={ablation!r}: use 'mean' or 'zero'")
    if ablation == "mean" and sequences < 2:
        raise OptionError(f"mean-ablation on {sequences} sequence: the mean over one sequence is the output itself, "
                          "so every effect would be 0; intervene on 2 or more sequences, or use ablation 'zero'")


def check_paths(paths: str) -> None:
    if paths not in PATHS:
        raise OptionError(f"paths={paths!r}: use 'direct' (h1's output removed from what h2 reads and nowhere else) "
                          "or 'all' (removed from the model, every later layer seeing it)")


def writer_heads(writers, n_layers: int, n_heads: int, model: str = "the model") -> tuple[tuple[int, int], ...] | None:
    """The writers to intervene on as sorted ``(layer, head)`` pairs, from ``writers``: None (every
    head before the last layer: None back), or an iterable of ``(layer, head)`` pairs and layer
    numbers (a layer: each of its heads). A head outside the model, or in its last layer (no later
    head reads it), is refused by name."""
    if writers is None:
        return None
    if isinstance(writers, (str, bytes)) or not hasattr(writers, "__iter__"):
        raise OptionError(f"writers={writers!r}: expected (layer, head) pairs or layer numbers, e.g. [(16, 0), 11]")
    import numbers

    is_int = lambda x: isinstance(x, numbers.Integral) and not isinstance(x, bool)  # noqa: E731 (numpy's too)
    chosen: set[tuple[int, int]] = set()
    for w in writers:
        if is_int(w):
            layer, heads = int(w), range(n_heads)
        elif isinstance(w, (tuple, list)) and len(w) == 2 and all(is_int(x) for x in w):
            layer, heads = int(w[0]), (int(w[1]),)
        else:
            raise OptionError(f"writer {w!r}: expected a (layer, head) pair or a layer number")
        if not 0 <= layer < n_layers:
            raise OptionError(f"writer layer {layer}: {model} has layers 0-{n_layers - 1}")
        if len(heads) == 1 and not 0 <= heads[0] < n_heads:
            raise OptionError(f"writer {layer}.{heads[0]}: {model} has heads 0-{n_heads - 1} in a layer")
        if layer == n_layers - 1:
            raise OptionError(f"writer layer {layer}: the last layer of {model}; no later head reads its heads")
        chosen.update((layer, h) for h in heads)
    if not chosen:
        raise OptionError("writers: none given (leave it unset for every head)")
    return tuple(sorted(chosen))


def head_names(heads, most: int = 8) -> str:
    """``16.0 16.1 ...``: ``(layer, head)`` pairs in words, the first ``most`` of them."""
    return " ".join(f"{l}.{h}" for l, h in heads[:most]) + " ..." * (len(heads) > most)


def runner_with_writers(model, writers, **kw):
    """``(runner, writer heads)``: :func:`~compscope.data.runner.runner_for` ``(model, **kw)`` and
    :func:`writer_heads` of ``writers``, refused before any forward pass, and, for a model named by
    files (a path, a built-in or a hub id), before ``transformers`` loads it to run: its heads are read first."""
    from ..loading.sources import load
    from .runner import runner_for

    if isinstance(model, (str, Path)):
        hw = load(model)
        chosen = writer_heads(writers, hw.n_layers, hw.n_heads, hw.meta.name)
        return runner_for(model, hw, **kw), chosen
    runner = runner_for(model, **kw)
    return runner, writer_heads(writers, runner.hw.n_layers, runner.hw.n_heads, runner.hw.meta.name)


def writers_text(writers, also: str = "") -> str:
    """``writers 16.0 16.1 (2 heads)`` (``also`` added inside the parentheses)."""
    return f"writers {head_names(writers)} ({len(writers)} head{'s' * (len(writers) != 1)}{also})"


def _check(kinds: str, ablation: str, tokens: Tensor) -> str:
    check_ablation(ablation, check_tokens(tokens, "batch, pos").shape[0])
    return check_kinds(kinds)


def output_frames(hw) -> list[Tensor]:
    """Per layer ``R: (head, k, d_head)``, ``k = min(d_model, d_head)``, with ``W_O^h = U R^h`` and
    ``Uᵀ U = I`` (QR in float64, returned in ``W_O``'s dtype): ``‖R z‖ = ‖W_O z‖`` for every ``z``,
    so a head's output norms, and those of differences of outputs, cost ``k`` coordinates rather
    than ``d_model``."""
    return [torch.linalg.qr(w.double()).R.to(w.dtype) for w in hw.W_O]


def compact_outputs(frame: Tensor, z: Tensor) -> Tensor:
    """What each head writes in its :func:`output_frames` coordinates, ``R^h z_h`` for ``z = pattern
    @ v: (batch, head, seq, d_head)``: ``(batch, seq, head, k)``, with the norms of :func:`head_outputs`'."""
    return torch.einsum("hkr,bhsr->bshk", frame, z)


def _reads(hw, layer: int, resid: Tensor, kinds: str) -> dict[str, Tensor]:
    """``{kind: queries / keys / values}`` of ``layer``'s heads reading the residual ``resid``."""
    x = read_input(hw, layer, resid)
    return {k: project(hw, layer, k, x) for k in kinds}


@dataclass(frozen=True)
class _Clean:
    """Per layer of a clean trace: the queries, keys and values, patterns, attention-weighted values
    ``z = pattern @ v`` (times each head's output gate, where the model gates: then ``gates[l]``, else
    None), head outputs ``W_O z``, and (V effects wanted) the outputs in their :func:`output_frames`
    coordinates (None for layer 0, which no writer comes before)."""

    qkv: list[dict[str, Tensor]]
    pattern: list[Tensor]
    z: list[Tensor]
    o: list[Tensor]
    frames: list[Tensor] | None = None
    v: list[Tensor | None] | None = None
    gates: list[Tensor | None] | None = None

    @classmethod
    def of(cls, hw, tr, frames: list[Tensor] | None = None) -> "_Clean":
        L = hw.n_layers
        qkv = [_reads(hw, l, tr.resid[l], "QKV") for l in range(L)]
        pattern = [attend(hw, l, qkv[l]["Q"], qkv[l]["K"]) for l in range(L)]
        gates = [gate(hw, l, read_input(hw, l, tr.resid[l])) for l in range(L)]  # (the clean queries' input)
        z = [pattern[l] @ qkv[l]["V"] for l in range(L)]
        z = [zl if g is None else zl * g for zl, g in zip(z, gates)]
        v = [compact_outputs(frames[l], z[l]) if l else None for l in range(L)] if frames is not None else None
        return cls(qkv, pattern, z, [written(hw, l, z[l]) for l in range(L)], frames, v, gates)


class _Sums:
    """The effects summed over sequences as writers are intervened on: per kind ``(L, H, L, H)``
    float64 (Q, K: the per-sequence mean over queries of the total-variation distance; V: the
    relative norm change per position), and for V the direction change and the positions counted."""

    def __init__(self, kinds: str, L: int, H: int, device: torch.device):
        zero = lambda: torch.zeros(L, H, L, H, dtype=torch.float64, device=device)  # noqa: E731
        self.by_kind = {k: zero() for k in kinds}
        self.turn, self.kept = zero(), zero()

    def add(self, hw, clean: _Clean, l1: int, writers: list[int], l2: int, reads: dict[str, Tensor]) -> None:
        """Add the effects on layer ``l2``'s heads of ``writers`` (heads of layer ``l1``), whose
        changed reads ``reads[kind]`` are ``(writer × batch, head, seq, ·)``."""
        for kind, changed in reads.items():
            changed = changed.unflatten(0, (len(writers), -1))  # (writer, batch, head, seq, ·)
            if kind == "V":  # the values changed, each query's gate (if any) as it was
                z2 = clean.pattern[l2] @ changed
                if clean.gates[l2] is not None:
                    z2 = z2 * clean.gates[l2]
                o2 = compact_outputs(clean.frames[l2], z2.flatten(0, 1))
                norm_sum, turn_sum, count = _v_sums(clean.v[l2], o2.unflatten(0, changed.shape[:2]))
                self.by_kind["V"][l1, writers, l2] += norm_sum
                self.turn[l1, writers, l2] += turn_sum
                self.kept[l1, writers, l2] += count
                continue
            q, k = (changed, clean.qkv[l2]["K"]) if kind == "Q" else (clean.qkv[l2]["Q"], changed)
            # the float32 difference of two probabilities is exact where they are within a factor 2
            # of each other and within 6e-8 (relative) elsewhere: summed in float64
            tv = 0.5 * (clean.pattern[l2] - attend(hw, l2, q, k)).abs().double().sum(-1)  # (writer, b, head, s)
            self.by_kind[kind][l1, writers, l2] += tv.mean(3).sum(1)  # per sequence: mean over queries

    def effects(self, mask: Tensor, sequences: int) -> tuple[dict[str, Tensor], Tensor | None]:
        """The means, on the CPU: ``({kind: (L, H, L, H)}, V's direction change or None)``, NaN
        except for the pairs of a writer in ``mask: (L, H)`` and a reader in a later layer."""
        L = mask.shape[0]
        forward = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)[:, None, :, None] & mask[:, :, None, None]
        nan = torch.tensor(float("nan"), dtype=torch.float64)
        kept = self.kept.cpu().clamp_min(1)
        out = {k: torch.where(forward, v.cpu() / (kept if k == "V" else sequences), nan) for k, v in self.by_kind.items()}
        return out, (torch.where(forward, self.turn.cpu() / kept, nan) if "V" in out else None)


@torch.no_grad()
def intervention_effects(runner, tokens: Tensor | None = None, kinds: str = "QKV", ablation: str = "mean", *,
                         batch_size: int = 16, progress: bool = True, device: str | torch.device | None = None,
                         paths: str = "direct", writers=None, sequences: int | None = None, half: int | None = None,
                         seed: int | None = None) -> Effects:
    """Interventional composition of every pair and kind of ``runner``'s model (a runner, or any
    model :func:`~compscope.data.runner.runner_for` runs) on ``tokens:
    (batch, seq)`` (module docstring), or on the first ``sequences`` (default 16) of the sequences
    :func:`~compscope.data.validate.validate` reads with its ``half`` and ``seed`` (default those it
    intervenes on with its defaults), ``batch_size`` sequences at a time: memory holds one
    batch's clean queries, keys, values and head outputs of every layer; mean-ablation uses the
    mean over *all* sequences (a first pass computes it). ``paths``: ``'direct'`` (the
    specification's) or ``'all'`` (the writer's change propagated through the model: one more
    forward pass per writer and batch, from the writer's layer to the last layer's input).
    ``writers``: the heads ``h1`` to intervene on
    (:func:`writer_heads`: ``(layer, head)`` pairs and layer numbers; default every head), the
    other rows left NaN: the work and the time scale with their number. ``device``: where a model
    given by name or folder runs (:func:`~compscope.data.runner.runner_for`); the effects come back
    on the CPU."""
    from .runner import runner_for
    from .validate import INTERVENTION_SEQUENCES, default_sequences, sequences_asked

    asked = sequences_asked("tokens", tokens, sequences, half, seed)
    if tokens is None:
        runner = runner_for(runner, progress=progress, device=device)
        n = asked.pop("sequences", INTERVENTION_SEQUENCES)
        tokens = default_sequences(runner, max(n, 64), **asked).tokens[:n]  # the verdict's first n
    kinds = _check(kinds, ablation, tokens)
    check_paths(paths)
    runner = runner_for(runner, progress=progress, device=device)
    hw, dev = runner.weights_here(), runner.device
    check_composes(hw)
    if paths == "direct" and hw.norm_placement == "post" and getattr(runner, "post_norms", None) is None:
        raise OptionError(f"{hw.meta.name}: a post-LN model's direct path passes through its norms, and this "
                          f"runner ({type(runner).__name__}) does not name them; interventions on post-LN models "
                          "need a transformers model or a TransformerLens HookedEncoder")
    check_int("batch_size", batch_size, 1)
    L, H = hw.n_layers, hw.n_heads
    chosen = writer_heads(writers, L, H, hw.meta.name)
    mask = torch.zeros(L, H, dtype=torch.bool)  # the writers intervened on
    if chosen is None:
        mask[:-1] = True
    else:
        mask[tuple(torch.tensor(chosen).T)] = True
    chunks = tokens.split(batch_size)
    bar = progress_bar(len(chunks) * (int(mask.sum()) + (ablation == "mean")), "interventions", enabled=progress)
    means = z_means = kept_state = None
    frames = output_frames(hw) if "V" in kinds else None
    if ablation == "mean":  # each head's z at each position, averaged over every sequence; its output W_O z̄
        z_sums = [torch.zeros(H, tokens.shape[1], hw.d_head, dtype=torch.float64, device=dev) for _ in range(L)]
        for chunk in chunks:
            tr = runner.trace(chunk)
            state = _Clean.of(hw, tr, frames if len(chunks) == 1 else None)
            for l in range(L):
                z_sums[l] += state.z[l].double().sum(0)
            bar.update(1)
        z_means = [(s_ / tokens.shape[0]).float() for s_ in z_sums]
        means = [written(hw, l, z_means[l][None])[0] for l in range(L)]  # (seq, head, d_model)
        if len(chunks) == 1:  # one batch: its trace serves the effects too
            kept_state = (tr, state)
    sums = _Sums(kinds, L, H, dev)
    for chunk in chunks:
        if kept_state is not None:
            tr, clean = kept_state
        else:
            tr = runner.trace(chunk)
            clean = _Clean.of(hw, tr, frames)
        mlp = _clean_mlp(runner, tr) if paths == "direct" else None
        way = route(hw, chunk.shape, dev, paths, mlp)
        readers = factored.readers(hw, tr.resid, kinds) if way.name == "factored" else None
        for l1 in range(L - 1):
            if not mask[l1].any():
                continue
            added = combine(hw, l1, clean.o[l1]) if hw.attn_out_norm is not None else None
            heads1 = mask[l1].nonzero().flatten().tolist()
            for hs in (heads1[i:i + way.group] for i in range(0, len(heads1), way.group)):
                delta = _deltas(hw, l1, clean.o[l1], hs, None if means is None else means[l1], added)  # (writer, b, s, d)
                if way.name == "factored":  # the direct path's reads, d_head wide (compscope.data.factored_path)
                    (h1,), d1 = hs, delta[0]
                    u = (z_means[l1][h1] if z_means is not None else 0) - clean.z[l1][:, h1]
                    plain = lambda l2: _reads(hw, l2, tr.resid[l2] + d1, kinds)  # noqa: E731
                    reads = factored.changed_reads(hw, readers, l1, h1, u, kinds, plain)
                else:  # every writer of the group in one batch: reads of (writer * b, s, d)
                    if paths == "all":  # one forward pass of the tokens once per writer, each with its δ
                        changed_run = runner.trace(tr.tokens.repeat(len(hs), 1), add={l1: delta.flatten(0, 1)}, clean=tr,
                                                   last=False)  # the readers read residuals: the last layer's input
                        targets = ((l2, changed_run.resid[l2]) for l2 in range(l1 + 1, L))
                    else:
                        targets = ((l2, r.flatten(0, 1)) for l2, r in _direct_path(runner, tr, mlp, l1, delta))
                    reads = ((l2, _reads(hw, l2, resid2, kinds)) for l2, resid2 in targets)
                for l2, inputs in reads:
                    sums.add(hw, clean, l1, hs, l2, inputs)
                bar.update(len(hs))
    bar.close()
    out, direction = sums.effects(mask, tokens.shape[0])
    return Effects(out, direction, ablation, int(tokens.shape[0]), int(tokens.shape[1]), paths, chosen)


def writer_bytes(hw, tokens_shape, paths: str = "direct") -> int:
    """About the bytes one writer adds to a batch of writers (:func:`writers_per_batch`) on
    ``tokens_shape = (batch, seq)``: a later layer's patterns, each ``(head, seq, seq)`` per
    sequence, held about eight float32 times over (logits, softmax, difference in float64), and its
    residual, normed input, queries, keys and values; with an attention-output norm, also the
    writer layer's head outputs copied per writer (:func:`_deltas`); on every path, the changed
    run's residual at every layer, twice (a post-LN model's norm inputs), and its MLP's hidden
    states (taken as four residuals wide)."""
    b, s = tokens_shape
    copies = 4 * hw.n_heads * hw.d_model if getattr(hw, "attn_out_norm", None) is not None else 0
    if paths == "all":
        copies += 4 * (2 * hw.n_layers + 4) * hw.d_model
    return b * s * (32 * hw.n_heads * s + 4 * (2 * hw.d_model + 3 * hw.n_heads * hw.d_head) + copies) + 1


def _deltas(hw, l1: int, o: Tensor, heads: list[int], means: Tensor | None, added: Tensor | None) -> Tensor:
    """``δ`` for each writer ``h1`` in ``heads`` of layer ``l1``, ``(writer, batch, seq, d_model)``:
    what the layer adds to the residual with ``h1``'s output ``o[:, :, h1]`` replaced by its mean
    (``means: (seq, head, d_model)``) or 0, less what it adds clean (``added``: the clean
    :func:`~compscope.core.attention.combine` where the attention output is normed; None: a sum,
    so ``δ`` is the replacement less ``o_h1``)."""
    w = o[:, :, heads].movedim(2, 0)  # (writer, batch, seq, d_model)
    repl = torch.zeros_like(w) if means is None else means[None, :, heads].movedim(2, 0).expand_as(w)
    if added is None:
        return repl - w
    o2 = o[None].repeat(len(heads), 1, 1, 1, 1)  # (writer, batch, seq, head, d_model)
    o2[torch.arange(len(heads)), :, :, heads] = repl
    return combine(hw, l1, o2.flatten(0, 1)).unflatten(0, (len(heads), -1)) - added


def _clean_mlp(runner, tr) -> list[Tensor] | None:
    """Post-LN traces: each layer's MLP output ``f_l = v_l − LN1_l(u_l)``, held clean on the
    direct path (computed once per trace); None otherwise."""
    if tr.norm_in is None:
        return None
    return [v - ln1(u) for (u, v), (ln1, _) in zip(tr.norm_in, runner.post_norms)]


def _direct_path(runner, tr, mlp: list[Tensor] | None, l1: int, delta: Tensor):
    """``(l2, residual (writer, batch, seq, d_model))`` for every layer after ``l1``: the residual
    ``l2`` reads when ``δ: (writer, batch, seq, d_model)`` (one per writer) is added to what layer
    ``l1``'s attention writes, along the direct path (module docstring); ``mlp``:
    :func:`_clean_mlp` of the trace."""
    L = len(tr.resid)
    if mlp is None:  # pre-LN or no norm: the residual is a sum
        for l2 in range(l1 + 1, L):
            yield l2, tr.resid[l2] + delta
        return
    per_writer = lambda norm, x: norm(x.flatten(0, 1)).unflatten(0, x.shape[:2])  # noqa: E731 (the model's modules)
    change = delta  # added to the sum the layer's first norm takes
    for layer in range(l1, L - 1):
        ln1, ln2 = runner.post_norms[layer]
        resid = per_writer(ln2, mlp[layer] + per_writer(ln1, tr.norm_in[layer][0] + change))
        yield layer + 1, resid
        change = resid - tr.resid[layer + 1]


def _v_sums(o: Tensor, o2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``(head,)`` sums over positions where ``‖o‖ > 0`` of ``|‖o'‖ − ‖o‖| / ‖o‖`` and of
    ``‖o' − o‖ / ‖o‖``, and how many positions, for head outputs ``(batch, seq, head, d)`` (in
    ``d_model`` coordinates or those of :func:`output_frames`); ``o'`` may carry leading dimensions
    (one per writer: ``(…, head)`` sums).
    Per position in the outputs' dtype (float32), free of cancellation: with ``Δ = o' − o``,
    ``‖o'‖ − ‖o‖ = (2⟨Δ, o⟩ + ‖Δ‖²) / (‖o'‖ + ‖o‖)``, so each term is within a few
    ``1e-7 ‖Δ‖ / ‖o‖`` of float64 (not ``1e-7``, as a difference of norms would be); the sums in
    float64."""
    delta = o2 - o
    n, n2, dn = o.norm(dim=-1).double(), o2.norm(dim=-1).double(), delta.norm(dim=-1).double()
    grow = (2 * torch.linalg.vecdot(delta, o, dim=-1).double() + dn * dn).abs() / (n + n2).clamp_min(1e-300)
    keep = (n > 0).double()
    inv = keep / n.clamp_min(1e-300)
    return (grow * inv).sum(dim=(-3, -2)), (dn * inv).sum(dim=(-3, -2)), keep.sum(dim=(-3, -2))


@torch.no_grad()
def interventional_composition(model, tokens: Tensor, kinds: str = "QKV", ablation: str = "mean",
                               paths: str = "direct") -> dict[str, Tensor]:
    """``{kind: (L, H, L, H)}`` effects (float64; NaN except for earlier → later layer pairs)
    of ``model`` (a ``ToyTransformer``, or anything with its ``forward(tokens, cache=, edits=,
    adds=)`` hooks, and its ``layer_write`` where the layer's attention output is normed) on
    ``tokens: (batch, pos)``. ``paths='all'``: a run with ``h1``'s output
    replaced in the residual (``adds``) gives the residual ``h2`` reads through ``kind``."""
    kinds = _check(kinds, ablation, tokens)
    check_paths(paths)
    cache: dict = {}
    model(tokens, cache=cache)
    L = sum(1 for k in cache if k.startswith("pattern."))
    H = cache["pattern.0"].shape[1]
    out = {k: torch.full((L, H, L, H), float("nan"), dtype=torch.float64) for k in kinds}
    for l1 in range(L - 1):
        for h1 in range(H):
            written = cache[f"head_out.{l1}"][:, :, h1]  # (batch, pos, d)
            delta = (written.mean(0, keepdim=True) if ablation == "mean" else torch.zeros_like(written)) - written
            if hasattr(model, "layer_write"):  # what the layer adds changes through its attention-output norm
                delta = model.layer_write(l1, cache[f"head_out.{l1}"].sum(2) + delta) - cache[f"attn_out.{l1}"]
            changed: dict = {}
            if paths == "all":
                model(tokens, cache=changed, adds={l1: delta})
            for kind in kinds:
                for l2 in range(l1 + 1, L):
                    d2 = changed[f"resid_pre.{l2}"] - cache[f"resid_pre.{l2}"] if paths == "all" else delta
                    patched: dict = {}
                    model(tokens, cache=patched, edits={(l2, h2, kind): d2 for h2 in range(H)})
                    out[kind][l1, h1, l2] = _effect(kind, cache, patched, l2)
    return out


def _effect(kind: str, clean: dict, patched: dict, layer: int) -> Tensor:
    """``(head,)`` effect of one patch on every head of ``layer`` (module docstring)."""
    if kind in "QK":
        p, q = clean[f"pattern.{layer}"].double(), patched[f"pattern.{layer}"].double()  # (batch, head, i, j)
        return 0.5 * (p - q).abs().sum(-1).mean(dim=(0, 2))
    norm_sum, _, count = _v_sums(clean[f"head_out.{layer}"], patched[f"head_out.{layer}"])
    return norm_sum / count.clamp_min(1)


def against_measures(model, kinds: str = "QKV", *, metric: str = "identity", sequences: int = 100, half: int | None = None,
                     seed: int = SEED, ablation: str = "mean", batch_size: int = 16, progress: bool = False,
                     device: str | torch.device | None = None, model_dtype: str | torch.dtype | None = None,
                     paths: str = "direct", writers=None, metric_data=None, ridge: float | None = None):
    """Interventional composition of any model compscope runs (:func:`~compscope.data.runner.runner_for`)
    on ``sequences`` held-out repeated random sequences ``[bos] t t`` (toy models: their own held-out
    repeats; ``|t| = half``, refused when it does not fit the model's context; by default 32, cut to
    the longest that fits), and
    every measure's score of the same pairs (``metric``: a name, ``'activations'`` for the model's
    own residual second moments, or a ``Metric``): ``(Effects, ScoreTable, half)``. ``device``: where
    the model runs and the measures are computed (default CUDA when present, else the CPU);
    ``model_dtype``: what a model loaded from files computes in (default float32); ``paths``,
    ``writers``: as :func:`intervention_effects`; ``metric_data``: what a metric estimated on data
    is estimated on (:class:`~compscope.data.residual_moments.MetricData`); ``ridge``: the metric's ``G``
    regularised as ``G + ridge·tr(G)/d·I`` (default ``1e-6``; refused for the identity metric, which has none)."""
    from ..core.metrics import check_data_used, check_metrics, check_ridge, get_metric
    from ..engine.composition import scores
    from .runner import ToyRunner
    from .sequences import HALF, repeats

    metric, *more = check_metrics(metric)
    if more:
        raise OptionError(f"metric: one metric (a name or a Metric), got {len(more) + 1}")
    check_data_used(metric_data, metric)
    if ridge is not None:
        check_ridge(ridge)  # before the model loads; whether the metric takes one, before it runs
    check_ablation(ablation, sequences)
    check_paths(paths)
    if half is not None:
        check_int("half", half, 2)
    runner, _ = runner_with_writers(model, writers, device=device, dtype=model_dtype)
    hw = runner.hw
    half, _ = runner.repeat_half(half, HALF)
    met = get_metric(metric, hw, ridge, model=runner, data=metric_data)  # a ridge it does not take: refused here
    if isinstance(runner, ToyRunner):
        from ..toy.storage import held_out_repeats

        tokens = held_out_repeats(runner.model, sequences, half, seed)
    else:
        tokens = repeats(sequences, half, hw.n_vocab, seed, runner.bos, avoid=runner.special_ids()).tokens
    effects = intervention_effects(runner, tokens, kinds, ablation, batch_size=batch_size, progress=progress,
                                   paths=paths, writers=writers)
    table = scores(hw, kinds, "all", met, pairs="all", progress=progress, device=runner.device)
    return effects, table, (tokens.shape[1] - (runner.bos is not None)) // 2
