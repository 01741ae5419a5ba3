"""What ``transformers`` is given to run a GGUF file as the model compscope read from it: the settings its
GGUF reader drops, handed back; the files it cannot run as they are, refused by name."""

from __future__ import annotations

from pathlib import Path

from ....errors import UnsupportedModelError
from .files import open_shards
from .metadata import ARCHS, NO_MODEL, config

#: HF model types whose rotary base and width transformers' GGUF reader does not take from the file
#: (it keeps its config defaults: base 10 000; StableLM a quarter of each head; Nemotron its width, half
#: of each head; Phi-3 the whole head, where Phi-4-mini rotates three quarters): handed back, the share of each
#: head as :func:`.metadata.config` read it (whole heads where the file states no width, as llama.cpp takes them)
_ROTARY_DROPPED = ("stablelm", "starcoder2", "nemotron", "phi3")
#: HF config keys that transformers' GGUF reader does not take from a file of these model types
#: (Nemotron: the LayerNorm epsilon, which it looks for under another key than llama.cpp writes, and
#: the head width; Gemma 2: the logit scale's scalar and the soft cap; Qwen3: the head width, whose default
#: is d_model / n_heads; Llama and Qwen3: the ``attention_bias`` switch, off by default, so that transformers would
#: build the model without the q/k/v/o biases a file holds), so that it keeps its defaults: handed back where the
#: file states them (the bias switch: as :data:`.metadata._BIAS_SWITCHES` reads it from the tensors)
_KEYS_DROPPED = {"nemotron": ("norm_eps", "head_dim"),
                 "gemma2": ("query_pre_attn_scalar", "attn_logit_softcapping"),  # (27B's scalar: d_model / heads)
                 "qwen3": ("head_dim", "attention_bias"),  # (Qwen3-0.6B's, 4B's and 32B's heads: not d_model / n_heads)
                 "llama": ("attention_bias",)}
#: GGUF architectures transformers' GGUF reader lists and does not run as the file states them: why
_NOT_RUN = {"gemma4": ("transformers' GGUF reader takes one K/V head count (the per-layer counts llama.cpp writes "
                       "fail its config) and leaves the layer output scales out (layer_scalar stays 1)"),
            "deci": ("transformers' GGUF reader names it, but transformers has no model of the type it makes of it "
                     "(Nemotron-NAS and DeciLM run through their own code, which compscope does not run)")}


#: architectures whose rope scaling (YaRN, linear) transformers' GGUF reader drops and takes back as one setting for
#: every layer (Gemma's global-layer scaling, a setting per layer type, is not handed back)
_SCALING_HANDED_BACK = ("llama", "qwen2", "qwen2moe", "qwen3", "qwen3moe", "phi3")


