"""DeepSeek-V3's multi-head latent attention (``deepseek_v3``: DeepSeek-V3, R1, V3.1; Kimi K2 and Moonlight, which
transformers builds as DeepSeek-V3, and Kimi K2.5's language model; GLM-4.7-Flash, ``glm4_moe_lite``; Youtu-LLM,
``youtu``; A.X K1, ``axk1``: the same attention under their own names; Sarvam-105B, ``sarvam_mla``, which transformers
builds as DeepSeek-V3), in Llama's pre-RMSNorm layers.

Per layer, from the normed residual ``x``:

- queries: ``q_h = U_h N_q(c_q)``, ``c_q = W_DQ x (+ b)`` a rank-``q_lora_rank`` latent (``q_a_proj``), ``N_q`` an
  RMSNorm with gain ``g_q`` (``q_a_layernorm``, eps 1e-6), ``U`` ``q_b_proj``; or ``q_proj`` itself where
  ``q_lora_rank`` is null;
- keys and values: ``c = W_DKV x (+ b)`` a rank-``kv_lora_rank`` latent (``kv_a_proj_with_mqa``'s first rows), normed by
  ``N_kv`` (``kv_a_layernorm``), then per head ``[k_nope_h | v_h] = kv_b_proj_h N_kv(c)``; the key's rotated part
  ``k_rope = W_KR x (+ b)`` (``kv_a_proj_with_mqa``'s last ``qk_rope_head_dim`` rows) is one for every head, unnormed;
- a head's key is ``[k_nope_h | k_rope]``, its query ``[q_nope_h | q_rope_h]``, the ``rope`` parts rotated (adjacent
  pairs where ``rope_interleave``, else halves) and the logit scaled by ``qk_head_dim^(-1/2)`` (times YaRN's
  ``mscale(factor, mscale_all_dim)²``).

An RMSNorm is linear but for its per-token scale, so compscope holds ``W_Q = U diag(g_q) W_DQ`` and likewise ``W_K``,
``W_V`` (products in float64), rotated rows first: ``W_K[h] = [W_KR ; U_K,h diag(g_kv) W_DKV]``; the two scales,
``s(x) = (mean c² + eps)^(-1/2)``, stay as ``HeadWeights.q_latent`` and ``kv_latent`` (the latents' ``W`` and bias,
applied to the queries, the values and the keys' unrotated dims: ``kv_latent_from = qk_rope_head_dim``), so the heads
recompute exactly. The weight-based scores read ``W_Q``, ``W_K``, ``W_V`` as they read any head's and do not see
those scales, as they do not see the residual norm's (the notes say so). Values narrower than a query head
(``v_head_dim < qk_head_dim``) are padded with zero rows (and ``W_O`` with zero columns), which changes no product.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from ..checkpoint import Checkpoint
from ...core.heads import HeadWeights, LatentNorm, Meta, Norm, Rotary
from ...errors import UnsupportedModelError
from . import register
from .base import (MAX_HEADS, MAX_LAYERS, YARN_TYPES, attending, checkpoint_notes, integer, inv_freq, number, prefix_of,
                   rope_accept_yarn, rope_attention_factor, rope_settings, unembedding, zero_padded)
from .llama import PREFIXES, LlamaLike, with_output_gates

#: the attention's projections (``q_proj`` where queries have no latent)
_PROJECTIONS = ("q_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
#: the latent norms' epsilon (transformers builds them at DeepseekV3RMSNorm's default, whatever the config says; a
#: GGUF file's, which llama.cpp runs at the file's RMS epsilon, says so as ``latent_norm_eps``)
LATENT_EPS = 1e-6
#: the mixture-of-experts MLPs' settings and the multi-token-prediction layers': the attention does not depend on them
_NOT_ATTENTION = frozenset(
    "moe_intermediate_size n_shared_experts n_routed_experts routed_scaling_factor n_group topk_group "
    "num_experts_per_tok first_k_dense_replace norm_topk_prob topk_method scoring_func aux_loss_alpha seq_aux "
    "ep_size num_nextn_predict_layers moe_layer_freq output_router_logits pretraining_tp".split())


def _mscale(factor: float, m: float) -> float:
    """YaRN's ``0.1 m ln(factor) + 1`` (1 for ``factor <= 1``)."""
    return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0


