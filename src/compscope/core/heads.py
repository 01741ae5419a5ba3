"""``HeadWeights``: the one canonical, frozen form of a model's attention.

Column convention (docs/spec.md): ``x_out = W @ x_in``. For layer ``l`` and query head ``h`` with
K/V head ``g = kv_map[h]``::

    q = W_Q[l, h] x + b_Q[l, h]        W_Q: (layer, head,    d_head, d_model)
    k = W_K[l, g] x + b_K[l, g]        W_K: (layer, kv_head, d_head, d_model)
    v = W_V[l, g] x + b_V[l, g]        W_V: (layer, kv_head, d_head, d_model)   (then v_norm, if any)
    out = Σ_h W_O[l, h] z_h + b_O[l]   W_O: (layer, head,    d_model, d_head)
    (gated attention: z_h times σ(W_G[l, h] x + b_G[l, h]) of the query's input first)
    (multi-head latent attention: q times s_q(x), v and k's dims from kv_latent_from on times s_kv(x), the
    per-token scales of the RMSNorms on low-rank latents of x: LatentNorm)

``x`` is what the head reads: the residual after ``attn_norm`` (pre-LN models) or the
residual itself (post-LN models, where ``attn_norm`` is the norm that produced it).
Embeddings are columns: ``W_E: (d_model, n_vocab)``, ``W_pos: (d_model, n_ctx)``; the
unembedding is ``W_U: (n_vocab, d_model)`` (logits ``= W_U x``).

K/V heads shared by several query heads (GQA/MQA) are stored once. Every transform applied
after loading is listed, in order, in ``meta.processing``; nothing is applied silently.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor

from ..errors import WeightError
from .factors import head_circuit
from .lowrank import LowRank

NormKind = Literal["layernorm", "rmsnorm"]


def all_finite(t: Tensor) -> bool:
    """Whether every value of ``t`` is finite. Fast path: a NaN or ±Inf anywhere makes the sum
    non-finite, so a finite sum proves it (a sum that overflows falls back to the full check,
    which is ~50× slower on CPU). Tensors without values (the ``meta`` device) count as finite."""
    if not (t.is_floating_point() or t.is_complex()) or t.device.type == "meta":
        return True
    if t.element_size() == 1:  # float8 kinds: no sum or isfinite kernels; widen (1 byte each, cheap)
        t = t.float()
    if bool(torch.isfinite(t.sum())):
        return True
    return bool(torch.isfinite(t).all())


@dataclass(frozen=True)
class Norm:
    """A normalisation with one row of parameters per layer (or per layer and head dim).

    ``layernorm``: ``(x - mean x) / sqrt(var x + eps) * gain + bias``;
    ``rmsnorm``: ``x / sqrt(mean x² + eps) * gain``; ``gain = offset + weight``
    (Gemma stores ``w`` and multiplies by ``1 + w``: ``offset = 1``). ``weight is None``
    means no gain (folded away, or never there)."""

    kind: NormKind
    weight: Tensor | None  # (layer, width)
    bias: Tensor | None  # (layer, width)
    eps: float
    offset: float = 0.0

    def gain(self, layer: int) -> Tensor | None:
        return None if self.weight is None else self.weight[layer] + self.offset

    def normalise(self, x: Tensor) -> Tensor:
        """The part shared by every layer, before gain and bias (float32): ``x / sqrt(mean x² + eps)``,
        after centring for ``layernorm``."""
        x32 = x.float()
        if self.kind == "layernorm":
            x32 = x32 - x32.mean(-1, keepdim=True)
        return x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)

    def affine(self, y: Tensor, layer: int) -> Tensor:
        """``y * gain + bias`` of ``layer`` (each where present), in ``y``'s dtype."""
        g = self.gain(layer)
        if g is not None:
            y = y * g.to(y.dtype)
        if self.bias is not None:
            y = y + self.bias[layer].to(y.dtype)
        return y

    def apply(self, x: Tensor, layer: int) -> Tensor:
        return self.affine(self.normalise(x), layer).to(x.dtype)

    def describe(self) -> str:
        parts = [self.kind, f"eps={self.eps:g}"]
        if self.offset:
            parts.append("gain=1+w" if self.offset == 1 else f"gain={self.offset:g}+w")
        if self.weight is None:
            parts.append("no gain")
        if self.bias is not None:
            parts.append("bias")
        return ", ".join(parts)


def same_device(a: torch.device, b: torch.device) -> bool:
    """``cuda`` and ``cuda:<current>`` are one device; otherwise torch's equality."""
    if a.type == b.type == "cuda" and (a.index is None or b.index is None):
        current = torch.cuda.current_device()
        return (a.index if a.index is not None else current) == (b.index if b.index is not None else current)
    return a == b


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _count_pair(b) -> bool:
    """Whether ``b`` is a tuple of two ints >= 0 (a pair of bucket settings)."""
    return isinstance(b, tuple) and len(b) == 2 and all(_is_int(x) and x >= 0 for x in b)


