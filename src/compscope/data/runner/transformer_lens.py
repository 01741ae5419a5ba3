"""TransformerLens models on data (``HookedTransformer``, ``HookedEncoder``, ``TransformerBridge``),
run through their own hook points."""

from __future__ import annotations

from torch import Tensor

from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError
from .base import Runner, float32_norms, model_device


class TransformerLensRunner(Runner):
    """A TransformerLens model (``HookedTransformer``, ``HookedEncoder``, or TransformerLens 4's
    ``TransformerBridge``), run with its own ``run_with_cache``: the residual each layer's attention
    reads and what that attention adds to the residual (after the post-attention norm where there
    is one); for a ``HookedEncoder`` (post-LN) also the sums its two norms take (``hook_resid_mid``,
    ``hook_resid_post``) and the norms themselves (``ln1``, ``ln2``)."""

    package = "transformer_lens"

    def __init__(self, model, hw: HeadWeights) -> None:
        from ...loading.formats.transformer_bridge import is_bridge
        from ...loading.formats.transformer_lens import is_hooked_encoder

        self.model, self.hw = model, hw
        self.device = model_device(model)
        # a bridge around a hybrid (LFM2's convolution layers, Jamba's Mamba ones): the blocks that attend
        attending = [(l, b) for l, b in enumerate(model.blocks) if not is_bridge(model) or hasattr(b, "attn")]
        n = len(attending)
        if is_bridge(model) and n == 0:
            raise UnsupportedModelError(
                f"{hw.meta.name}: TransformerBridge ({type(model.adapter).__name__}) wraps each block whole, with no "
                "attention component and so no hooks on what the heads read and add: the weight-only commands read "
                "it; run the data-based ones on the HuggingFace model it wraps (bridge.original_model)")
        if n != hw.n_layers:
            raise UnsupportedModelError(f"{hw.meta.name}: the running model has {n} layers, its HeadWeights "
                                        f"{hw.n_layers}: they are not the same model")
        self.tokenizer = getattr(model, "tokenizer", None)
        bos = getattr(self.tokenizer, "bos_token_id", None)
        prepend = getattr(model.cfg, "default_prepend_bos", True)
        self.bos = bos if isinstance(bos, int) and prepend and hw.causal else None
        n_ctx = getattr(model.cfg, "n_ctx", None)
        self.n_ctx = n_ctx if isinstance(n_ctx, int) else None
        self.norm_names = None
        if is_bridge(model) and hw.norm_placement == "post":
            self._post_ln_bridge(model)
        elif is_bridge(model):  # the norm's input (the attention's where it has none, OLMo-2), after the post-attention norm if any
            self.out_scale = bridge_residual_scale(model)
            self.divisors = bridge_residual_divisors(model)  # Gemma 4's layer scalars
            added = "attn.o.hook_out" if _returns_residual(hw, model) else "attn.hook_out"
            self.names = [(f"blocks.{l}.ln1.hook_in" if hasattr(b, "ln1") else f"blocks.{l}.attn.hook_in",
                           f"blocks.{l}.ln1_post.hook_out" if hasattr(b, "ln1_post") else f"blocks.{l}.{added}")
                          for l, b in attending]
        else:
            self.names = [(f"blocks.{l}.hook_resid_pre", f"blocks.{l}.hook_attn_out") for l in range(n)]
        if is_hooked_encoder(model):  # BertBlock: resid_mid = resid_pre + attn_out, ln1; resid_post = that + mlp_out, ln2
            self.norm_names = [(f"blocks.{l}.hook_resid_mid", f"blocks.{l}.hook_resid_post") for l in range(n)]
            self.post_norms = float32_norms([(b.ln1, b.ln2) for b in model.blocks])
        self.wanted = {name for pair in self.names + (self.norm_names or []) for name in pair}
        if not is_bridge(model):  # a block returns the residual it passes on
            self.layer_modules = list(model.blocks)

    def _post_ln_bridge(self, model) -> None:
        """A bridge around a post-LN encoder (BERT): the block's input is what attention reads, the
        output projection ``attn.o`` returns what it adds (before the residual and ``ln1``, which
        here is the post-attention norm, ``LN(h + Attn(h))``), and ``ln1``/``ln2`` take the sums the
        direct path passes through (the wrapped HuggingFace modules run them)."""
        blocks = list(model.blocks)
        if not all(hasattr(b, "ln1") and hasattr(b, "ln2") and hasattr(b.attn, "o") for b in blocks):
            raise UnsupportedModelError(f"{self.hw.meta.name}: a bridge around a post-LN model needs blocks with ln1, "
                                        "ln2 and attn.o to be run on data")
        self.names = [(f"blocks.{l}.hook_in", f"blocks.{l}.attn.o.hook_out") for l in range(len(blocks))]
        self.norm_names = [(f"blocks.{l}.ln1.hook_in", f"blocks.{l}.ln2.hook_in") for l in range(len(blocks))]
        self.post_norms = float32_norms([(getattr(b.ln1, "_original_component", b.ln1),
                                           getattr(b.ln2, "_original_component", b.ln2)) for b in blocks])

    #: what the residual receives is this multiple of the hooked attention output (Granite's
    #: residual_multiplier, Falcon-H1's attention_out_multiplier: in W_O), as the HF runner's
    out_scale = 1.0

    def _run(self, tokens: Tensor, add: dict[int, Tensor] | None = None) -> tuple:
        div = self.divisors or [1.0] * len(self.names)
        if add:
            m = self.out_scale
            hooks = [(self.names[i][1], lambda x, hook, d=d * (div[i] / m): x + d) for i, d in add.items()]
            with self.model.hooks(fwd_hooks=hooks):
                _, cache = self.model.run_with_cache(tokens, names_filter=lambda n: n in self.wanted)
        else:
            _, cache = self.model.run_with_cache(tokens, names_filter=lambda n: n in self.wanted)
        got = {name: cache[name] for name in self.wanted if name in cache.keys()}  # a block left out (trace's clean): None
        norm_in = None if self.norm_names is None else [(got[a], got[b]) if a in got else None for a, b in self.norm_names]
        outs = [None if (o := got.get(name)) is None else o * (self.out_scale / div[i])
                for i, (_, name) in enumerate(self.names)]
        resid = [None if (r := got.get(name)) is None else r / div[i] for i, (name, _) in enumerate(self.names)]
        return resid, outs, norm_in


