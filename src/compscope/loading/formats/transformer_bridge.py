"""TransformerLens 4 ``TransformerBridge`` objects: a HuggingFace model wrapped in place.

The bridge keeps the HuggingFace modules it wraps (each bridge component holds its module as
``original_component``) and the HuggingFace config; only the module tree around them changes
(``_original_component`` levels, GPT-2's fused ``c_attn`` exposed as ``qkv`` with ``q``, ``k``,
``v`` views). Each bridge component records the HuggingFace name it wraps (``component.name``),
so walking the bridge gives back every wrapped parameter under its HuggingFace name. Those
tensors, with the wrapped model's config, go to the family that config names, exactly as a
loaded ``transformers`` model would: one converter per family, whatever wraps the model.

Nothing is written: tensors are detached, never copied back. The weights read are the ones the
bridge computes with now. ``enable_compatibility_mode()`` (and ``process_weights()``) rewrite
those weights in place, by default folding the norms into the weights that read them
(``fold_ln``), centring what writes to the residual (``center_writing_weights``) and the
unembedding (``center_unembed``), and folding value biases into the output bias
(``fold_value_biases``); TransformerLens does not record which of these were asked for, so a
processed bridge is recorded as ``transformer_lens_bridge:process_weights`` in
``meta.processing``, and a note says what its defaults do.
"""

from __future__ import annotations

import dataclasses

from ...core.heads import HeadWeights
from ...errors import UnsupportedModelError

#: what ``process_weights`` does with its default options (TransformerLens 4)
PROCESSING_NOTE = (
    "TransformerBridge weights processed in place (enable_compatibility_mode / process_weights); by default "
    "norm gains folded into W_Q/W_K/W_V (fold_ln), W_O, W_E, W_pos centred (center_writing_weights), W_U centred "
    "(center_unembed), value biases folded into b_O (fold_value_biases): scores describe the processed weights"
)


#: what is said of a processed bridge whose blocks are wrapped whole (no attention component to process)
OPAQUE_NOTE = ("TransformerBridge processed in place (enable_compatibility_mode / process_weights); its blocks are "
               "wrapped whole, so the processing reaches no attention weight: every tensor is read as the model "
               "computes with it")


def is_bridge(obj: object) -> bool:
    return type(obj).__name__ == "TransformerBridge" and hasattr(obj, "adapter") and hasattr(obj, "original_model")


def recognise(source: object) -> bool:
    return is_bridge(source)


def _wrapped(component) -> object | None:
    try:
        return component.original_component
    except (AttributeError, RuntimeError):
        return None


def hf_tensors(bridge) -> dict:
    """``{HuggingFace name: tensor}`` of every parameter and buffer the bridge's components wrap,
    read through the HF names the components record (``blocks`` lists through the adapter's)."""
    import torch.nn as nn

    mapping = bridge.adapter.component_mapping or {}
    tensors: dict = {}

    def take(module, path: str) -> None:
        for n, t in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
            if t is not None:
                tensors.setdefault(f"{path}.{n}", t)

    def walk(component, path: str) -> None:
        original = _wrapped(component)
        if original is not None:
            take(original, path)
            if not any(_wrapped(c) is not None for a, c in component.named_children() if a != "_original_component"):
                # an opaque component (RecurrentGemma's blocks): its HF module's tree is untouched, names and all
                for n, t in list(original.named_parameters()) + list(original.named_buffers()):
                    if t is not None and "_original_component" not in n:
                        tensors.setdefault(f"{path}.{n}" if path else n, t)
        for attr, child in component.named_children():
            if attr == "_original_component":
                continue
            if isinstance(child, nn.ModuleList):
                base = getattr(mapping.get(attr), "name", None)
                if not base:
                    continue
                for i, block in enumerate(child):
                    walk(block, f"{path}.{base}.{i}" if path else f"{base}.{i}")
                continue
            name = getattr(child, "name", None)
            if name and _wrapped(child) is not None:
                walk(child, f"{path}.{name}" if path else name)

    walk(bridge, "")
    return tensors


def _projections(bridge, hw: HeadWeights, where: str) -> dict:
    """``W_Q, W_K, W_V`` and their biases from the bridge's own stacked accessors (row convention,
    ``(layer, head, d_model, d_head)``, transposed here). Where attention is fused (GPT-2's
    ``c_attn``, NeoX's ``query_key_value``) the bridge computes with split ``q``, ``k``, ``v``
    copies, and weight processing rewrites only those, so the fused HuggingFace tensor can be stale."""
    out = {}
    for kind in "QKV":
        w = getattr(bridge, f"W_{kind}").detach().float().transpose(-1, -2)
        want = getattr(hw, f"W_{kind}")
        if tuple(w.shape) != tuple(want.shape):
            raise UnsupportedModelError(
                f"{where}: the bridge's W_{kind} has shape {tuple(w.shape)} (transposed), the wrapped model's "
                f"config gives {tuple(want.shape)}"
            )
        out[f"W_{kind}"] = w.contiguous()
        try:
            b = getattr(bridge, f"b_{kind}").detach().float()
        except AttributeError:  # bias-free projections: the bridge raises rather than return zeros
            b = None
        out[f"b_{kind}"] = b
    return out


def read(bridge) -> HeadWeights:
    from ..families import family_for, language_model, to_heads

    from .hf_model import from_hf_model

    hf = bridge.original_model
    if not hasattr(hf, "config") or not hasattr(hf.config, "to_dict"):
        raise UnsupportedModelError(f"TransformerBridge: the wrapped {type(hf).__name__} has no HuggingFace config")
    where = f"TransformerBridge({type(hf).__name__})"
    tensors = hf_tensors(bridge)
    if not tensors:
        raise UnsupportedModelError(f"{where}: no wrapped HuggingFace parameters found (adapter {type(bridge.adapter).__name__})")
    hw = to_heads(from_hf_model(hf, tensors, where))
    config, _ = language_model(hf.config.to_dict(), where)  # the bridge's own projections, as the family reads them
    family = family_for(config, where)
    opaque = hasattr(bridge, "blocks_with") and not bridge.blocks_with("attn")  # blocks without an attention bridge
    # (RecurrentGemma's): the HF modules compute with their own tensors, read above as they are
    if opaque:
        pass
    elif not family.per_layer_heads:
        hw = dataclasses.replace(hw, **family.projections_as_read(config, where, _projections(bridge, hw, where)))
    elif getattr(bridge, "_weights_processed", False):
        raise UnsupportedModelError(
            f"{where}: a processed bridge around a {family.name} model is not read: its layers' heads differ in width "
            "or K/V count, which TransformerLens's stacked projections cannot hold, and the processing rewrote them "
            "there; read the bridge before enable_compatibility_mode(), or the HuggingFace model")
    meta = hw.meta
    if getattr(bridge, "_weights_processed", False):
        meta = dataclasses.replace(meta, processing=meta.processing + ("transformer_lens_bridge:process_weights",),
                                   notes=meta.notes + ((OPAQUE_NOTE,) if opaque else (PROCESSING_NOTE,)))
    if getattr(bridge, "compatibility_mode", False):
        meta = dataclasses.replace(meta, notes=meta.notes + ("TransformerBridge in compatibility mode",))
    return dataclasses.replace(hw, meta=meta)