@register
class DeepseekV3(LlamaLike):
    name = "deepseek_v3"
    about = ("DeepSeek-V3 (R1, V3.1; Kimi K2 and K2.5's, Moonlight), GLM-4.7-Flash, Youtu-LLM, A.X K1: multi-head "
             "latent attention, its latent RMSNorms' gains folded into the heads and their per-token scales kept")
    model_types = ("deepseek_v3", "glm4_moe_lite", "youtu", "axk1")
    architectures = ("DeepseekV3ForCausalLM", "DeepseekV3Model", "Glm4MoeLiteForCausalLM", "Glm4MoeLiteModel",
                     "YoutuForCausalLM", "YoutuModel", "AXK1ForCausalLM", "AXK1Model")
    handled = frozenset("hidden_size num_attention_heads num_key_value_heads num_hidden_layers rms_norm_eps "
                        "q_lora_rank kv_lora_rank qk_rope_head_dim qk_nope_head_dim v_head_dim qk_head_dim head_dim "
                        "rope_interleave attention_bias rope_theta latent_norm_eps".split())
    ignored = LlamaLike.ignored | _NOT_ATTENTION | {"mlp_layer_types", "embedding_initializer_range"}
    accept = {"rope_parameters": rope_accept_yarn, "rope_scaling": rope_accept_yarn}

    @classmethod
    def rotary_style(cls, config: dict) -> str:
        """How the rotated dims pair up: adjacent pairs where ``rope_interleave`` (its default), else halves."""
        return "interleaved" if config.get("rope_interleave", True) else "half"

    @classmethod
    def rotary_width(cls, nope: int, rope: int) -> int:
        """The ``head_dim`` transformers sets where a config states none (its rotary embedding's width, before
        ``partial_rotary_factor``): the rotated dims here."""
        return rope

    #: whether a config without ``v_head_dim`` gives values ``hidden_size / heads`` wide (MiniCPM3's), or is refused
    value_width_default: ClassVar[bool] = False

    @classmethod
    def embed_scale(cls, config: dict, where: str) -> float:
        """What the model multiplies its token embeddings by: 1 here."""
        return 1.0

    @classmethod
    def logit_divisor(cls, config: dict, where: str) -> float:
        """What the model divides the last residual by before its LM head: 1 here."""
        return 1.0

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where, ts = ckpt.config, ckpt.source, ckpt.tensors
        cls.check_config(cfg, where)
        d = integer(cfg, where, "hidden_size")
        H = integer(cfg, where, "num_attention_heads", high=MAX_HEADS)
        n_model = cls.model_layers(cfg, where)
        read_layers = cls.attention_layers(cfg, n_model, where)  # (a hybrid's: some)
        L = len(read_layers)
        if integer(cfg, where, "num_key_value_heads", default=H) != H:
            raise UnsupportedModelError(f"{where}: config key 'num_key_value_heads' = {cfg['num_key_value_heads']!r}: "
                                        f"multi-head latent attention gives each of the {H} heads its own key")
        nope, rope = (integer(cfg, where, k) for k in ("qk_nope_head_dim", "qk_rope_head_dim"))
        dv = d // H if cfg.get("v_head_dim") is None and cls.value_width_default else integer(cfg, where, "v_head_dim")
        qk = nope + rope
        if cfg.get("qk_head_dim") is not None and integer(cfg, where, "qk_head_dim") != qk:  # (set from the others)
            raise UnsupportedModelError(f"{where}: config key 'qk_head_dim' = {cfg['qk_head_dim']!r} disagrees with "
                                        f"the head's qk_nope_head_dim + qk_rope_head_dim = {qk}")
        if rope % 2:
            raise UnsupportedModelError(f"{where}: qk_rope_head_dim = {rope}: rotated dims come in pairs")
        r_kv = integer(cfg, where, "kv_lora_rank")
        r_q = None if cfg.get("q_lora_rank") is None else integer(cfg, where, "q_lora_rank")
        biased = bool(cfg.get("attention_bias") or False)
        eps = number(cfg, where, "rms_norm_eps")
        latent_eps = number(cfg, where, "latent_norm_eps", default=LATENT_EPS, open_low=True)
        r = max(qk, dv)  # (the narrower of a query head and a value head padded with zero rows)

        notes: list[str] = []
        freqs, a, scale = cls.rotary_part(cfg, where, nope, rope, 0.0 if qk == r else qk ** -0.5, notes)

        names = [cls.attention_names(i) for i in read_layers]  # (each attention's module and its input norm's gain)
        probe = f"{names[0][0]}kv_a_proj_with_mqa.weight"
        prefix = prefix_of(ts, probe, PREFIXES)
        if prefix is None:
            raise UnsupportedModelError(f"{where}: no tensor named like '{probe}' (tried prefixes {PREFIXES}, "
                                        "each also with 'model.' after it)")

        # the projections' biases transformers builds (attention_bias: the latents' and the output's); any other a
        # file holds, it ignores
        built = {"q_a_proj", "kv_a_proj_with_mqa", "o_proj"} if biased else set()
        ignored = sorted({name for at, _ in names for name in _PROJECTIONS if name not in built
                          and f"{prefix}{at}{name}.bias" in ts})
        for at, _ in names:
            for name in ignored:
                ts.leave(f"{prefix}{at}{name}.bias")
        if ignored:
            notes.append(f"the biases of {', '.join(ignored)} not read: the file holds them, but transformers builds "
                         f"this {cls.name} model's projections without them (its config) and ignores the tensors")
        widths = _Widths(d, H, nope, rope, dv, r, r_q, r_kv, *cls.latent_scales(cfg, where))
        layers = [_read_layer(ts, prefix + at, prefix + norm, widths, a, biased) for at, norm in names]
        fields = {k: [layer[k] for layer in layers] for k in layers[0]}

        emb = ts.take(f"{prefix}embed_tokens.weight")
        if emb.ndim != 2 or emb.shape[1] != d:
            raise UnsupportedModelError(f"{ts.origin(f'{prefix}embed_tokens.weight')}: embed_tokens has shape "
                                        f"{tuple(emb.shape)}, expected (n_vocab, {d})")
        W_U, head_note = unembedding(ckpt, ["lm_head.weight", prefix + "lm_head.weight"], emb)
        embed, residual, divisor = (cls.embed_scale(cfg, where), cls.residual_scale(cfg, where),
                                    cls.logit_divisor(cfg, where))
        W_E = emb.T * embed if embed != 1.0 else emb.T
        if embed != 1.0:
            notes.append(f"W_E includes the embedding scale {embed:g}; W_U does not")
        if residual != 1.0:  # what each head adds to the residual: residual · W_O z (+ residual · b_O)
            fields["W_O"] = [w * residual for w in fields["W_O"]]
            fields["b_O"] = [None if b is None else b * residual for b in fields["b_O"]]
            notes.append(f"W_O (and b_O) include the residual multiplier {residual:g}: the residual receives that "
                         "multiple of the attention output")
        if divisor != 1.0 and W_U is not None:
            W_U = W_U / divisor
            notes.append(f"W_U includes the division of the last residual by {divisor:g} before the LM head")
        final = ts.take(f"{prefix}norm.weight", (d,), required=False)
        stack = lambda key: None if fields[key][0] is None else torch.stack(fields[key]).float()  # noqa: E731
        q_latent = None if r_q is None else LatentNorm(stack("dq"), stack("bdq"), latent_eps)
        notes = checkpoint_notes(ckpt, head_note) + notes + [
            "multi-head latent attention: W_Q, W_K and W_V are the products of each head's up-projection, its latent "
            "RMSNorm's gain and the latent's projection; the latent norms' per-token scales (on queries; on values and "
            "keys' unrotated dims) are applied where heads are recomputed, not in W_QK- or W_OV-based scores, as the "
            "residual norm's scale is not",
            f"keys: the {rope} {'rotated ' if freqs is not None else ''}dims come first and are one for every head "
            f"(k_rope{'' if freqs is not None else ', not rotated'}), the {nope} others each head's own"
            + (f"; values padded from {dv} to {r} dims with zeros" if dv < r else "")
            + (f"; queries and keys padded from {qk} to {r} dims with zeros" if qk < r else ""),
        ]
        if r_q is None:
            notes.append("queries read the input through q_proj (no query latent: q_lora_rank null)")
        if latent_eps != LATENT_EPS:
            notes.append(f"the latent norms' epsilon {latent_eps:g} (latent_norm_eps: the file's RMS epsilon, at which "
                         f"llama.cpp runs them; transformers runs them at {LATENT_EPS:g})")
        if L != n_model:
            notes.append(f"attention on {L} of the model's {n_model} layers ({', '.join(map(str, read_layers))}; "
                         f"compscope's layer k is the k-th of these): the others ({cls.other_layers}) write to the "
                         "residual too, and are not read")
        gates = cls.gates(ts, [f"{prefix}layers.{i}." for i in read_layers], H, r, d)
        hw = HeadWeights(
            W_Q=stack("W_Q"), W_K=stack("W_K"), W_V=stack("W_V"), W_O=torch.stack(fields["W_O"]),
            b_Q=stack("b_Q"), b_K=stack("b_K"), b_V=stack("b_V"),
            b_O=stack("b_O"),
            W_E=W_E, W_pos=None, W_U=W_U, b_U=None,
            kv_map=tuple(range(H)),
            attn_norm=Norm("rmsnorm", torch.stack(fields["g"]), None, eps),
            final_norm=None if final is None else Norm("rmsnorm", final[None], None, eps),
            norm_placement="pre",
            q_latent=q_latent,
            kv_latent=LatentNorm(stack("dkv"), stack("bdkv"), latent_eps),
            kv_latent_from=rope,
            rotary=None if freqs is None else Rotary(rope, freqs[None].expand(L, -1).clone(), cls.rotary_style(cfg)),
            positions="none" if freqs is None else "rotary",
            attn_scale=scale,
            causal=True,
            sliding_window=(None,) * L,
            meta=Meta(cls.name, where, ckpt.name, "float32", ts.source_dtypes, (), tuple(notes)),
        )
        return hw if gates is None else with_output_gates(hw, gates, per="per-head")

    @classmethod
    def gates(cls, ts, prefixes: list[str], H: int, r: int, d: int) -> list[torch.Tensor] | None:
        """Per layer read (its tensors under each of ``prefixes``), an output gate's ``W_G`` ``(head, d_head,
        d_model)``, or None where the heads have none (here)."""
        return None

    @classmethod
    def model_layers(cls, cfg: dict, where: str) -> int:
        """How many attention layers the model has where each layer has one (``num_hidden_layers``)."""
        return integer(cfg, where, "num_hidden_layers", high=MAX_LAYERS)

    @classmethod
    def attention_names(cls, i: int) -> tuple[str, str]:
        """Where attention layer ``i``'s tensors are, under the model's prefix: its module's (``…self_attn.``) and its
        input norm's gain."""
        return f"layers.{i}.self_attn.", f"layers.{i}.input_layernorm.weight"

    @classmethod
    def latent_scales(cls, cfg: dict, where: str) -> tuple[float, float]:
        """Constants the model multiplies the normed query and key/value latents by (folded into their gains): 1."""
        return 1.0, 1.0

    @classmethod
    def rotary_part(cls, cfg: dict, where: str, nope: int, rope: int, scale: float, notes: list[str]
                    ) -> tuple[torch.Tensor | None, float, float]:
        """The ``rope`` rotated dims' frequencies (None: not rotated), the attention factor on them (YaRN's: cos and
        sin times it) and the logit scale (``scale`` as given, or YaRN's ``qk_head_dim^(-1/2) mscale²``), from the
        rope settings of ``cfg``; what they change said in ``notes``."""
        settings = rope_settings(cfg)
        # transformers turns int(head_dim × partial_rotary_factor) dims: they must be the heads' rotated ones
        width = integer(cfg, where, "head_dim") if cfg.get("head_dim") is not None else cls.rotary_width(nope, rope)
        share = number(settings, where, "partial_rotary_factor", default=1.0, high=1.0, open_low=True)
        if int(width * share) != rope:
            raise UnsupportedModelError(f"{where}: head_dim = {width} and partial_rotary_factor = {share:g} turn "
                                        f"{int(width * share)} dims, not the heads' qk_rope_head_dim = {rope}")
        if settings.get("llama_4_scaling_beta"):  # (Mistral 4's queries; the data runner keeps within the context)
            n = number(settings, where, "original_max_position_embeddings", open_low=True)
            notes.append(f"queries scaled by 1 + {settings['llama_4_scaling_beta']:g} log(1 + floor(i / {n:g})) at "
                         f"position i (Llama 4's temperature): 1 on the first {n:g} positions, which is what is read")
        freqs = inv_freq(rope, settings, where, kinds=YARN_TYPES)
        a = rope_attention_factor(settings, where)  # on the rotated dims of queries and keys (cos and sin times it)
        if (settings.get("rope_type") or "default") != "default" and settings.get("mscale_all_dim"):
            m = _mscale(number(settings, where, "factor", open_low=True), number(settings, where, "mscale_all_dim"))
            scale = (nope + rope) ** -0.5 * m * m
            notes.append(f"the logit scale qk_head_dim^(-1/2) times YaRN's mscale(factor, mscale_all_dim)² = "
                         f"{m * m:.6g}")
        if settings.get("rope_type") == "yarn":
            notes.append(f"YaRN rope scaling (factor {settings['factor']:g}, original context "
                         f"{settings['original_max_position_embeddings']:g}): the slow pairs' frequencies interpolated"
                         + (f"; its attention factor {a:.6g} folded into the rotated rows of W_Q and W_K"
                            if a != 1 else ""))
        return freqs, a, scale


