"""A small transformer in compscope's canonical layout, for training and interventions.

Pre-norm (or norm-free) decoder: ``resid_0 = W_E[t] + W_pos[p]``, then per layer
``resid += Σ_h W_O^h softmax(mask(q_h·k_h / √r)) v_h`` (and ``+= MLP(norm(resid))`` when it has
MLPs), logits ``= W_U norm_f(resid)``. Optionally, as in Gemma 3, a QK-norm (``q_h ← norm(q_h)``,
``k_h ← norm(k_h)`` over each head's ``d_head`` entries, one gain per layer shared by its heads,
before the rotary rotation) and an attention-output norm (``resid += norm(Σ_h W_O^h …)``), both
of the model's norm kind. Head weights are stored exactly as ``HeadWeights``
holds them (``W_Q, W_K, W_V: (head, d_head, d_model)``, ``W_O: (head, d_model, d_head)``), so
:meth:`ToyTransformer.head_weights` copies nothing but the layout of the embeddings.

Hooks (for activation labels and interventions): ``forward(tokens, cache=dict)`` fills
``resid_pre.{l}``, ``pattern.{l}: (batch, head, q_pos, k_pos)``, ``head_out.{l}: (batch, pos,
head, d_model)``, ``attn_out.{l}`` (what the layer's attention adds to the residual: the sum of
its heads' outputs, normed when the model has an attention-output norm) and ``resid_final``; ``forward(tokens, edits={(l, h, kind): delta})`` adds
``delta: (batch, pos, d_model)`` to the residual read by head ``h`` of layer ``l`` through
``kind`` (``'Q'``, ``'K'`` or ``'V'``) only, before its norm — every other head reads the
clean residual; ``forward(tokens, adds={l: delta})`` adds ``delta`` to what layer ``l``'s heads
write into the residual, so that every later layer reads it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Literal, Mapping

import torch
from torch import Tensor, nn

from ..errors import OptionError, check_tokens
from ..core.heads import HeadWeights, Meta, Norm, Rotary


@dataclass(frozen=True)
class ToyConfig:
    """Shape and options of a toy transformer (all sizes positive; ``d_head`` even for rotary)."""

    n_layers: int = 2
    n_heads: int = 4
    d_model: int = 64
    d_head: int = 16
    d_vocab: int = 64
    n_ctx: int = 64
    positions: Literal["learned", "rotary"] = "learned"
    rotary_base: float = 10000.0
    norm: Literal["none", "layernorm", "rmsnorm"] = "none"
    norm_eps: float = 1e-5
    mlp: bool = False
    d_mlp: int = 256
    tied: bool = False
    init_scale: float = 1.0
    qk_norm: bool = False
    attn_out_norm: bool = False

    def __post_init__(self) -> None:
        for f in ("n_layers", "n_heads", "d_model", "d_head", "d_vocab", "n_ctx", "d_mlp"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise OptionError(f"toy config {f}={v!r}: expected a positive integer")
        if self.positions not in ("learned", "rotary"):
            raise OptionError(f"toy config positions={self.positions!r}: use 'learned' or 'rotary'")
        if self.positions == "rotary" and self.d_head % 2:
            raise OptionError(f"toy config d_head={self.d_head}: rotary positions need an even d_head")
        if self.norm not in ("none", "layernorm", "rmsnorm"):
            raise OptionError(f"toy config norm={self.norm!r}: use 'none', 'layernorm' or 'rmsnorm'")
        for f in ("qk_norm", "attn_out_norm"):
            if not isinstance(getattr(self, f), bool):
                raise OptionError(f"toy config {f}={getattr(self, f)!r}: expected true or false")
            if getattr(self, f) and self.norm == "none":
                raise OptionError(f"toy config {f}=True needs a norm kind: set norm to 'rmsnorm' or 'layernorm'")
        if not (self.init_scale > 0 and self.norm_eps > 0 and self.rotary_base > 1):
            raise OptionError("toy config: init_scale and norm_eps must be positive, rotary_base > 1")

    def to_dict(self) -> dict:
        return asdict(self)

    def matrix_entries(self) -> int:
        """How many entries the model's weight matrices hold (embeddings, ``W_Q, W_K, W_V, W_O``, the
        MLP's; not the norms' gains or the biases): ``V d (1 + untied) + n_ctx d (learned positions)
        + L (4 H r d + 2 d_mlp d (MLPs))``."""
        d, L = self.d_model, self.n_layers
        return (self.d_vocab * d * (1 + (not self.tied)) + (self.n_ctx * d if self.positions == "learned" else 0)
                + L * (4 * self.n_heads * self.d_head * d + (2 * self.d_mlp * d if self.mlp else 0)))

    @classmethod
    def from_dict(cls, d: Mapping) -> ToyConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise OptionError(f"toy config: unknown field(s) {', '.join(unknown)}")
        return cls(**d)


class _Norm(nn.Module):
    def __init__(self, kind: str, d: int, eps: float):
        super().__init__()
        self.kind, self.eps = kind, eps
        self.w = nn.Parameter(torch.ones(d))
        self.b = nn.Parameter(torch.zeros(d)) if kind == "layernorm" else None

    def forward(self, x: Tensor) -> Tensor:
        if self.kind == "layernorm":
            x = x - x.mean(-1, keepdim=True)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.w
        return x if self.b is None else x + self.b


class _Block(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        H, r, d = cfg.n_heads, cfg.d_head, cfg.d_model
        self.W_Q = nn.Parameter(torch.empty(H, r, d))
        self.W_K = nn.Parameter(torch.empty(H, r, d))
        self.W_V = nn.Parameter(torch.empty(H, r, d))
        self.W_O = nn.Parameter(torch.empty(H, d, r))
        self.ln1 = _Norm(cfg.norm, d, cfg.norm_eps) if cfg.norm != "none" else None
        self.q_norm = _Norm(cfg.norm, r, cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = _Norm(cfg.norm, r, cfg.norm_eps) if cfg.qk_norm else None
        self.ln_out = _Norm(cfg.norm, d, cfg.norm_eps) if cfg.attn_out_norm else None
        if cfg.mlp:
            self.ln2 = _Norm(cfg.norm, d, cfg.norm_eps) if cfg.norm != "none" else None
            self.W_in = nn.Parameter(torch.empty(cfg.d_mlp, d))
            self.b_in = nn.Parameter(torch.zeros(cfg.d_mlp))
            self.W_out = nn.Parameter(torch.empty(d, cfg.d_mlp))
            self.b_out = nn.Parameter(torch.zeros(d))


def _rotate_half(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate pairs ``(i, i + r/2)`` of ``x: (..., pos, r)`` by the angles in ``cos, sin: (pos, r/2)``."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class ToyTransformer(nn.Module):
    """The toy model (see the module docstring)."""

    def __init__(self, cfg: ToyConfig, seed: int = 0, init: bool = True):
        """``init``: draw the parameters from ``seed`` (:meth:`reset_parameters`); False leaves them
        uninitialised, for a state dict to fill or, on the meta device, for their shapes."""
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.W_E = nn.Parameter(torch.empty(cfg.d_vocab, d))  # row per token
        self.W_pos = nn.Parameter(torch.empty(cfg.n_ctx, d)) if cfg.positions == "learned" else None
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = _Norm(cfg.norm, d, cfg.norm_eps) if cfg.norm != "none" else None
        self.W_U = None if cfg.tied else nn.Parameter(torch.empty(cfg.d_vocab, d))
        # (on the CPU even where a module is built on the meta device for its shapes: a meta arange imports torch's
        # compiler, a second; the buffer is not in the state dict)
        inv = 1.0 / cfg.rotary_base ** (torch.arange(0, cfg.d_head, 2, dtype=torch.float64, device="cpu") / cfg.d_head)
        self.register_buffer("inv_freq", inv, persistent=False)
        if init:
            self.reset_parameters(seed)

    def reset_parameters(self, seed: int) -> None:
        """Gaussian init from ``seed``, in the order of ``named_parameters``: embeddings
        ``N(0, s²)`` (unit-size residual entries, needed without norms), every other matrix
        ``N(0, s²/fan_in)``, writers to the residual (``W_O``, ``W_out``) further divided by
        ``√(2·n_layers)``; ``s = init_scale``; norm gains 1, biases 0."""
        g = torch.Generator().manual_seed(seed)
        s, cfg = self.cfg.init_scale, self.cfg
        fan_in = {"W_Q": cfg.d_model, "W_K": cfg.d_model, "W_V": cfg.d_model, "W_U": cfg.d_model,
                  "W_in": cfg.d_model, "W_O": cfg.n_heads * cfg.d_head, "W_out": cfg.d_mlp}
        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if leaf == "w":
                p.data.fill_(1.0)
            elif leaf.startswith("b"):
                p.data.zero_()
            else:
                std = s / math.sqrt(fan_in.get(leaf, 1))
                if leaf in ("W_O", "W_out"):
                    std /= math.sqrt(2 * cfg.n_layers)
                p.data.copy_(torch.randn(p.shape, generator=g) * std)

    # ------------------------------------------------------------------ forward
    def forward(
        self,
        tokens: Tensor,
        *,
        cache: dict | None = None,
        edits: Mapping[tuple[int, int, str], Tensor] | None = None,
        adds: Mapping[int, Tensor] | None = None,
    ) -> Tensor:
        """Logits ``(batch, pos, d_vocab)`` for ``tokens: (batch, pos)`` (see the module docstring)."""
        cfg = self.cfg
        B, T = check_tokens(tokens, "batch, pos", cfg.d_vocab, f"this toy model (d_vocab={cfg.d_vocab})").shape
        if T > cfg.n_ctx and cfg.positions == "learned":
            raise OptionError(f"sequence length {T} exceeds the model's n_ctx={cfg.n_ctx}")
        resid = self.W_E[tokens]
        if self.W_pos is not None:
            resid = resid + self.W_pos[:T]
        cos = sin = None
        if cfg.positions == "rotary":
            ang = torch.arange(T, dtype=torch.float64, device=tokens.device)[:, None] * self.inv_freq[None, :]
            cos, sin = ang.cos().to(resid.dtype), ang.sin().to(resid.dtype)
        mask = torch.ones(T, T, dtype=torch.bool, device=tokens.device).tril()
        edits, adds = dict(edits or {}), dict(adds or {})
        self._check_edits(edits, tuple(resid.shape))
        self._check_adds(adds, tuple(resid.shape))
        for layer, blk in enumerate(self.blocks):
            if cache is not None:
                cache[f"resid_pre.{layer}"] = resid
            xs = self._head_inputs(blk, resid, layer, edits)
            q = torch.einsum("hrd,bshd->bhsr", blk.W_Q, xs["Q"])
            k = torch.einsum("hrd,bshd->bhsr", blk.W_K, xs["K"])
            v = torch.einsum("hrd,bshd->bhsr", blk.W_V, xs["V"])
            if blk.q_norm is not None:
                q, k = blk.q_norm(q), blk.k_norm(k)
            if cos is not None:
                q, k = _rotate_half(q, cos, sin), _rotate_half(k, cos, sin)
            logits = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.d_head)
            pattern = logits.masked_fill(~mask, float("-inf")).softmax(-1)
            head_out = torch.einsum("hdr,bhsr->bshd", blk.W_O, pattern @ v)
            written = self.layer_write(layer, head_out.sum(2))
            if cache is not None:
                cache[f"pattern.{layer}"] = pattern
                cache[f"head_out.{layer}"] = head_out
                cache[f"attn_out.{layer}"] = written
            resid = resid + written
            if layer in adds:
                resid = resid + adds[layer]
            if cfg.mlp:
                x = resid if blk.ln2 is None else blk.ln2(resid)
                resid = resid + torch.nn.functional.gelu(x @ blk.W_in.T + blk.b_in) @ blk.W_out.T + blk.b_out
        if self.ln_f is not None:
            resid = self.ln_f(resid)
        if cache is not None:
            cache["resid_final"] = resid
        return resid @ self.unembedding.T

    def layer_write(self, layer: int, heads_sum: Tensor) -> Tensor:
        """What ``layer``'s attention adds to the residual for the sum of its heads' outputs
        ``(batch, pos, d_model)``: that sum, through the attention-output norm if there is one."""
        norm = self.blocks[layer].ln_out
        return heads_sum if norm is None else norm(heads_sum)

    def _head_inputs(self, blk: _Block, resid: Tensor, layer: int, edits) -> dict[str, Tensor]:
        """What each head reads per kind, ``(batch, pos, head, d_model)`` (broadcast when unedited)."""
        H = self.cfg.n_heads
        norm = (lambda x: x) if blk.ln1 is None else blk.ln1  # noqa: E731
        clean = norm(resid)[:, :, None, :].expand(-1, -1, H, -1)
        out = {}
        for kind in "QKV":
            mine = {h: t for (l, h, k), t in edits.items() if l == layer and k == kind}
            if not mine:
                out[kind] = clean
                continue
            x = resid[:, :, None, :].repeat(1, 1, H, 1)
            for h, delta in mine.items():
                x[:, :, h] = x[:, :, h] + delta
            out[kind] = norm(x)
        return out

    def _check_edits(self, edits: dict, shape: tuple[int, ...]) -> None:
        cfg = self.cfg
        for key, delta in edits.items():
            ok = (isinstance(key, tuple) and len(key) == 3 and 0 <= key[0] < cfg.n_layers
                  and 0 <= key[1] < cfg.n_heads and key[2] in ("Q", "K", "V"))
            if not ok:
                raise OptionError(f"edit {key!r}: keys are (layer < {cfg.n_layers}, head < {cfg.n_heads}, 'Q'|'K'|'V')")
            if tuple(delta.shape) != shape:
                raise OptionError(f"edit {key!r}: delta has shape {tuple(delta.shape)}, expected (batch, pos, d_model) = {shape}")

    def _check_adds(self, adds: dict, shape: tuple[int, ...]) -> None:
        for key, delta in adds.items():
            if not (isinstance(key, int) and 0 <= key < self.cfg.n_layers and isinstance(delta, Tensor)
                    and tuple(delta.shape) == shape):
                raise OptionError(f"adds: keys are layers < {self.cfg.n_layers}, values (batch, pos, d_model) = "
                                  f"{shape}; got {key!r}: {tuple(getattr(delta, 'shape', ()))}")

    @property
    def unembedding(self) -> Tensor:
        return self.W_E if self.W_U is None else self.W_U

    # ------------------------------------------------------------------ export
    def head_weights(self, name: str = "toy", source: str = "toy model") -> HeadWeights:
        """The canonical ``HeadWeights`` (float32 copies; MLPs are not part of it)."""
        cfg = self.cfg
        st = lambda n: torch.stack([getattr(b, n).detach() for b in self.blocks]).float().clone()  # noqa: E731
        L, r = cfg.n_layers, cfg.d_head
        attn_norm = final_norm = qk_norm = out_norm = None
        if cfg.norm != "none":
            def norm_of(mods):
                return Norm(cfg.norm, torch.stack([m.w.detach() for m in mods]).float().clone(),
                            None if mods[0].b is None else torch.stack([m.b.detach() for m in mods]).float().clone(),
                            cfg.norm_eps)
            attn_norm = norm_of([b.ln1 for b in self.blocks])
            final_norm = norm_of([self.ln_f])
            if cfg.qk_norm:  # one (d_head,) gain per layer, shared by its heads
                qk_norm = (norm_of([b.q_norm for b in self.blocks]), norm_of([b.k_norm for b in self.blocks]))
            if cfg.attn_out_norm:
                out_norm = norm_of([b.ln_out for b in self.blocks])
        rotary = None
        if cfg.positions == "rotary":
            rotary = Rotary(r, self.inv_freq.float()[None, :].expand(L, -1).clone(), "half")
        notes = ("MLP layers are not part of HeadWeights: composition through MLPs is not seen",) if cfg.mlp else ()
        return HeadWeights(
            W_Q=st("W_Q"), W_K=st("W_K"), W_V=st("W_V"), W_O=st("W_O"),
            b_Q=None, b_K=None, b_V=None, b_O=None,
            W_E=self.W_E.detach().T.float().clone(),
            W_pos=None if self.W_pos is None else self.W_pos.detach().T.float().clone(),
            W_U=self.unembedding.detach().float().clone(), b_U=None,
            kv_map=tuple(range(cfg.n_heads)), attn_norm=attn_norm, final_norm=final_norm,
            qk_norm=qk_norm, attn_out_norm=out_norm,
            norm_placement="pre" if cfg.norm != "none" else "none", rotary=rotary, positions=cfg.positions,
            attn_scale=1 / math.sqrt(r), causal=True, sliding_window=(None,) * L,
            meta=Meta("toy", source, name, "float32", "float32", (), notes),
        )