def _returns_residual(hw: HeadWeights, bridge) -> bool:
    """Whether the attention a bridge wraps returns the residual plus what it adds (its family says:
    BLOOM's), so that the output projection ``attn.o`` is where the addition is read; refused by name
    where the bridge has no ``attn.o``."""
    from ...loading.families import FAMILIES

    if hw.meta.family not in FAMILIES.names() or not FAMILIES.get(hw.meta.family).attention_returns_residual:
        return False
    if not all(hasattr(b.attn, "o") for b in bridge.blocks):
        raise UnsupportedModelError(f"{hw.meta.name}: the {hw.meta.family} attention returns the residual with what it "
                                    "adds, and the bridge has no attn.o (its output projection) to read the addition from")
    return True


def is_transformer_lens(obj) -> bool:
    from ...loading.formats.transformer_bridge import is_bridge
    from ...loading.formats.transformer_lens import is_hooked_encoder, is_hooked_transformer

    return is_bridge(obj) or is_hooked_transformer(obj) or is_hooked_encoder(obj)


def bridge_residual_divisors(bridge) -> list[float] | None:
    """The family's :meth:`Family.residual_divisors` for the HuggingFace model a bridge wraps."""
    from ...loading.families import family_for, language_model

    where = f"TransformerBridge({type(bridge.original_model).__name__})"
    text = language_model(bridge.original_model.config.to_dict(), where)[0]
    return family_for(text, where).residual_divisors(bridge.original_model)


def bridge_residual_scale(bridge) -> float:
    """The family's :meth:`Family.residual_scale` for the HuggingFace model a bridge wraps."""
    from ...loading.families import family_for, language_model

    where = f"TransformerBridge({type(bridge.original_model).__name__})"
    text = language_model(bridge.original_model.config.to_dict(), where)[0]
    return family_for(text, where).residual_scale(text, where)