@dataclass(frozen=True)
class _Widths:
    """A layer's sizes: the residual, heads, a key's unrotated and rotated dims, a value's, the (padded) head width,
    the query latent's rank (None: no query latent) and the key/value latent's; the constants the normed latents are
    multiplied by (LongCat-Flash's)."""

    d: int
    H: int
    nope: int
    rope: int
    dv: int
    r: int
    r_q: int | None
    r_kv: int
    s_q: float = 1.0
    s_kv: float = 1.0


def _read_layer(ts, at: str, norm: str, w: _Widths, a: float, biased: bool) -> dict[str, torch.Tensor | None]:
    """One layer's heads from its attention's tensors under ``at`` (``…self_attn.``) and its input norm's gain
    ``norm``: ``W_Q``, ``W_K``, ``W_V``, ``W_O`` and their biases (float64 products, rotated rows first, YaRN's factor
    ``a`` on them, padded to ``w.r``), the input norm's gain ``g``, and the latents' projections and biases (``dq``,
    ``bdq``, ``dkv``, ``bdkv``; None where absent). The latents' constants ``w.s_q``, ``w.s_kv`` go with their
    gains."""
    H, d, nope, rope, r = w.H, w.d, w.nope, w.rope, w.r
    qk = nope + rope
    out: dict[str, torch.Tensor | None] = dict.fromkeys(("b_Q", "b_K", "b_V", "b_O", "dq", "bdq", "bdkv"))
    if w.r_q is None:
        Wq, bq = ts.take(at + "q_proj.weight", (H * qk, d)).double().reshape(H, qk, d), None
    else:
        out["dq"] = ts.take(at + "q_a_proj.weight", (w.r_q, d))
        out["bdq"] = ts.take(at + "q_a_proj.bias", (w.r_q,)) if biased else None
        g_q = ts.take(at + "q_a_layernorm.weight", (w.r_q,)).double() * w.s_q
        U = ts.take(at + "q_b_proj.weight", (H * qk, w.r_q)).double().reshape(H, qk, w.r_q) * g_q
        Wq = U @ out["dq"].double()
        bq = None if out["bdq"] is None else U @ out["bdq"].double()
    kv_a = ts.take(at + "kv_a_proj_with_mqa.weight", (w.r_kv + rope, d))
    g_kv = ts.take(at + "kv_a_layernorm.weight", (w.r_kv,)).double() * w.s_kv
    up = ts.take(at + "kv_b_proj.weight", (H * (nope + w.dv), w.r_kv)).double().reshape(H, nope + w.dv, w.r_kv) * g_kv
    W_dkv, W_kr = kv_a[:w.r_kv].double(), kv_a[w.r_kv:].double()
    # rows: the rotated dims first (every head's key shares W_KR's), then the rest; YaRN's factor on the rotated
    out["W_Q"] = zero_padded(torch.cat([Wq[:, nope:] * a, Wq[:, :nope]], 1), r)
    out["W_K"] = zero_padded(torch.cat([(W_kr * a).expand(H, rope, d), up[:, :nope] @ W_dkv], 1), r)
    out["W_V"] = zero_padded(up[:, nope:] @ W_dkv, r)
    out["dkv"] = kv_a[:w.r_kv]
    if biased:
        b_kv_a = ts.take(at + "kv_a_proj_with_mqa.bias", (w.r_kv + rope,))
        b_dkv, b_kr = b_kv_a[:w.r_kv].double(), b_kv_a[w.r_kv:].double()
        out["b_Q"] = None if bq is None else zero_padded(torch.cat([bq[:, nope:] * a, bq[:, :nope]], 1), r)
        out["b_K"] = zero_padded(torch.cat([(b_kr * a).expand(H, rope), up[:, :nope] @ b_dkv], 1), r)
        out["b_V"] = zero_padded(up[:, nope:] @ b_dkv, r)
        out["bdkv"] = b_kv_a[:w.r_kv]
        out["b_O"] = ts.take(at + "o_proj.bias", (d,))
    Wo = ts.take(at + "o_proj.weight", (d, H * w.dv)).reshape(d, H, w.dv).permute(1, 0, 2)
    out["W_O"] = torch.cat([Wo, Wo.new_zeros(H, d, r - w.dv)], 2) if r > w.dv else Wo
    out["g"] = ts.take(norm, (d,))
    return out


