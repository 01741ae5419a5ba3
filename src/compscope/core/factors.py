"""A head's factored circuits, in the raw residual basis or whitened by a metric: the one place
they are built.

For layer ``l``, query head ``h`` and its K/V head ``g = kv_map[h]`` (GQA: shared factors),
with a metric ``G`` (``S = G^{1/2}``, ``S⁻¹ = G^{-1/2}``; identity when none) and rotary
offset ``δ`` (query minus key position; ``R(δ)`` rotates a head's dims, identity without
rotary), the per-head factors (``r × d``, one row per head dim) are

    Q: W_Q S          K: R(−δ) W_K S          V: W_V S          O: W_Oᵀ S⁻¹

and the circuits, as factored ``d × d`` maps ``left @ right`` (:class:`LowRank`):

    writer  A   = W_OV          = (S⁻¹ W_O)(W_V S)                 (what h writes)
    reader  V   = W_OV          (the same map, read through W_V)
    reader  K   = W_QK          = (W_Q S)ᵀ (R(−δ) W_K S)           (logit x_qᵀ W_QK x_k)
    reader  Q   = W_QKᵀ         = (R(−δ) W_K S)ᵀ (W_Q S)

In whitened coordinates ``z = S⁻¹ x`` a map transforms as ``M → S⁻¹ M S`` and a bilinear form
as ``M → S M S`` (:func:`whiten`): both are what the factors above give.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import Tensor

from ..errors import OptionError
from .lowrank import LowRank

if TYPE_CHECKING:
    from .heads import HeadWeights

#: composition kinds: the reader reads the writer through W_Q, W_K or W_V
KINDS = ("Q", "K", "V")
#: factor names of :func:`layer_factor`
FACTORS = ("Q", "K", "V", "O")
_F64 = torch.float64


def check_kinds(kinds: str) -> str:
    """``kinds`` (letters from ``'QKV'``) with repeats dropped, order kept; an error otherwise."""
    if not isinstance(kinds, str) or not kinds or any(k not in KINDS for k in kinds):
        raise OptionError(f"kinds={kinds!r}: use letters from 'QKV'")
    return "".join(dict.fromkeys(kinds))


def check_kind(kind: str) -> str:
    """One composition kind, ``'Q'``, ``'K'`` or ``'V'``."""
    if kind not in KINDS:
        raise OptionError(f"kind={kind!r}: use 'Q', 'K' or 'V'")
    return kind


def check_composes(hw: HeadWeights, what: str = "") -> HeadWeights:
    """``hw`` when it has a head pair (a writer in an earlier layer than its reader), else an error
    saying a one-layer model has none (``what``: what needs one, for the message)."""
    if hw.n_layers < 2:
        raise OptionError(f"{hw.meta.name}: one layer, so no head pair composes (a writer's layer comes before its "
                          f"reader's){what or '; compscope circuits reads its heads one by one'}")
    return hw


def check_offset(hw: HeadWeights, offset: float, option: str = "offset") -> float:
    """``offset``, a rotary offset (query minus key position): a finite number, and 0 unless the
    model has rotary positions (it would mean nothing there: said rather than ignored)."""
    import math

    if isinstance(offset, bool) or not isinstance(offset, (int, float)) or not math.isfinite(offset):
        raise OptionError(f"{option}={offset!r}: expected a finite number (the query's position minus the key's)")
    if offset != 0 and hw.rotary is None:
        raise OptionError(f"{option} {offset:g}: {hw.meta.name} has {hw.positions!r} positions, not rotary; "
                          "the offset only applies to rotary models")
    return offset


def rotate_rows(w: Tensor, hw: HeadWeights, layer: int, offset: float) -> Tensor:
    """``R(offset) w`` for ``w: (..., r, n)`` of one layer (rows are head dims); ``w`` itself
    without rotary or at offset 0."""
    if hw.rotary is None or offset == 0:
        return w
    pos = torch.tensor([float(offset)])
    return hw.rotary.rotate(w.transpose(-1, -2), pos, layer).transpose(-1, -2)


def layer_factor(hw: HeadWeights, layer: int, name: str, *, sqrt: Tensor | None = None, inv_sqrt: Tensor | None = None,
                 offset: float = 0.0, per_kv: bool = False, dtype: torch.dtype | None = None,
                 device: torch.device | str | None = None) -> Tensor:
    """Factor ``name`` (``'Q'``, ``'K'``, ``'V'`` or ``'O'``, module docstring) of every head of
    ``layer``: ``(head, r, d)`` per query head, or per K/V head with ``per_kv`` (``K``, ``V``).
    ``sqrt``/``inv_sqrt``: ``G^{±1/2}`` (None: identity). A transformed factor is computed in
    float64 (or ``dtype``); an untransformed one is the stored tensor, cast only when ``dtype``
    or ``device`` ask for it."""
    if name not in FACTORS:
        raise OptionError(f"factor {name!r}: use one of {', '.join(FACTORS)}")
    w = hw.W_O[layer].mT if name == "O" else {"Q": hw.W_Q, "K": hw.W_K, "V": hw.W_V}[name][layer]
    m = inv_sqrt if name == "O" else sqrt
    rot = name == "K" and hw.rotary is not None and offset != 0
    if m is not None or rot:  # metric and rotation once per stored (K/V) head
        w = moved(w, device, _F64)
        w = w if m is None else w @ m.to(w.device, _F64)
        w = rotate_rows(w, hw, layer, -offset) if rot else w
    if name in "KV" and not per_kv and list(hw.kv_map) != list(range(hw.n_kv_heads)):
        w = w[torch.tensor(hw.kv_map, device=w.device)]
    return moved(w, device, dtype)


def moved(w: Tensor, device: torch.device | str | None, dtype: torch.dtype | None) -> Tensor:
    """``w.to(device, dtype)`` (``None``: as it is), with the cast done on the side of the copy
    that holds the narrower dtype. Between devices torch casts on the CPU and copies the result:
    the stored bfloat16 weights of one 7B layer's factor, cast to float64 on the CPU, were 4x the
    bytes to send and a CPU pass, for each of the engine's fetches."""
    device = w.device if device is None else torch.device(device)
    dtype = w.dtype if dtype is None else dtype
    if dtype.itemsize > w.dtype.itemsize:
        return w.to(device).to(dtype)
    return w.to(dtype).to(device)