def runtime_config(path: str | Path, rope_parameters: bool = True) -> dict:
    """Config settings to give ``transformers`` when it runs the GGUF file at ``path``: what the
    file says and transformers' GGUF reader drops (the rotary base and width of StableLM,
    StarCoder2 and Nemotron files, Nemotron's norm epsilon and head width, a Llama's or Qwen3's attention
    biases, a YaRN or linear rope scaling but gpt-oss's, Phi-3's LongRoPE and its original context, Gemma 3's
    layer types, logit scale and rotary settings), so that the model that runs is the one compscope read; as one
    ``rope_parameters`` (transformers 5) or, ``rope_parameters=False``, as ``rope_theta`` and
    (StableLM) ``partial_rotary_factor`` (transformers 4). A file transformers would build as
    another model (a Falcon with K/V groups), or not at all (a split file; an architecture its
    GGUF reader does not read: OLMo, Phi-2, GPT-NeoX, StarCoder 1, MPT, BERT, Qwen2-VL, Gemma 1, Granite and its
    hybrids, Cohere, SmolLM3), is refused."""
    files, fields, located = open_shards(Path(path))  # the headers only: no tensor is read
    _DIVIDES[_stamp(files[0])] = any(info.name == "rope_freqs.weight" for info, _, _ in located)
    if len(files) > 1:
        raise UnsupportedModelError(
            f"{path}: a GGUF file split in {len(files)} shards, and transformers runs a model from one GGUF file: the "
            f"data-based commands cannot run it (the weight-only ones read every shard); merge the shards into one "
            f"file (llama.cpp: llama-gguf-split --merge {files[0].name} merged.gguf) to run it on data")
    cfg, shape = config(files[0], fields, [info for info, _, _ in located], located)  # (no tensor loader built)
    arch = fields["general.architecture"]  # (the one config read)
    reads = transformers_reads()
    if arch in _NOT_RUN:
        raise UnsupportedModelError(
            f"{path}: a GGUF file of architecture {arch!r}: {_NOT_RUN[arch]}, so the data-based commands cannot run it "
            f"(the weight-only ones read it; {_for_data(cfg, shape.notes)})")
    if reads is not None and arch not in reads:
        raise UnsupportedModelError(
            f"{path}: a GGUF file of architecture {arch!r}, which transformers' GGUF reader does not read (it reads "
            f"{', '.join(sorted(a for a in reads if a in ARCHS))} among those compscope reads): the data-based commands "
            f"cannot run it (the weight-only ones read it; {_for_data(cfg, shape.notes)})")
    if arch in ("t5", "t5encoder"):
        _t5_runs(path, cfg, fields, {info.name for info, _, _ in located})
    if cfg["model_type"] == "falcon" and cfg["num_kv_heads"] > 1:
        raise UnsupportedModelError(
            f"{path}: transformers' GGUF reader builds every Falcon file as multi-query (one key/value head, as "
            f"Falcon-7B), and this one has {cfg['num_kv_heads']}: transformers cannot run it, so the data-based "
            "commands cannot either (the weight-only ones read it; for data, use the model's HuggingFace folder)")
    kind = cfg["model_type"]
    if arch == "gemma3":
        return _gemma3_runtime(path, cfg, rope_parameters)
    kept = {k: cfg[k] for k in _KEYS_DROPPED.get(kind, ()) if k in cfg}
    scaled = cfg.get("rope_scaling") if arch in _SCALING_HANDED_BACK else None  # (gpt-oss's: its reader takes it; a
    scaled = scaled if scaled and scaled.get("rope_type") in ("yarn", "linear", "longrope") else None  # per-layer-type
    if scaled and scaled["rope_type"] == "longrope":  # rope: not) Phi-3's original context, a config key of its own
        kept["original_max_position_embeddings"] = cfg["original_max_position_embeddings"]
    if kind not in _ROTARY_DROPPED and scaled is None:
        return kept
    rope = {"rope_theta": float(cfg.get("rope_theta", 10000.0))}
    if kind in _ROTARY_DROPPED:
        rope["partial_rotary_factor"] = float(cfg.get("partial_rotary_factor", 1.0))
    if rope_parameters:
        return {"rope_parameters": {"rope_type": "default", **rope, **(scaled or {})}, **kept}
    if kind == "starcoder2":  # transformers 4's StarCoder2 rotates whole heads, and takes no share
        rope.pop("partial_rotary_factor")
    return {**rope, **({"rope_scaling": scaled} if scaled else {}), **kept}


def _gemma3_runtime(path: Path, cfg: dict, rope_parameters: bool) -> dict:
    """What transformers' GGUF reader leaves at Gemma 3's defaults and a file may state otherwise: the layer
    types (its pattern: every sixth global), the logit scale's ``query_pre_attn_scalar`` (256; the 27B model's is
    d_model / n_heads by llama.cpp's rule), the local layers' rotary base (10 000) and the global layers' rope
    scaling (the 4B model and up: linear, factor 8). As one ``rope_parameters`` per layer type (transformers 5),
    or ``rope_theta``, ``rope_local_base_freq`` and ``rope_scaling`` (transformers 4)."""
    from ...families.gemma import Gemma3

    types = Gemma3.layer_types(cfg, cfg["num_hidden_layers"], str(path))
    # (the global base is stated: metadata.config refuses a file without it, metadata._OWN_BASE)
    theta, local = float(cfg["rope_theta"]), float(cfg.get("rope_local_base_freq", 10000.0))
    scaling = cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type") != "linear":  # (the families refuse other types by name)
        raise UnsupportedModelError(f"{path}: Gemma 3 rope scaling {scaling.get('rope_type')!r} is not read")
    out = {"layer_types": types, "query_pre_attn_scalar": cfg["query_pre_attn_scalar"]}
    if rope_parameters:
        return {**out, "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": local},
                                           "full_attention": {"rope_type": "default", "rope_theta": theta,
                                                              **(scaling or {})}}}
    return {**out, "rope_theta": theta, "rope_local_base_freq": local, "rope_scaling": scaling or None}