def _each(config: dict, where: str, key: str, values: tuple[str, ...], why: str) -> None:
    """Refuse, naming ``key`` and saying ``why``, a per-layer list in ``config`` with an entry not among ``values``."""
    listed = config.get(key)
    if listed is not None and (not isinstance(listed, list) or any(v not in values for v in listed)):
        raise UnsupportedModelError(f"{where}: config key '{key}' = {listed!r}: {why}")


@register
class DeepseekV2(DeepseekV3):
    """DeepSeek-V2 (V2-Lite, V2.5, Coder-V2): V3's attention, its rotated dims always in adjacent pairs (transformers
    turns them as complex numbers)."""

    name = "deepseek_v2"
    about = ("DeepSeek-V2 (V2-Lite, V2.5, Coder-V2): DeepSeek-V3's multi-head latent attention, rotated dims in "
             "adjacent pairs")
    model_types = ("deepseek_v2",)
    architectures = ("DeepseekV2ForCausalLM", "DeepseekV2Model")
    handled = DeepseekV3.handled - {"rope_interleave"}
    ignored = DeepseekV3.ignored | {"mlp_bias"}

    @classmethod
    def rotary_style(cls, config: dict) -> str:
        return "interleaved"


@register
class MiniCPM3(DeepseekV3):
    """MiniCPM3 (OpenBMB): DeepSeek-V2's attention with its rotated dims in halves, and muP's scalars where they act:
    the token embeddings times ``scale_emb``, each branch added to the residual times ``scale_depth / √layers``
    (folded into ``W_O``), the last residual divided by ``hidden_size / dim_model_base`` before the LM head (into
    ``W_U``)."""

    name = "minicpm3"
    about = ("MiniCPM3 (OpenBMB): DeepSeek-V2's multi-head latent attention with rotated halves, muP's embedding, "
             "residual and logit scalars folded")
    model_types = ("minicpm3",)
    architectures = ("MiniCPM3ForCausalLM", "MiniCPM3Model")
    handled = DeepseekV3.handled - {"rope_interleave"} | {"scale_emb", "scale_depth", "dim_model_base"}
    ignored = DeepseekV3.ignored | {"mlp_bias"}

    @classmethod
    def rotary_style(cls, config: dict) -> str:
        return "half"

    @classmethod
    def embed_scale(cls, config: dict, where: str) -> float:
        return number(config, where, "scale_emb", default=12.0)

    value_width_default = True

    @classmethod
    def residual_scale(cls, config: dict, where: str = "config") -> float:
        if "scale_depth" in config and config["scale_depth"] is None:  # (transformers: sqrt(layers), no scaling)
            return 1.0
        layers = integer(config, where, "num_hidden_layers", high=MAX_LAYERS)
        return number(config, where, "scale_depth", default=1.4) / math.sqrt(layers)

    @classmethod
    def logit_divisor(cls, config: dict, where: str) -> float:
        base = config.get("dim_model_base")
        d = integer(config, where, "hidden_size")
        return d / (d if base is None else integer(config, where, "dim_model_base", default=256))