def model_factor(hw: HeadWeights, name: str, dtype: torch.dtype | None = None) -> Tensor:
    """Factor ``name`` of every layer, per query head, unwhitened and unrotated:
    ``(layer, head, r, d)`` (``O``: ``W_Oᵀ``)."""
    return torch.stack([layer_factor(hw, layer, name, dtype=dtype) for layer in range(hw.n_layers)])


def head_circuit(hw: HeadWeights, layer: int, head: int, kind: str, *, sqrt: Tensor | None = None,
                 inv_sqrt: Tensor | None = None, offset: float = 0.0, dtype: torch.dtype | None = None) -> LowRank:
    """The factored circuit of one head (module docstring): ``kind='W'`` the writer ``W_OV``,
    ``'Q'``, ``'K'`` or ``'V'`` the reader of that kind; in the metric's whitened coordinates
    when ``sqrt``/``inv_sqrt`` are given."""
    if kind != "W":
        check_kind(kind)
    if dtype is None and (sqrt is not None or (hw.rotary is not None and offset != 0 and kind in "QK")):
        dtype = _F64  # transformed factors are float64: keep both sides alike
    f = lambda name: layer_factor(hw, layer, name, sqrt=sqrt, inv_sqrt=inv_sqrt, offset=offset, dtype=dtype)[head]  # noqa: E731
    if kind in "WV":
        return LowRank(f("O").T, f("V"))
    qk = LowRank(f("Q").T, f("K"))
    return qk if kind == "K" else qk.T


def whiten(M: LowRank, sqrt: Tensor | None, inv_sqrt: Tensor | None, *, bilinear: bool) -> LowRank:
    """``M`` in whitened coordinates: a map (``W_OV``) as ``S⁻¹ M S``, a bilinear form
    (``W_QK``) as ``S M S`` (``S = G^{1/2}``; identity when None)."""
    left, right = M.left, M.right
    if sqrt is not None:
        right = right @ sqrt.to(right)
        left = (sqrt if bilinear else inv_sqrt).to(left) @ left
    return LowRank(left, right)
