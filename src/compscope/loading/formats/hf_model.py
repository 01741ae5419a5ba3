"""An already-loaded ``transformers`` model object (its ``state_dict`` and config)."""

from __future__ import annotations

from ..checkpoint import Checkpoint, TensorStore
from ..quantized import check_scheme

#: config keys that only name the model; transformers' GGUF loader writes the second
_NAME_KEYS = ("_name_or_path", "_model_name_or_path")


def is_hf_model(obj: object) -> bool:
    return hasattr(obj, "config") and hasattr(obj.config, "to_dict") and hasattr(obj, "state_dict") and hasattr(obj, "base_model_prefix")


def from_hf_model(model, tensors: dict | None = None, where: str | None = None) -> Checkpoint:
    """The checkpoint of ``model``: its config and ``tensors`` (default: its ``state_dict``)."""
    cfg = model.config.to_dict()
    where = where or f"{type(model).__name__} object"
    name = next((cfg[k] for k in _NAME_KEYS if cfg.get(k)), None) or cfg.get("model_type", "model")
    cfg.pop("_model_name_or_path", None)  # a name, not a setting (families ignore '_name_or_path')
    cfg["architectures"] = [type(model).__name__]  # what this object is, not what the file it came from held
    window = cfg.get("sliding_window")
    both_ways = cfg.get("use_bidirectional_attention") in (True, "all")  # ("vision": image tokens alone; text causal)
    if both_ways and window and window == getattr(model.config, "sliding_window", None):
        # (EmbeddingGemma) transformers halves the stated window as it builds the config (keys on both sides of the
        # query); 5 writes the stated one back in to_dict, 4 the halved one: put back a window that halves to it
        cfg["sliding_window"] = (window - 1) * 2
    block, notes = check_scheme(cfg, where)
    sd = {k: v.detach() for k, v in (model.state_dict() if tensors is None else tensors).items()}
    return Checkpoint(cfg, TensorStore.from_dict(sd, where).dequantised(block), where, str(name), notes)


def recognise(source: object) -> bool:
    return is_hf_model(source)


def read(model):
    from ..families import to_heads

    return to_heads(from_hf_model(model))