@register
class Mistral4(DeepseekV3):
    """Mistral 4 (Mistral Small 4): DeepSeek-V3's attention, ``head_dim`` the whole query head and the rotated share
    ``partial_rotary_factor``, and Llama 4's query temperature (``llama_4_scaling_beta``), 1 within the original
    context, which is what is read (the data runner takes no longer sequences)."""

    name = "mistral4"
    about = ("Mistral 4 (Mistral Small 4): DeepSeek-V3's multi-head latent attention, Llama 4's query temperature "
             "within the original context")
    model_types = ("mistral4",)
    architectures = ("Mistral4ForCausalLM", "Mistral4Model")
    runs_as = {"mistral4": "Mistral4ForCausalLM"}  # (a folder of the language model alone: no auto class maps it)

    @classmethod
    def rotary_width(cls, nope: int, rope: int) -> int:
        return nope + rope


def _sarvam_as_deepseek_v3(cfg: dict, where: str) -> tuple[dict, list[str]]:
    """Sarvam-105B's first config format (written for its own code) as transformers turns it into DeepSeek-V3's, and
    what changed: ``q_head_dim`` dropped (it must be ``qk_nope_head_dim + qk_rope_head_dim``, what transformers derives),
    ``head_dim`` dropped (there ``kv_lora_rank + qk_rope_head_dim``; transformers derives ``qk_rope_head_dim``), and
    ``rope_scaling`` of type ``deepseek_yarn`` made the ``rope_parameters`` of YaRN, which it is."""
    out, changed = dict(cfg), []
    if out.get("q_head_dim") is not None:
        qk = integer(out, where, "qk_nope_head_dim") + integer(out, where, "qk_rope_head_dim")
        if integer(out, where, "q_head_dim") != qk:
            raise UnsupportedModelError(f"{where}: config key 'q_head_dim' = {out['q_head_dim']!r} disagrees with the "
                                        f"head's qk_nope_head_dim + qk_rope_head_dim = {qk}")
    out.pop("q_head_dim", None)
    if out.pop("head_dim", None) not in (None, out.get("qk_rope_head_dim")):
        changed.append(f"head_dim = {cfg['head_dim']!r} (the first format's kv_lora_rank + qk_rope_head_dim) not "
                       "read: transformers takes qk_rope_head_dim")
    scaling = out.get("rope_scaling")
    if isinstance(scaling, dict) and "deepseek_yarn" in (scaling.get("type"), scaling.get("rope_type")):
        del out["rope_scaling"]
        out["rope_parameters"] = {**{k: v for k, v in scaling.items() if k != "type"}, "rope_type": "yarn"}
        changed.append("rope_scaling of type 'deepseek_yarn' read as YaRN's rope_parameters, which it is")
    return out, changed