#: per file (its :func:`_stamp`), whether it holds ``rope_freqs``: found as :func:`runtime_config` reads its header
_DIVIDES: dict[tuple, bool] = {}


def _stamp(path: Path) -> tuple:
    """A file as it is now: its resolved path, size and modification time."""
    st = path.stat()
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def divides_frequencies(path: str | Path) -> bool:
    """Whether the GGUF file at ``path`` holds llama.cpp's rotary frequency divisors (``rope_freqs``: Llama 3.1's
    scaling), which transformers' GGUF reader leaves out: the running model's frequencies are then set to the
    ones compscope read (the runner's :func:`~compscope.data.runner.hf.from_files`). From the headers alone, as
    :func:`runtime_config` read them where it did (the file unchanged since), else read again."""
    path = Path(path)
    known = _DIVIDES.get(_stamp(path))
    if known is not None:
        return known
    _, _, located = open_shards(path)
    return any(info.name == "rope_freqs.weight" for info, _, _ in located)


def why_not_run(arch: str) -> str | None:
    """Why transformers cannot run a GGUF file of architecture ``arch`` that its GGUF reader lists (:data:`_NOT_RUN`),
    or None."""
    return _NOT_RUN.get(arch)


def transformers_reads() -> set[str] | None:
    """The GGUF architectures the installed ``transformers`` reads (as llama.cpp names them; not those
    of :data:`_NOT_RUN`, which it reads as another model), or None when it does not say where compscope
    looks (then transformers says so itself when asked)."""
    try:
        from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES
    except ImportError:
        return None
    renamed = {"qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe", "gpt_oss": "gpt-oss",  # transformers' names of
               "minimax_m2": "minimax-m2"}  # llama.cpp's
    reads = {renamed.get(a, a) for a in GGUF_SUPPORTED_ARCHITECTURES} - set(_NOT_RUN)
    return reads | {"t5encoder"} if "t5" in reads else reads  # (it reads T5's encoder alone as t5)


def _for_data(cfg: dict, notes: tuple[str, ...]) -> str:
    """Where data-based runs of the model of a GGUF file (its config ``cfg``, its ``notes``) may come from instead: its
    HuggingFace folder, unless transformers has no model of it (remote code; a family whose folders run on none)."""
    from ...families import family_for

    family = family_for(cfg, "GGUF")
    if family.runs_on_data and family.model_types and not any(NO_MODEL in n for n in notes):
        return "for data, use the model's HuggingFace folder"
    return f"{NO_MODEL}, so no folder of it runs on data either"


def _t5_runs(path: Path, cfg: dict, fields: dict, names: set[str]) -> None:
    """Refuse a T5 file that transformers' GGUF reader would build as another model: it builds every one with a
    gated MLP (T5 v1.1's, Flan-T5's), and as UMT5 (a bias table in every layer) exactly when the file's name says
    umt5."""
    why = None
    if not any(n.endswith("ffn_gate.weight") for n in names):
        why = "it builds every T5 file with a gated MLP (is_gated_act), and this one's MLPs have no gate (T5 v1.0's)"
    elif (cfg["model_type"] == "umt5") != ("umt5" in str(fields.get("general.name") or "").lower()):
        why = ("it builds a T5 file as UMT5 (a bias table in every layer) exactly when general.name says umt5, and "
               f"this one's name ({fields.get('general.name')!r}) and bias tables disagree")
    if why:
        raise UnsupportedModelError(f"{path}: transformers' GGUF reader would run another model than this file's: "
                                    f"{why}; the data-based commands cannot run it (the weight-only ones read it; for "
                                    "data, use the model's HuggingFace folder)")