def sinks_valid(sinks: Tensor) -> bool:
    """Whether attention-sink logits are finite or −∞ (a layer without a sink: a key every query sees with weight
    0, MiMo-V2-Flash's global layers); NaN and +∞ are not."""
    return bool((torch.isfinite(sinks) | (sinks == float("-inf"))).all())


def is_finite_number(x) -> bool:
    """An int or float (not a bool), finite: what a size, scale or epsilon read from a file must be."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_norm(n: Norm | None, name: str) -> None:
    if n is None:
        return
    if n.kind not in ("layernorm", "rmsnorm"):
        raise WeightError(f"{name}: norm kind {n.kind!r}, expected 'layernorm' or 'rmsnorm'")
    for what, v in (("eps", n.eps), ("offset", n.offset)):
        if not is_finite_number(v) or (what == "eps" and v < 0):
            raise WeightError(f"{name}: {what} {v!r} is not a finite number" + (" >= 0" if what == "eps" else ""))


@dataclass(frozen=True)
class Rotary:
    """Rotary position embedding on the first ``dim`` dims of every query/key head.

    ``inv_freq: (layer, dim/2)``: pair ``i`` at position ``p`` turns by ``p * inv_freq[i]``.
    ``style='half'`` pairs dim ``i`` with ``i + dim/2`` (Llama/NeoX, HF layout);
    ``'interleaved'`` pairs ``2i`` with ``2i+1`` (GPT-J, GGUF's stored layout)."""

    dim: int
    inv_freq: Tensor
    style: Literal["half", "interleaved"] = "half"

    def rotate(self, x: Tensor, positions: Tensor, layer: int) -> Tensor:
        """Rotate ``x: (..., seq, d_head)`` by ``positions: (seq,)`` (may be negative or float)."""
        ang = positions.to(x.device, torch.float64)[:, None] * self.inv_freq[layer].to(x.device, torch.float64)[None, :]
        cos, sin = ang.cos().to(x), ang.sin().to(x)  # x's dtype and device
        rot, rest = x[..., : self.dim], x[..., self.dim :]
        if self.style == "half":
            a, b = rot[..., : self.dim // 2], rot[..., self.dim // 2 :]
            out = torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
        else:
            a, b = rot[..., 0::2], rot[..., 1::2]
            out = torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        return out if rest.shape[-1] == 0 else torch.cat([out, rest], dim=-1)

    def describe(self) -> str:
        return f"rotary dim={self.dim} ({self.style}), base freq {float(self.inv_freq[0, 0]):g}"


#: what ``HeadWeights.positions`` may say: absolute (learned ``W_pos``), rotary, a linear bias on the
#: logits (ALiBi), relative ones beside the residual (DeBERTa's position queries and keys ``pos_Q``, ``pos_K``;
#: T5's learned bias by offset, ``rel_bias``, where no ``W_pos`` carries positions), or none
POSITIONS = ("learned", "rotary", "alibi", "relative", "none")


def alibi_slopes(n_heads: int, max_bias: float = 8.0) -> Tensor:
    """The ALiBi slopes of ``n_heads`` heads (Press et al.) at maximum bias ``b`` (8, the paper's), float64: for
    ``n = 2^k`` heads the geometric sequence ``m_h = 2^(-b (h+1) / n)``; otherwise those of the largest
    ``n' = 2^k < n`` followed by every other one of ``2n'`` heads' (``2^(-b (2j+1) / 2n')``, ``j = 0, 1, ...``)
    for the ``n - n'`` heads left."""
    if not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"n_heads {n_heads!r}: expected a positive integer")
    p = 1 << (n_heads.bit_length() - 1)  # the largest power of two <= n_heads
    first = [2.0 ** (-max_bias * (h + 1) / p) for h in range(p)]
    rest = [2.0 ** (-max_bias * (2 * j + 1) / (2 * p)) for j in range(n_heads - p)]
    return torch.tensor(first + rest, dtype=torch.float64)


@dataclass(frozen=True)
class LatentNorm:
    """The RMSNorm that multi-head latent attention (DeepSeek-V2, V3) puts on a low-rank latent ``c = W x + b`` of the
    heads' input ``x``: the heads read ``g ⊙ c / rms(c)`` through their up-projections ``U``, so ``U diag(g) W`` is
    their ``W_Q`` (``W_K``, ``W_V``) and ``U diag(g) b`` their bias, and what is left of the norm is one scale per token,
    ``s(x) = (mean_i c_i² + eps)^(-1/2)``, multiplying those projections."""

    W: Tensor  # (layer, rank, d_model)
    b: Tensor | None  # (layer, rank)
    eps: float

    def scale(self, layer: int, x: Tensor) -> Tensor:
        """``s(x)`` of ``layer`` for inputs ``x: (..., d_model)``: ``(...,)``, in float32 as the model computes it
        (float64 for float64 inputs, compscope's own checks)."""
        dt = torch.float64 if x.dtype == torch.float64 else torch.float32
        c = x.to(dt) @ self.W[layer].to(x.device, dt).T
        if self.b is not None:
            c = c + self.b[layer].to(x.device, dt)
        return torch.rsqrt(c.pow(2).mean(-1) + self.eps)

    def mapped(self, read) -> LatentNorm:
        """The same norm reading through ``read`` (a map of ``W``'s residual axis: a change of basis, a gain)."""
        W = read(self.W)
        return dataclasses.replace(self, W=W, b=None if self.b is None else self.b.to(W.dtype))


@dataclass(frozen=True)
class Meta:
    """Where the weights came from and what was done to them."""

    family: str
    source: str
    name: str
    dtype: str  # dtype of the tensors held
    source_dtype: str  # dtype(s) in the file, e.g. 'bfloat16' or 'Q4_1+Q8_0+F32'
    processing: tuple[str, ...] = ()  # compscope's steps ('fold_norm'), and the source's own ('transformer_lens:fold_ln')
    notes: tuple[str, ...] = ()  # caveats for the scores, e.g. QK-norm inside the QK path
    #: each layer's own K/V head count where the layers' counts differ (the n_kv_heads held per layer repeat a layer's
    #: own for the query heads that share each: Nemotron-NAS, Gemma 4); empty where every layer holds its own
    kv_heads_own: tuple[int, ...] = ()

    @property
    def processed_here(self) -> tuple[str, ...]:
        """The steps compscope applied after reading. A step named ``source:step`` was done by the
        model's source (TransformerLens) before: the model that runs holds it too."""
        return tuple(p for p in self.processing if ":" not in p)


@dataclass(frozen=True)
class HeadWeights:
    """Canonical per-head attention weights of a model (see the module docstring)."""

    W_Q: Tensor  # (layer, head, d_head, d_model)
    W_K: Tensor  # (layer, kv_head, d_head, d_model)
    W_V: Tensor  # (layer, kv_head, d_head, d_model)
    W_O: Tensor  # (layer, head, d_model, d_head)
    b_Q: Tensor | None  # (layer, head, d_head)
    b_K: Tensor | None  # (layer, kv_head, d_head)
    b_V: Tensor | None  # (layer, kv_head, d_head)
    b_O: Tensor | None  # (layer, d_model)
    W_E: Tensor  # (d_model, n_vocab)
    W_pos: Tensor | None  # (d_model, n_ctx), learned absolute positions only
    W_U: Tensor | None  # (n_vocab, d_model)
    b_U: Tensor | None  # (n_vocab,)
    kv_map: tuple[int, ...]  # query head -> K/V head
    attn_norm: Norm | None  # the norm whose output the heads read
    final_norm: Norm | None  # before the unembedding
    norm_placement: Literal["pre", "post", "none"]
    # norms of q and k (Gemma 3, Qwen3: per head; OLMo-2: per layer); gains (L, d_head), or (L, heads * d_head):
    # a layer-wide norm's, or per-head norms each with its own gain (StableLM)
    qk_norm: tuple[Norm, Norm] | None = None
    qk_norm_scope: Literal["head", "layer"] = "head"  # what one RMS spans: one head, or all heads of a layer
    qk_norm_layers: tuple[bool, ...] = ()  # per layer, whether QK-norm applies there (Llama 4); (): every layer
    attn_out_norm: Norm | None = None  # on the attention output before the residual add (Gemma 2, Gemma 3)
    # gated attention (Qwen3-Next, Qwen3.5): each head's z times sigmoid(W_G x + b_G) of the query's input, before W_O
    W_G: Tensor | None = None  # (layer, head, d_head, d_model)
    b_G: Tensor | None = None  # (layer, head, d_head)
    # each value head RMS-normalised before W_O (Gemma 4): v = N(W_V x + b_V); gain (L, d_head) or none
    v_norm: Norm | None = None
    # multi-head latent attention (DeepSeek-V2, V3): the queries times s_q(x) of q_latent's norm, the values and the
    # keys' dims from kv_latent_from on (each key's unrotated part; before it, the rotated part every head shares)
    # times s_kv(x) of kv_latent's (LatentNorm); None: no latent norm on that side
    q_latent: LatentNorm | None = None
    kv_latent: LatentNorm | None = None
    kv_latent_from: int = 0
    rotary: Rotary | None = None
    positions: str = "none"  # 'learned', 'rotary', 'alibi', 'relative', 'none'
    alibi: Tensor | None = None  # (head,) ALiBi slopes m_h >= 0: logit - m_h |i - j| for query i, key j (Bloom)
    # DeBERTa's disentangled attention: position queries and keys of each layer, head and relative-position row,
    # which no residual enters; the logit of query i and key j adds q_i · pos_K[ρ(i - j)] (content to position) and
    # k_j · pos_Q[ρ(i - j)] (position to content) to q_i · k_j, all times `scale` (ρ: core.attention.relative_index)
    pos_Q: Tensor | None = None  # (layer, head, 2k, d_head)
    pos_K: Tensor | None = None  # (layer, head, 2k, d_head)
    rel_buckets: tuple[int, int] = (0, 0)  # (bucket size, max position) of ρ's log-spaced buckets; (0, 0): none
    # a learned bias on the logits by offset bucket (MPNet; T5's bidirectional buckets): logit + rel_bias[l, h, β(i - j)]
    # after the scale, β: core.attention.bias_bucket over rel_bias_buckets = (number of buckets, max distance)
    rel_bias: Tensor | None = None  # (layer, head, buckets)
    rel_bias_buckets: tuple[int, int] = (0, 0)
    # (layer, head) attention-sink logits: one more key per query, with no value (gpt-oss); -inf: no sink on that
    # layer (MiMo-V2-Flash's global layers)
    sinks: Tensor | None = None
    attn_scale: float = 0.0  # logit = attn_scale * q·k; 0 means d_head ** -0.5
    attn_softcap: float | None = None  # logit -> c tanh(logit / c) before the mask and softmax (Gemma 2)
    causal: bool = True
    # a first layer that reads the residual itself where the others read a norm's output: pre-LN ModernBERT (a
    # LayerNorm on the embeddings made that residual), post-LN GPT-1 (no norm made it); attn_norm's row 0 unread
    first_layer_unnormed: bool = False
    sliding_window: tuple[int | None, ...] = ()  # per layer; None: full attention
    embed_extra: dict[str, Tensor] = field(default_factory=dict)  # e.g. BERT token types
    meta: Meta = field(default_factory=lambda: Meta("unknown", "unknown", "unknown", "float32", "float32"))

    # ------------------------------------------------------------------ validation
    def __post_init__(self) -> None:
        L, H, r, d = self.W_Q.shape if self.W_Q.ndim == 4 else (None,) * 4
        if L is None:
            raise WeightError(f"W_Q must be (layer, head, d_head, d_model), got {tuple(self.W_Q.shape)}")
        if self.W_K.ndim != 4:
            raise WeightError(f"W_K must be (layer, kv_head, d_head, d_model), got {tuple(self.W_K.shape)}")
        G = self.W_K.shape[1]
        expect = {
            "W_K": (L, G, r, d),
            "W_V": (L, G, r, d),
            "W_O": (L, H, d, r),
            "b_Q": (L, H, r),
            "b_K": (L, G, r),
            "b_V": (L, G, r),
            "b_O": (L, d),
            "W_G": (L, H, r, d),
            "b_G": (L, H, r),
        }
        for name, shape in expect.items():
            t = getattr(self, name)
            if t is not None and tuple(t.shape) != shape:
                raise WeightError(f"{name} has shape {tuple(t.shape)}, expected {shape}")
        if self.W_E.ndim != 2 or self.W_E.shape[0] != d:
            raise WeightError(f"W_E has shape {tuple(self.W_E.shape)}, expected ({d}, n_vocab)")
        if self.W_pos is not None and (self.W_pos.ndim != 2 or self.W_pos.shape[0] != d):
            raise WeightError(f"W_pos has shape {tuple(self.W_pos.shape)}, expected ({d}, n_ctx)")
        if self.W_U is not None and (self.W_U.ndim != 2 or self.W_U.shape[1] != d):
            raise WeightError(f"W_U has shape {tuple(self.W_U.shape)}, expected (n_vocab, {d})")
        if self.b_U is not None and (self.W_U is None or tuple(self.b_U.shape) != (self.W_U.shape[0],)):
            raise WeightError(f"b_U has shape {tuple(self.b_U.shape)}, expected (n_vocab,)")
        if self.b_G is not None and self.W_G is None:
            raise WeightError("b_G without W_G: an output gate's bias needs its weights")
        if len(self.kv_map) != H or any(not _is_int(g) or not 0 <= g < G for g in self.kv_map):
            raise WeightError(f"kv_map {self.kv_map} does not map {H} query heads onto {G} K/V heads")
        own = self.meta.kv_heads_own
        if own and (len(own) != L or any(not _is_int(g) or g < 1 or G % g for g in own)):
            raise WeightError(f"meta.kv_heads_own {own}: expected one count per layer ({L}), each dividing the {G} "
                              "K/V heads held")
        if self.sinks is not None and tuple(self.sinks.shape) != (L, H):
            raise WeightError(f"sinks has shape {tuple(self.sinks.shape)}, expected {(L, H)}: one logit per layer and head")
        if self.qk_norm_layers:
            if len(self.qk_norm_layers) != L or any(not isinstance(f, bool) for f in self.qk_norm_layers):
                raise WeightError(f"qk_norm_layers {self.qk_norm_layers}: expected one true or false per layer ({L})")
            if self.qk_norm is None:
                raise WeightError("qk_norm_layers without qk_norm: the layers say where a QK-norm applies")
        if self.sliding_window and len(self.sliding_window) != L:
            raise WeightError(f"sliding_window lists {len(self.sliding_window)} layers, model has {L}")
        self._check_settings(L, r)
        for name, t in self._named_tensors():  # whatever built it: no score is computed from a NaN
            if not (sinks_valid(t) if name == "sinks" else all_finite(t)):
                bad = (~(torch.isfinite(t) | (t == float("-inf")) if name == "sinks" else torch.isfinite(t))).nonzero()
                raise WeightError(f"{self.meta.name}: {name} has {len(bad)} NaN/Inf values (the first at index "
                                  f"{tuple(bad[0].tolist())})")

    def _check_settings(self, L: int, r: int) -> None:
        """The non-tensor settings: what a corrupt description could set to anything."""
        if any(w is not None and (not _is_int(w) or w < 1) for w in self.sliding_window):
            raise WeightError(f"sliding_window {self.sliding_window}: each entry must be None or a positive integer")
        if self.norm_placement not in ("pre", "post", "none") or self.positions not in POSITIONS:
            raise WeightError(f"norm_placement {self.norm_placement!r} / positions {self.positions!r}: "
                              f"expected pre/post/none and {'/'.join(POSITIONS)}")
        if (self.alibi is not None) != (self.positions == "alibi"):
            raise WeightError(f"positions {self.positions!r} with{'' if self.alibi is not None else 'out'} ALiBi slopes: "
                              "slopes are given exactly when positions are 'alibi'")
        if self.alibi is not None:
            a = self.alibi
            if not isinstance(a, Tensor) or tuple(a.shape) != (self.n_heads,):
                raise WeightError(f"alibi has shape {tuple(getattr(a, 'shape', ()))}, expected ({self.n_heads},): "
                                  "one slope per query head")
            if not bool(torch.isfinite(a).all()) or bool((a < 0).any()):
                raise WeightError("alibi has NaN, infinite or negative slopes")
            if self.rotary is not None:
                raise WeightError("alibi and rotary positions together: a model has one kind of positions")
        self._check_relative(L, r)
        self._check_relative_bias(L)
        if not isinstance(self.causal, bool):
            raise WeightError(f"causal {self.causal!r}: expected true or false")
        if not isinstance(self.first_layer_unnormed, bool):
            raise WeightError(f"first_layer_unnormed {self.first_layer_unnormed!r}: expected true or false")
        if self.first_layer_unnormed and (self.norm_placement == "none" or self.attn_norm is None):
            raise WeightError("first_layer_unnormed: only a model whose other layers read a norm's output has a first "
                              f"layer that reads the residual without one (norm placement {self.norm_placement!r}, "
                              f"{'an' if self.attn_norm is not None else 'no'} attention norm)")
        if not is_finite_number(self.attn_scale) or self.attn_scale < 0:
            raise WeightError(f"attn_scale {self.attn_scale!r}: expected a finite number >= 0 (0: d_head ** -0.5)")
        if self.attn_softcap is not None and (not is_finite_number(self.attn_softcap) or self.attn_softcap <= 0):
            raise WeightError(f"attn_softcap {self.attn_softcap!r}: expected None or a finite number > 0")
        for name in ("attn_norm", "final_norm", "attn_out_norm", "v_norm"):
            _check_norm(getattr(self, name), name)
        self._check_latents(L, r)
        vn = self.v_norm
        for part in ("weight", "bias"):
            t = None if vn is None else getattr(vn, part)
            if t is not None and tuple(t.shape) != (L, r):
                raise WeightError(f"v_norm {part} has shape {tuple(t.shape)}, expected {(L, r)}: one row per layer, "
                                  "shared by its value heads")
        if self.qk_norm is not None:
            if len(self.qk_norm) != 2:
                raise WeightError(f"qk_norm holds {len(self.qk_norm)} norms, expected 2 (q and k)")
            if self.qk_norm_scope not in ("head", "layer"):
                raise WeightError(f"qk_norm_scope {self.qk_norm_scope!r}: expected 'head' or 'layer'")
            for n, which, heads in zip(self.qk_norm, "qk", (self.n_heads, self.n_kv_heads)):
                _check_norm(n, f"qk_norm ({which})")
                # scope 'head': one row for every head, or one per head side by side (StableLM)
                widths = (r * heads,) if self.qk_norm_scope == "layer" else (r, r * heads)
                for part in ("weight", "bias"):
                    t = getattr(n, part)
                    if t is not None and (t.ndim != 2 or t.shape[0] != L or t.shape[1] not in widths):
                        expected = " or ".join(str((L, w)) for w in widths)
                        raise WeightError(f"qk_norm ({which}) {part} has shape {tuple(t.shape)}, expected {expected} "
                                          f"(scope {self.qk_norm_scope!r})")
                if n.weight is not None and n.bias is not None and n.weight.shape != n.bias.shape:
                    raise WeightError(f"qk_norm ({which}): weight {tuple(n.weight.shape)} and bias {tuple(n.bias.shape)} "
                                      "differ in shape (both one row for every head, or both one per head)")
        rot = self.rotary
        if rot is not None:
            if not _is_int(rot.dim) or rot.dim <= 0 or rot.dim % 2 or rot.dim > r:
                raise WeightError(f"rotary dim {rot.dim!r}: expected a positive even integer <= d_head {r}")
            if rot.style not in ("half", "interleaved"):
                raise WeightError(f"rotary style {rot.style!r}: expected 'half' or 'interleaved'")
            f = rot.inv_freq
            if not isinstance(f, Tensor) or tuple(f.shape) != (L, rot.dim // 2):
                raise WeightError(f"rotary inv_freq has shape {tuple(getattr(f, 'shape', ()))}, expected {(L, rot.dim // 2)}")
            if not bool(torch.isfinite(f).all()) or bool((f < 0).any()):
                raise WeightError("rotary inv_freq has NaN, infinite or negative frequencies (a rope base of 0 or NaN?)")

    def _check_relative(self, L: int, r: int) -> None:
        """DeBERTa's position queries and keys, and their buckets (:func:`compscope.core.attention.relative_index`)."""
        given = [t for t in (self.pos_Q, self.pos_K) if t is not None]
        if given and self.positions != "relative":
            raise WeightError(f"positions {self.positions!r} with position queries or keys (pos_Q, pos_K): they are "
                              "given only when positions are 'relative'")
        if self.positions == "relative" and not given and self.rel_bias is None:
            raise WeightError("positions 'relative' without position queries, keys (pos_Q, pos_K) or a bias by offset "
                              "(rel_bias): nothing carries them")
        for name, t in (("pos_Q", self.pos_Q), ("pos_K", self.pos_K)):
            if t is not None and (not isinstance(t, Tensor) or t.ndim != 4 or tuple(t.shape[:2]) != (L, self.n_heads)
                                  or t.shape[3] != r or t.shape[2] < 2 or t.shape[2] % 2):
                raise WeightError(f"{name} has shape {tuple(getattr(t, 'shape', ()))}, expected ({L}, {self.n_heads}, "
                                  f"2k, {r}): an even number 2k of relative-position rows")
        rows = {t.shape[2] for t in given}
        if len(rows) > 1:
            raise WeightError(f"pos_Q and pos_K have {self.pos_Q.shape[2]} and {self.pos_K.shape[2]} relative-position "
                              "rows: expected the same offsets for both")
        b = self.rel_buckets
        if not _count_pair(b) or (b[0] == 0) != (b[1] == 0):
            raise WeightError(f"rel_buckets {b!r}: expected (bucket size, max position), both > 0, or (0, 0)")
        if b[0]:
            if rows != {2 * b[0]}:
                raise WeightError(f"rel_buckets {b!r}: {b[0]} buckets each side need 2 x {b[0]} relative-position rows "
                                  f"in pos_Q and pos_K, not {sorted(rows)}")
            if b[0] < 2 or b[1] - 1 <= b[0] // 2:
                raise WeightError(f"rel_buckets {b!r}: log-spaced buckets need a bucket size >= 2 and a max position "
                                  "above half the bucket size plus one")
        if given and (self.qk_norm is not None or self.rotary is not None or self.alibi is not None
                      or self.W_pos is not None):
            raise WeightError("position queries and keys (relative positions) with QK-norm, rotary, ALiBi or learned "
                              "absolute positions: a model has one kind of positions, and its queries no norm")

    def _check_relative_bias(self, L: int) -> None:
        """The learned bias by offset bucket and its buckets (:func:`compscope.core.attention.bias_bucket`)."""
        b, t = self.rel_bias_buckets, self.rel_bias
        if not _count_pair(b) or (t is None) != (b == (0, 0)):
            raise WeightError(f"rel_bias_buckets {self.rel_bias_buckets!r}: expected (number of buckets, max distance) "
                              "with a relative-position bias, (0, 0) without")
        if t is None:
            return
        n, far = b
        if not isinstance(t, Tensor) or tuple(t.shape) != (L, self.n_heads, n):
            raise WeightError(f"rel_bias has shape {tuple(getattr(t, 'shape', ()))}, expected ({L}, {self.n_heads}, "
                              f"{n}): one bias per layer, head and bucket")
        if n < 4 or n % 2 or far <= n // 4:
            raise WeightError(f"rel_bias_buckets {b}: expected an even number of buckets >= 4 and a max distance above "
                              "a quarter of them")
        if self.alibi is not None:
            raise WeightError("rel_bias with ALiBi slopes: a model has one kind of bias on its logits")

    # ------------------------------------------------------------------ sizes
    @property
    def n_layers(self) -> int:
        return self.W_Q.shape[0]

    @property
    def n_heads(self) -> int:
        return self.W_Q.shape[1]

    @property
    def n_kv_heads(self) -> int:
        return self.W_K.shape[1]

    @property
    def d_head(self) -> int:
        return self.W_Q.shape[2]

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[3]

    @property
    def n_vocab(self) -> int:
        return self.W_E.shape[1]

    @property
    def scale(self) -> float:
        """Multiplier of ``q·k`` in the attention logit."""
        return self.attn_scale or self.d_head**-0.5

    def qk_normed(self, layer: int) -> bool:
        """Whether ``layer``'s queries and keys pass through the QK-norm (``qk_norm_layers``)."""
        return self.qk_norm is not None and (not self.qk_norm_layers or self.qk_norm_layers[layer])

    @property
    def qk_norm_per_head(self) -> tuple[bool, bool]:
        """For the query and the key QK-norm: whether each head has its own gain (and bias), stored
        side by side as ``(L, heads * d_head)`` (StableLM's per-head LayerNorms), rather than one
        row for every head; False without a per-head QK-norm."""
        if self.qk_norm is None or self.qk_norm_scope != "head":
            return (False, False)
        r = self.d_head
        q, k = (any(t is not None and t.shape[-1] != r for t in (n.weight, n.bias)) for n in self.qk_norm)
        return (q, k)

    def _check_latents(self, L: int, r: int) -> None:
        """Multi-head latent attention's norms: ``W (layer, rank, d_model)``, ``b (layer, rank)``, a finite ``eps > 0``;
        ``kv_latent_from`` a key dim (``0 … d_head``)."""
        for name in ("q_latent", "kv_latent"):
            lat = getattr(self, name)
            if lat is None:
                continue
            if not isinstance(lat, LatentNorm) or not isinstance(lat.W, Tensor) or lat.W.ndim != 3 or \
                    lat.W.shape[0] != L or lat.W.shape[2] != self.d_model:
                raise WeightError(f"{name}.W has shape {tuple(getattr(getattr(lat, 'W', None), 'shape', ()))}, "
                                  f"expected ({L}, rank, {self.d_model})")
            if lat.b is not None and tuple(lat.b.shape) != tuple(lat.W.shape[:2]):
                raise WeightError(f"{name}.b has shape {tuple(lat.b.shape)}, expected {tuple(lat.W.shape[:2])}")
            if not is_finite_number(lat.eps) or lat.eps <= 0:
                raise WeightError(f"{name}.eps {lat.eps!r}: expected a finite number > 0")
        if not _is_int(self.kv_latent_from) or not 0 <= self.kv_latent_from <= r:
            raise WeightError(f"kv_latent_from {self.kv_latent_from!r}: expected a key dim from 0 to d_head ({r})")

    def logits(self, qk: Tensor) -> Tensor:
        """Attention logits from dot products ``q·k``: ``scale · q·k``, soft-capped to
        ``c tanh(ℓ / c)`` where the model caps them (``attn_softcap = c``)."""
        ell = self.scale * qk
        c = self.attn_softcap
        return ell if c is None else c * torch.tanh(ell / c)

    def n_attention_params(self) -> int:
        """Parameters of the attention layers (Q, K, V, O and their biases; no norms)."""
        ts = [self.W_Q, self.W_K, self.W_V, self.W_O, self.b_Q, self.b_K, self.b_V, self.b_O, self.W_G, self.b_G]
        return sum(t.numel() for t in ts if t is not None)

    # ------------------------------------------------------------------ per-head views
    def kv_expanded(self, name: Literal["W_K", "W_V", "b_K", "b_V"]) -> Tensor | None:
        """``W_K``/``W_V``/``b_K``/``b_V`` indexed by query head (a gather, shared heads repeat)."""
        t = getattr(self, name)
        return None if t is None else t[:, list(self.kv_map)]

    def W_OV(self, layer: int, head: int) -> LowRank:  # noqa: N802
        """``W_OV = W_O W_V`` (``d × d``, rank ≤ d_head), factored (:mod:`compscope.core.factors`)."""
        return head_circuit(self, layer, head, "W")

    def W_QK(self, layer: int, head: int, offset: float = 0) -> LowRank:  # noqa: N802
        """``W_QK = W_Q^T R(-δ) W_K`` (logit ``x_q^T W_QK x_k``), factored.

        ``offset δ = i - j``: query position minus key position (``δ ≥ 0`` in causal
        models). Without rotary the offset does not enter. With QK-norm (``qk_norm``) the
        logit is not bilinear in ``x``; this product ignores the norms (see ``meta.notes``)."""
        return head_circuit(self, layer, head, "K", offset=offset, dtype=self.W_Q.dtype)

    def replace(self, *, step: str | None = None, note: str | None = None, **changes) -> HeadWeights:
        """A copy with ``changes``; ``step`` is appended to ``meta.processing``."""
        meta = changes.pop("meta", self.meta)
        if step is not None:
            meta = dataclasses.replace(meta, processing=meta.processing + (step,))
        if note is not None and note not in meta.notes:
            meta = dataclasses.replace(meta, notes=meta.notes + (note,))
        return dataclasses.replace(self, meta=meta, **changes)

    @property
    def device(self) -> torch.device:
        """Where the tensors are (all on one device: :meth:`to`)."""
        return self.W_Q.device

    def to(self, device: str | torch.device) -> HeadWeights:
        """A copy with every tensor (norm gains, rotary frequencies and embeddings included) on
        ``device``, dtypes kept; ``self`` when it is already there. The data-based measures
        recompute attention from these where the model runs (:mod:`compscope.data.runner`)."""
        device = torch.device(device)
        if all(same_device(t.device, device) for t in self._tensors()):
            return self
        move = lambda t: None if t is None else t.to(device)  # noqa: E731

        def norm(n: Norm | None) -> Norm | None:
            return None if n is None else dataclasses.replace(n, weight=move(n.weight), bias=move(n.bias))

        changes = {f.name: move(getattr(self, f.name)) for f in dataclasses.fields(self)
                   if isinstance(getattr(self, f.name), Tensor)}
        changes.update(
            attn_norm=norm(self.attn_norm), final_norm=norm(self.final_norm), attn_out_norm=norm(self.attn_out_norm),
            v_norm=norm(self.v_norm), qk_norm=None if self.qk_norm is None else tuple(norm(n) for n in self.qk_norm),
            rotary=None if self.rotary is None else dataclasses.replace(self.rotary, inv_freq=move(self.rotary.inv_freq)),
            **{k: dataclasses.replace(lat, W=move(lat.W), b=move(lat.b))
               for k in ("q_latent", "kv_latent") if (lat := getattr(self, k)) is not None},
            embed_extra={k: move(v) for k, v in self.embed_extra.items()})
        moved = copy.copy(self)  # a move changes no value: the checks of __post_init__ are not run again
        for name, value in changes.items():
            object.__setattr__(moved, name, value)
        return moved

    def _tensors(self):
        """Every tensor held: the fields, the norms' gains and biases, the rotary frequencies and
        the extra embeddings."""
        return (t for _, t in self._named_tensors())

    def _named_tensors(self):
        """``(name, tensor)`` of every tensor held (:meth:`_tensors`), e.g. ``('attn_norm.weight', ...)``."""
        norms = {"attn_norm": self.attn_norm, "final_norm": self.final_norm, "attn_out_norm": self.attn_out_norm,
                 "v_norm": self.v_norm, **dict(zip(("q_norm", "k_norm"), self.qk_norm or ()))}
        yield from ((f.name, v) for f in dataclasses.fields(self) if isinstance(v := getattr(self, f.name), Tensor))
        yield from ((f"{k}.{part}", t) for k, n in norms.items() if n is not None
                    for part, t in (("weight", n.weight), ("bias", n.bias)) if t is not None)
        if self.rotary is not None and isinstance(self.rotary.inv_freq, Tensor):
            yield "rotary.inv_freq", self.rotary.inv_freq
        for k in ("q_latent", "kv_latent"):
            lat = getattr(self, k)
            if isinstance(lat, LatentNorm):
                yield from ((f"{k}.{part}", t) for part, t in (("W", lat.W), ("b", lat.b)) if isinstance(t, Tensor))
        yield from ((f"embed_extra[{k!r}]", v) for k, v in self.embed_extra.items())

    def __repr__(self) -> str:
        return (
            f"HeadWeights({self.meta.name!r}, family={self.meta.family}, layers={self.n_layers}, "
            f"heads={self.n_heads}, kv_heads={self.n_kv_heads}, d_model={self.d_model}, "
            f"d_head={self.d_head}, processing={list(self.meta.processing)})"
        )