@register
class SarvamMla(DeepseekV3):
    """Sarvam-105B (``sarvam_mla``): DeepSeek-V3's attention, which transformers builds it as, from either config
    format: transformers' own, or the first one, translated as transformers translates it
    (:func:`_sarvam_as_deepseek_v3`); no query latent where ``q_lora_rank`` is absent (transformers' default here)."""

    name = "sarvam_mla"
    about = ("Sarvam-105B: DeepSeek-V3's multi-head latent attention, its first config format read as transformers "
             "translates it")
    model_types = ("sarvam_mla",)
    architectures = ("SarvamMLAForCausalLM",)
    handled = DeepseekV3.handled | {"q_head_dim"}
    ignored = DeepseekV3.ignored | {"num_experts", "num_shared_experts", "num_local_experts", "num_mtp_layers"}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, changed = _sarvam_as_deepseek_v3(ckpt.config, ckpt.source)
        hw = super().convert(dataclasses.replace(ckpt, config=cfg))
        return hw.replace(note="; ".join(changed)) if changed else hw


@register
class DeepseekV32(DeepseekV3):
    """DeepSeek-V3.2: V3's attention (a query latent always, rotated dims in adjacent pairs) behind DeepSeek Sparse
    Attention, an indexer that lets each query attend to its ``index_topk`` best-scored keys alone. On a sequence of at
    most ``index_topk`` tokens it selects every key, so the attention is V3's dense attention: that is what is read
    (the indexer's weights, which only select keys, are not), and the data runner takes no longer sequences."""

    name = "deepseek_v32"
    about = ("DeepSeek-V3.2: DeepSeek-V3's multi-head latent attention, read as the dense attention its sparse "
             "indexer leaves on sequences up to index_topk tokens")
    model_types = ("deepseek_v32",)
    architectures = ("DeepseekV32ForCausalLM", "DeepseekV32Model")
    handled = DeepseekV3.handled - {"rope_interleave"} | {"index_topk", "layer_types"}
    ignored = DeepseekV3.ignored | {"index_head_dim", "index_n_heads", "mlp_bias", "mlp_layer_types"}

    @classmethod
    def rotary_style(cls, config: dict) -> str:
        return "interleaved"

    @classmethod
    def exact_context(cls, config: dict, where: str = "config") -> int | None:
        """The indexer's ``index_topk``: on longer sequences it drops keys (and any rope scaling's own limit)."""
        topk = integer(config, where, "index_topk", default=2048)
        limit = super().exact_context(config, where)
        return topk if limit is None else min(topk, limit)

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        # ('deepseek_sparse_attention': the same layers as transformers 5.17 names them)
        _each(cfg, where, "layer_types", ("indexed_attention", "deepseek_sparse_attention"), "compscope reads "
              "DeepSeek-V3.2's layers of indexed attention alone")
        topk = integer(cfg, where, "index_topk", default=2048)
        return super().convert(ckpt).replace(note=(
            f"DeepSeek Sparse Attention: each query attends to the {topk} keys its indexer scores best, which on "
            f"sequences of at most {topk} tokens is every key: read as that dense attention (the indexer's weights "
            "not read); the data-based commands take sequences up to that length"))


class _LatentHybrid(DeepseekV3):
    """Multi-head latent attention layers among linear-attention (KDA) layers (``layer_types`` ``full_attention`` and
    ``linear_attention``): the former read alone, the others being writers to the residual as MLPs are."""

    other_layers = "linear-attention (KDA) layers"

    @classmethod
    def hook_points(cls, model):
        """The latent attention layers alone: ``input_layernorm`` reads the residual, ``self_attn`` returns what is
        added (a linear-attention layer's ``self_attn`` is of another kind)."""
        return [(b.input_layernorm, b.self_attn) for b in cls.base_model(model).layers
                if getattr(b, "block_type", None) == "full_attention"]

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        """The layers ``layer_types`` marks ``full_attention`` (the others ``linear_attention``)."""
        types = config.get("layer_types")
        if not isinstance(types, list) or len(types) != n_layers or any(
                t not in ("full_attention", "linear_attention") for t in types):
            raise UnsupportedModelError(f"{where}: config key 'layer_types' = {types!r}: expected one of "
                                        f"'full_attention' or 'linear_attention' for each of the {n_layers} layers")
        return attending([i for i, t in enumerate(types) if t == "full_attention"], n_layers, where,
                         "a linear-attention layer")


@register
class BailingHybrid(_LatentHybrid):
    """Ling 3 (inclusionAI's ``bailing_hybrid``): linear-attention layers (KDA) with a multi-head latent attention layer
    among them (``layer_types`` ``full_attention``: every ``layer_group_size``-th), read alone, the others being
    writers to the residual as MLPs are. Its latent attention is DeepSeek-V3's (rotated dims in adjacent pairs) with a
    gate on each head's output, ``sigmoid(g_proj x)``, one per head, from the query's input: ``W_G`` holds ``g_proj``'s
    row for the head on each of its dims. Its files name the layers' attention ``attention`` (the output projection
    ``attention.dense``) and the embedding ``word_embeddings``: read as the loaded model's names."""

    name = "bailing_hybrid"
    about = ("Ling 3: its multi-head latent attention layers alone (DeepSeek-V3's, a sigmoid gate per head), among "
             "linear-attention layers")
    model_types = ("bailing_hybrid",)
    architectures = ("BailingHybridForCausalLM", "BailingHybridModel")
    handled = DeepseekV3.handled - {"rope_interleave"} | {"layer_types"}
    ignored = DeepseekV3.ignored | frozenset(
        "num_shared_experts num_expert_group num_experts_per_token moe_renormalize model_max_length num_experts "
        "short_conv_kernel_size layer_group_size kda_safe_gate kda_lower_bound mlp_layer_types mtp_loss_scaling_factor "
        "linear_head_dim linear_num_heads linear_conv_kernel_dim expert_swiglu_limit_list "
        "share_expert_swiglu_limit_list swiglu_limits swiglu_limits_shared".split())  # (the last four: the experts'
    # clipping, transformers 5.25)
    # its files' names (as released, and as transformers saves them), read as the loaded model's
    saved_names = ((r"^model\.word_embeddings\.", "model.embed_tokens."),
                   (r"\.attention\.dense\.", ".self_attn.o_proj."), (r"\.attention\.", ".self_attn."))

    @classmethod
    def rotary_style(cls, config: dict) -> str:
        return "interleaved"

    @classmethod
    def gates(cls, ts, prefixes: list[str], H: int, r: int, d: int) -> list[torch.Tensor]:
        return [ts.take(p + "self_attn.g_proj.weight", (H, d))[:, None, :].expand(H, r, d).contiguous()
                for p in prefixes]


@register
class LongcatFlash(DeepseekV3):
    """LongCat-Flash (Meituan's ``longcat_flash``): each of its ``num_layers`` layers holds two pre-norm attention
    sublayers (``self_attn.0`` after ``input_layernorm.0``, ``self_attn.1`` after ``input_layernorm.1``), each followed
    by a dense MLP, and a mixture-of-experts MLP beside them that reads the residual after the first and writes after
    the second (a shortcut: another writer, as MLPs are). compscope's layer ``2i + j`` is layer i's sublayer j. Each
    is DeepSeek-V3's latent attention (rotated dims in adjacent pairs) with LoRA scaling: queries times
    ``sqrt(hidden_size / q_lora_rank)`` and the normed key/value latent times ``sqrt(hidden_size / kv_lora_rank)``
    (the keys' unrotated dims and the values), folded into the latent norms' gains."""

    name = "longcat_flash"
    about = ("LongCat-Flash: two multi-head latent attention sublayers per layer (DeepSeek-V3's, its LoRA scales "
             "folded), the shortcut mixture of experts between them not read")
    model_types = ("longcat_flash",)
    architectures = ("LongcatFlashForCausalLM", "LongcatFlashModel")
    handled = DeepseekV3.handled - {"rope_interleave"} | {"num_layers"}
    ignored = DeepseekV3.ignored | frozenset(
        "ffn_hidden_size expert_ffn_hidden_size moe_topk zero_expert_num zero_expert_type router_bias "
        "n_routed_experts routed_scaling_factor attention_method".split())
    accept = {**DeepseekV3.accept,  # (transformers applies the LoRA scales whatever these say: off is refused)
              **dict.fromkeys(("mla_scale_q_lora", "mla_scale_kv_lora"), lambda v: v in (None, True))}

    @classmethod
    def rotary_style(cls, config: dict) -> str:
        return "interleaved"

    @classmethod
    def model_layers(cls, cfg: dict, where: str) -> int:
        """Two attention sublayers in each of ``num_layers`` layers."""
        return 2 * integer(cfg, where, "num_layers", high=MAX_LAYERS // 2)

    @classmethod
    def attention_names(cls, i: int) -> tuple[str, str]:
        return f"layers.{i // 2}.self_attn.{i % 2}.", f"layers.{i // 2}.input_layernorm.{i % 2}.weight"

    @classmethod
    def latent_scales(cls, cfg: dict, where: str) -> tuple[float, float]:
        d = integer(cfg, where, "hidden_size")
        return (d / integer(cfg, where, "q_lora_rank")) ** 0.5, (d / integer(cfg, where, "kv_lora_rank")) ** 0.5

    @classmethod
    def hook_points(cls, model):
        """Each layer's two sublayers in turn: ``input_layernorm[j]`` reads the residual, ``self_attn[j]`` returns what
        is added."""
        base = cls.base_model(model)
        return [(b.input_layernorm[j], b.self_attn[j]) for b in base.layers[:base.config.num_layers] for j in (0, 1)]

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        if ckpt.config.get("q_lora_rank") is None:
            raise UnsupportedModelError(f"{ckpt.source}: config key 'q_lora_rank' is null: LongCat-Flash's queries "
                                        "always read a latent")
        hw = super().convert(ckpt)
        s_q, s_kv = cls.latent_scales(ckpt.config, ckpt.source)
        return hw.replace(note=(
            f"two attention sublayers per layer: compscope's layer 2i + j is layer i's sublayer j; the mixture of "
            f"experts beside them (read after sublayer 0, written after sublayer 1) and the dense MLPs not read; the "
            f"LoRA scales sqrt(hidden_size / rank) folded into the latent norms' gains (queries {s_q:.6g}, keys' "
            f"unrotated dims and values {s_kv:.6g})"))


@register
class KimiLinear(_LatentHybrid):
    """Kimi Linear (Moonshot AI's ``kimi_linear``): Kimi Delta Attention (KDA) layers with a multi-head latent attention
    layer among them, read alone, the others being writers to the residual as MLPs are. Which layers attend:
    ``layer_types``, else (as transformers derives it) ``linear_attn_config``'s ``full_attn_layers`` and ``kda_layers``,
    numbered from 1, else every fourth layer from the fifth. Its latent attention is DeepSeek-V3's without positions
    (NoPE, ``mla_use_nope``): the ``qk_rope_head_dim`` dims every head's key shares are not rotated, and nothing else
    in the model carries position (its KDA layers' order aside), so the heads are read without any; the logit scale
    ``qk_head_dim^(-1/2)``, the latent norms at 1e-6."""

    name = "kimi_linear"
    about = ("Kimi Linear: its multi-head latent attention layers alone (DeepSeek-V3's without positions), among Kimi "
             "Delta Attention layers")
    model_types = ("kimi_linear",)
    architectures = ("KimiLinearForCausalLM", "KimiLinearModel")
    handled = DeepseekV3.handled - {"rope_interleave"} | {"layer_types", "linear_attn_config"}
    ignored = DeepseekV3.ignored | frozenset(
        "mlp_layer_types linear_head_dim linear_num_heads linear_conv_kernel_dim num_experts num_experts_per_token "
        "num_shared_experts num_expert_group num_local_experts moe_renormalize moe_router_activation_func "
        "use_grouped_topk model_max_length "
        # (the model turns no dims: rope settings, if any, change nothing it computes)
        "rope_scaling rope_parameters".split())
    accept = {"mla_use_nope": lambda v: v in (None, True)}
    other_layers = "Kimi Delta Attention layers"

    @classmethod
    def attention_layers(cls, config: dict, n_layers: int, where: str = "config") -> list[int]:
        if config.get("layer_types") is None:
            config = {**config, "layer_types": _kimi_layer_types(config, n_layers, where)}
        return super().attention_layers(config, n_layers, where)

    @classmethod
    def rotary_part(cls, cfg: dict, where: str, nope: int, rope: int, scale: float, notes: list[str]
                    ) -> tuple[torch.Tensor | None, float, float]:
        """No rotation (NoPE): the shared dims are a key's like any other, and the logit scale is ``scale``."""
        notes.append("no positions (NoPE): the latent attention turns no dims, and the model adds no position to the "
                     "residual")
        return None, 1.0, scale


def _kimi_layer_types(config: dict, n_layers: int, where: str) -> list[str]:
    """Kimi Linear's layer kinds where its config lists none, as transformers derives them: from
    ``linear_attn_config``'s ``full_attn_layers`` and ``kda_layers`` (numbered from 1, every layer in one of them)
    where it has both, else every fourth layer from the fifth attending."""
    lin = config.get("linear_attn_config") or {}
    if not isinstance(lin, dict):
        raise UnsupportedModelError(f"{where}: config key 'linear_attn_config' = {lin!r} is not a dict")
    if "full_attn_layers" not in lin or "kda_layers" not in lin:
        return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n_layers)]
    full, kda = lin["full_attn_layers"], lin["kda_layers"]
    numbers = full + kda if isinstance(full, list) and isinstance(kda, list) else None
    if numbers is None or sorted(numbers) != list(range(1, n_layers + 1)):
        raise UnsupportedModelError(f"{where}: linear_attn_config's full_attn_layers = {full!r} and kda_layers = "
                                    f"{kda!r}: expected each of the {n_layers} layers, numbered from 1, in one of them")
    return ["full_attention" if i + 1 in full else "linear_attention" for i in range(n_layers)]


@register
class GlmMoeDsa(DeepseekV32):
    """GLM-5 (``glm_moe_dsa``): DeepSeek-V3.2's attention and sparse indexer under its own names, read as the dense
    attention the indexer leaves on sequences of up to ``index_topk`` tokens. Layers that reuse the previous layer's
    choice of keys (``indexer_types`` ``shared``) are refused: the data runner's stand-ins for the layers it leaves out
    would hand them none."""

    name = "glm_moe_dsa"
    about = ("GLM-5: DeepSeek-V3.2's multi-head latent attention, read as the dense attention its sparse indexer "
             "leaves on sequences up to index_topk tokens")
    model_types = ("glm_moe_dsa",)
    architectures = ("GlmMoeDsaForCausalLM", "GlmMoeDsaModel")
    handled = DeepseekV32.handled | {"indexer_types"}

    @classmethod
    def convert(cls, ckpt: Checkpoint) -> HeadWeights:
        cfg, where = ckpt.config, ckpt.source
        _each(cfg, where, "indexer_types", ("full",), "layers that reuse another layer's choice of keys ('shared') are "
              "not read")
        return super().convert(ckpt)
