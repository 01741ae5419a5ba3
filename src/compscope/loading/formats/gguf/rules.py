"""llama.cpp's rules for the architectures whose config is more than renamed metadata keys (T5, ModernBERT,
Llama 4, Gemma 4, Falcon-H1, AFMoE, Qwen3-Next and Qwen3.5, Nemotron-H, Nemotron-NAS, Phi-3.5-MoE, DeepSeek-V2 and V3,
Mistral 4, the hybrids' per-layer K/V head counts, GLM-4.5's prediction blocks): what it stores, and
what it takes without storing, written into the HF config the family reads."""

from __future__ import annotations

import re
from pathlib import Path

from ....errors import LoadError, UnsupportedModelError
from ...gguf_file import dequantize
from . import rope_scaling

#: what the notes of a file say where transformers has no model of its architecture (the runtime looks for it there)
NO_MODEL = "transformers has no model of it"
WEIGHTS_ONLY = "; weights only: " + NO_MODEL


def llama4(fields: dict, arch: str) -> dict:
    """Llama 4's settings as llama.cpp runs a file of it (none stored but the expert count): no rotary
    on every fourth layer, chunks of 8192 tokens on the others, the NoPE layers' query temperature
    (0.1, from position 8191), and the gainless QK-norm except in the 128-expert model (Maverick),
    which llama.cpp tells by its expert count."""
    return dict(no_rope_layer_interval=4, attention_chunk_size=8192, attn_temperature_tuning=True, floor_scale=8192,
                attn_scale=0.1, use_qk_norm=fields.get(f"{arch}.expert_count") != 128)


def t5(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> None:
    """T5's encoder config, under T5's own keys, from what llama.cpp's converter writes: the width, the encoder's
    block count, the head count and width (``attention.key_length``; the value width must be the same), the RMS
    norm's epsilon, the buckets of the bias by offset (``attention.relative_buckets_count``); the farthest distance
    of the buckets is not written: llama.cpp takes 128, as T5's configs do. A bias table in a block after the first
    is UMT5's (each layer its own): read as UMT5."""
    if any(re.fullmatch(r"enc\.blk\.([1-9]\d*)\.attn_rel_b\.weight", i.name) for i in infos):
        cfg["model_type"] = "umt5"
    head = cfg.pop("head_dim", None)
    value = fields.get(f"{arch}.attention.value_length", head)
    if head is None or value != head:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.key_length' = {head!r} and "
                                    f"'{arch}.attention.value_length' = {value!r}: T5's heads need one width, stated")
    rms, other = cfg.pop("rms_norm_eps", None), cfg.pop("layer_norm_epsilon", None)  # (the converter writes both)
    eps = other if rms is None else rms
    cfg.update(d_model=cfg.pop("hidden_size"), num_layers=cfg.pop("num_hidden_layers"),
               num_heads=cfg.pop("num_attention_heads"), d_kv=head, relative_attention_max_distance=128)
    cfg.pop("num_key_value_heads", None)
    if eps is not None:
        cfg["layer_norm_epsilon"] = eps
    buckets = fields.get(f"{arch}.attention.relative_buckets_count")
    if buckets is not None:
        cfg["relative_attention_num_buckets"] = buckets


def modern_bert(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> None:
    """ModernBERT's config from what llama.cpp's converter writes and its rules (``modern-bert``): the local
    layers' window ``sliding_window`` (HF's ``local_attention``: ``|i - j| <= w / 2``, llama.cpp's symmetric
    window), every ``sliding_window_pattern``-th layer from 0 global (default 3) or one flag per layer (true:
    local), no local layers without a window; the global layers' rotary base ``rope.freq_base`` (required,
    :data:`.metadata._OWN_BASE`), the local layers' ``rope.freq_base_swa`` (else the
    global one, as llama.cpp takes it); biases where the file holds them."""
    n, heads = cfg["num_hidden_layers"], cfg["num_attention_heads"]
    for key, same in (("num_key_value_heads", heads), ("head_dim", cfg["hidden_size"] // heads)):
        if cfg.get(key, same) != same:
            raise UnsupportedModelError(f"{path}: GGUF metadata gives {key} = {cfg[key]}, not {same}: ModernBERT's "
                                        "heads are d_model / n_heads wide, one key/value head each")
        cfg.pop(key, None)
    cfg["global_rope_theta"] = cfg.pop("rope_theta")
    cfg["local_rope_theta"] = cfg.pop("rope_local_base_freq", cfg["global_rope_theta"])
    window = cfg.pop("sliding_window", None)
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    cfg.pop("sliding_window_pattern", None)
    cfg.pop("layer_types", None)  # (both read here, as llama.cpp reads them for ModernBERT)
    if not window:  # llama.cpp: no local layers
        cfg["layer_types"] = ["full_attention"] * n
    elif isinstance(pattern, list):
        if len(pattern) != n:
            raise LoadError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' has {len(pattern)} "
                            f"flags for {n} layers")
        cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    elif pattern is not None:
        cfg["global_attn_every_n_layers"] = pattern
    if window:
        cfg["local_attention"] = window
    names = {i.name for i in infos}
    cfg["norm_bias"] = "token_embd_norm.bias" in names
    cfg["attention_bias"] = any(name.endswith("attn_qkv.bias") for name in names)


def jamba_period(path: Path, arch: str, n_layers: int, ssm_layers: set[int]) -> dict:
    """Jamba's ``attn_layer_offset`` and ``attn_layer_period`` from the layers that attend (those not in
    ``ssm_layers``): layer ``i`` attends where ``i % period == offset``, as transformers builds it; a set of
    attention layers no period and offset give is refused."""
    layers = [i for i in range(n_layers) if i not in ssm_layers]
    offset = layers[0] if layers else 0
    period = layers[1] - layers[0] if len(layers) > 1 else n_layers
    if not layers or offset >= period or layers != [i for i in range(n_layers) if i % period == offset]:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' puts attention on layers "
                                    f"{layers}, which no attn_layer_period and attn_layer_offset give (transformers "
                                    "builds an attention layer every period-th layer from the offset)")
    return {"attn_layer_offset": offset, "attn_layer_period": period}


def mtp_blocks(path: Path, arch: str, fields: dict) -> int:
    """How many multi-token-prediction blocks a GLM-4.5, GLM-5, Qwen3.5, Nemotron 3, EXAONE MoE, DeepSeek-V3,
    DeepSeek-V3.2, Mistral 4, MiMo-V2-Flash, Cohere 2 MoE or HY-V3 file holds after its last layer
    (``nextn_predict_layers``, counted in ``block_count``; llama.cpp's converter leaves DeepSeek-V3's out, and a file
    that keeps them says so); 0 for other architectures."""
    if arch not in ("glm4moe", "qwen3next", "qwen35", "qwen35moe", "nemotron_h_moe", "exaone-moe", "deepseek2",
                    "mistral4", "deepseek32", "glm-dsa", "mimo2", "cohere2moe", "hy_v3", "bailingmoe2", "bailingmoe3"):
        return 0
    n = fields.get(f"{arch}.nextn_predict_layers", 0)
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise LoadError(f"{path}: GGUF metadata '{arch}.nextn_predict_layers' = {n!r} is not a count")
    return n


def hybrid_layers(path: Path, arch: str, cfg: dict, fields: dict, counts: list) -> tuple[int, set[int]]:
    """A hybrid's layers from its per-layer K/V head counts (llama.cpp writes 0 for a Mamba layer):
    ``cfg`` gets ``layer_types``, the one K/V head count of its attention layers and whether they
    rotate (``rope.scaling.finetuned``, llama.cpp's flag for it: Bamba's do, Granite 4's do not);
    returns that count and the Mamba layers."""
    heads, ssm = kv_heads_per_layer(path, arch, cfg, counts, "a Mamba layer")
    rotates = fields.get(f"{arch}.rope.scaling.finetuned")
    if not isinstance(rotates, bool):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.scaling.finetuned' (llama.cpp's flag for whether "
                                    "this hybrid's attention rotates) is missing")
    cfg.update(layer_types=["mamba" if i in ssm else "attention" for i in range(len(counts))],
               position_embedding_type="rope" if rotates else "nope")
    return heads, ssm


def gemma4(path: Path, arch: str, cfg: dict, fields: dict, infos: list, n_kv) -> int:
    """Gemma 4's config from what llama.cpp writes (its ``Gemma4Model`` conversion): the sliding
    layers flagged per layer, their head width ``key_length_swa`` and the global layers'
    ``key_length``, a K/V head count per layer, the global layers' values from their keys where they
    have no ``attn_v`` (``attention_k_eq_v``), two rotary bases, layers sharing K/V, per-layer
    embeddings. The global layers written as a ``per_layer_config``; the rotary map of each layer type
    over its whole width (``rope_freqs``, which llama.cpp applies to the global layers alone, turns
    the proportional map's other pairs by nothing: the family divides by it). Returns the local
    layers' K/V head count."""
    def need(key: str):
        v = fields.get(f"{arch}.{key}")
        if v is None:
            raise LoadError(f"{path}: GGUF metadata '{arch}.{key}' is missing")
        return v

    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    if not isinstance(pattern, list) or len(pattern) != cfg["num_hidden_layers"]:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' = {pattern!r} is not one flag "
                        f"per layer ({cfg['num_hidden_layers']})")
    types = cfg["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    local, wide = need("attention.key_length_swa"), need("attention.key_length")
    counts = n_kv if isinstance(n_kv, list) else [n_kv] * len(types)
    kv = {t: sorted({k for k, u in zip(counts, types) if u == t}) for t in set(types)}
    if len(counts) != len(types) or any(len(v) != 1 for v in kv.values()):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {n_kv!r} is not one K/V "
                                    f"head count for the sliding layers and one for the global layers ({len(types)})")
    for key, width in (("rope.dimension_count_swa", local), ("rope.dimension_count", wide)):
        if fields.get(f"{arch}.{key}", width) != width:
            raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.{key}' = {fields[f'{arch}.{key}']} differs from "
                                        f"the head width {width} of those layers: not read")
    values = {int(m.group(1)) for i in infos if (m := re.match(r"blk\.(\d+)\.attn_v\.weight$", i.name))}
    full = [i for i, t in enumerate(types) if t == "full_attention"]
    if values & set(full) and set(full) - values:
        raise UnsupportedModelError(f"{path}: some global layers have attn_v and some do not; Gemma 4's either all "
                                    "have their own value projection or take the keys' (attention_k_eq_v)")
    g = kv.get("full_attention", kv.get("sliding_attention"))[0]
    cfg.update(head_dim=local, attention_k_eq_v=bool(full) and not values & set(full),
               num_key_value_heads=kv.get("sliding_attention", [g])[0],
               per_layer_config={str(i): {"head_dim": wide, "num_key_value_heads": g} for i in full},
               rope_parameters={"sliding_attention": {"rope_type": "default",
                                                      "rope_theta": cfg.pop("rope_local_base_freq", 10000.0)},
                                "full_attention": {"rope_type": "default", "rope_theta": need("rope.freq_base")}})
    cfg.pop("rope_theta", None)
    for key, hf in (("attention.shared_kv_layers", "num_kv_shared_layers"),
                    ("embedding_length_per_layer_input", "hidden_size_per_layer_input")):
        if fields.get(f"{arch}.{key}") is not None:
            cfg[hf] = fields[f"{arch}.{key}"]
    return cfg["num_key_value_heads"]


def kv_heads_per_layer(path: Path, arch: str, cfg: dict, counts: list, other: str) -> tuple[int, set[int]]:
    """A hybrid's one K/V head count (set in ``cfg``) and its layers without attention, from the
    count per layer llama.cpp writes (0 on ``other``, a layer without attention)."""
    heads = sorted({k for k in counts if k})
    if len(counts) != cfg["num_hidden_layers"] or len(heads) != 1 or not all(isinstance(k, int) for k in counts):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {counts!r} is not one "
                                    f"K/V head count, or 0 on {other}, per layer ({cfg['num_hidden_layers']})")
    cfg["num_key_value_heads"] = heads[0]
    return heads[0], {i for i, k in enumerate(counts) if not k}


def falcon_h1(path: Path, arch: str, fields: dict) -> str:
    """Falcon-H1 as llama.cpp's converter writes it: its muP multipliers folded into the tensors where they act
    (``attention_in_multiplier`` into the query, key and value weights, ``key_multiplier`` into the key weights,
    ``attention_out_multiplier`` into the output weights, ``embedding_multiplier`` into ``token_embd``,
    ``lm_head_multiplier`` into ``output``), none stored, so that its family reads them as 1; the logit scale
    ``d_head^-1/2`` (a stated ``attention.scale``, which llama.cpp would take instead, is refused). Returns the
    note saying so."""
    if f"{arch}.attention.scale" in fields:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.scale' = {fields[f'{arch}.attention.scale']!r}: "
                                    "Falcon-H1's logits are scaled by d_head^-1/2, and compscope reads no other scale "
                                    "for it")
    return ("the muP multipliers folded into the tensors by llama.cpp's converter (attention_in into W_Q, W_K and "
            "W_V, key into W_K, attention_out into W_O, embedding into W_E, lm_head into W_U): read as 1")


def afmoe(path: Path, arch: str, cfg: dict) -> str:
    """Arcee's AFMoE as llama.cpp runs a file of it, none of it stored but the window: every fourth layer global
    and without rotary, the others within ``attention.sliding_window`` and rotated (HF's
    ``global_attn_every_n_layers`` 4), and the embeddings times ``sqrt(d_model)`` (``mup_enabled``, whatever the
    model was converted from). Into ``cfg``; returns the note saying so. Without a window (none stated, or 0)
    llama.cpp attends over the whole sequence on every layer and still leaves every fourth unrotated, which no
    AFMoE config gives: refused."""
    if not cfg.get("sliding_window"):
        raise UnsupportedModelError(f"{path}: no GGUF metadata '{arch}.attention.sliding_window' (or 0): llama.cpp "
                                    "then runs every layer of an AFMoE file over the whole sequence and every fourth "
                                    "without rotary, which no AFMoE config gives (its unrotated layers are its global "
                                    "ones)")
    cfg.update(global_attn_every_n_layers=4, mup_enabled=True)
    return ("llama.cpp's rules for AFMoE, none stored: every fourth layer global without rotary, the embeddings "
            "times sqrt(d_model)")


def cohere2moe(path: Path, arch: str, cfg: dict, fields: dict) -> str | None:
    """Cohere 2 MoE as llama.cpp runs a file of it, into ``cfg``: the sliding layers from the per-layer flags its
    converter writes, else llama.cpp's rule for a period (``attention.sliding_window_pattern``, 4 where none is
    stated): layers 0, p, 2p, ... global, which is not transformers' rule (p − 1, 2p − 1, ...), so written out; rotary
    on the sliding layers and on each of the ``leading_dense_block_count`` dense first layers (transformers' prefix
    pattern 1); every layer at ``rope.freq_base`` (10 000 where none is stated), the graph's one base. Returns the note
    on a ``rope.freq_base_swa`` that graph does not use, or None."""
    n = cfg["num_hidden_layers"]
    if "layer_types" not in cfg:
        cfg["layer_types"] = _periodic_layers(path, arch, cfg.pop("sliding_window_pattern", 4), n, dense_first=True)
    lead = fields.get(f"{arch}.leading_dense_block_count", 0)
    if not isinstance(lead, int) or isinstance(lead, bool) or not 0 <= lead <= n:
        raise LoadError(f"{path}: GGUF metadata '{arch}.leading_dense_block_count' = {lead!r} is not a count of the "
                        f"{n} layers")
    cfg.update(first_k_dense_replace=lead, prefix_dense_sliding_window_pattern=1)
    return _one_base(arch, cfg)


def _periodic_layers(path: Path, arch: str, period, n: int, dense_first: bool) -> list[str]:
    """The layer types llama.cpp makes of a period ``p`` (``attention.sliding_window_pattern`` as a count, checked; its
    ``set_swa_pattern``): every layer sliding for 0; else layers 0, p, 2p, ... global where ``dense_first``, else
    p − 1, 2p − 1, ...."""
    if not isinstance(period, int) or isinstance(period, bool) or period < 0:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' = {period!r} is not a "
                        "period (a count of layers) or a flag per layer")
    p = period
    return ["sliding_attention" if p == 0 or (i % p != 0 if dense_first else i % p < p - 1) else "full_attention"
            for i in range(n)]


def _one_base(arch: str, cfg: dict) -> str | None:
    """``cfg`` with llama.cpp's base 10 000 where none is stated and no other base for the sliding layers (a graph
    that turns every layer at ``rope.freq_base``); the note on a ``rope.freq_base_swa`` it leaves unused, or None."""
    cfg.setdefault("rope_theta", 10000.0)
    local = cfg.pop("rope_local_base_freq", None)
    if local is None or local == cfg["rope_theta"]:
        return None
    return (f"GGUF metadata '{arch}.rope.freq_base_swa' = {local:g} not read: llama.cpp's {arch} graph turns every "
            f"layer at rope.freq_base = {cfg['rope_theta']:g}")


def mellum(path: Path, arch: str, cfg: dict) -> str | None:
    """Mellum as llama.cpp runs a file of it, into ``cfg``: windows only where ``attention.sliding_window`` is stated
    (and not 0), on the layers the per-layer flags mark, else by llama.cpp's rule for a period (4 where none is
    stated: layers p − 1, 2p − 1, ... global); every layer at ``rope.freq_base``, a rope scaling on the global layers
    alone (the sliding ones turn plainly). Returns the note on a ``rope.freq_base_swa`` that graph does not use."""
    n = cfg["num_hidden_layers"]
    period = cfg.pop("sliding_window_pattern", 4)
    if not cfg.get("sliding_window"):
        cfg.pop("sliding_window", None)
        cfg["layer_types"] = ["full_attention"] * n
    elif "layer_types" not in cfg:
        cfg["layer_types"] = _periodic_layers(path, arch, period, n, dense_first=False)
    note = _one_base(arch, cfg)
    scaling = cfg.pop("rope_scaling", None)
    full = {"rope_type": "default", "rope_theta": cfg["rope_theta"], **(scaling or {})}
    cfg["rope_parameters"] = {"full_attention": full,
                              "sliding_attention": {"rope_type": "default", "rope_theta": cfg["rope_theta"]}}
    return note


def granite_swa(path: Path, arch: str, cfg: dict, fields: dict) -> None:
    """Granite SWA as llama.cpp runs a file of it, into ``cfg``: every layer at ``rope.freq_base`` (10 000 where none
    is stated) but those ``attention.rope_pattern`` marks false, which have none (transformers' ``layer_rope_theta``
    0 there); the sliding flags, which llama.cpp requires, checked as one per layer."""
    n = cfg["num_hidden_layers"]
    flags = fields.get(f"{arch}.attention.sliding_window_pattern")
    if not isinstance(flags, list) or len(flags) != n:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' = {flags!r}: llama.cpp "
                        f"reads a flag for each of the {n} layers")
    cfg.setdefault("rope_theta", 10000.0)
    rotates = fields.get(f"{arch}.attention.rope_pattern")
    if rotates is None:
        return
    if not isinstance(rotates, list) or len(rotates) != n or not all(isinstance(r, (bool, int)) for r in rotates):
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.rope_pattern' = {rotates!r} is not a flag for each "
                        f"of the {n} layers")
    cfg["layer_rope_theta"] = [cfg["rope_theta"] if r else 0 for r in rotates]


def muse_glimmer(path: Path, arch: str, cfg: dict, fields: dict, located: list[tuple]) -> None:
    """Muse Glimmer's language model as llama.cpp runs a file of it, into ``cfg``: the window it requires, on the
    layers the per-layer flags mark, else by llama.cpp's rule for a period (4 where none is stated: layers p − 1,
    2p − 1, ... global); rotary on the sliding layers alone, at ``rope.freq_base_swa`` (else ``rope.freq_base``,
    else 10 000), the global ones without; the query scale from the QK-norm gains its converter writes (the scale
    on every query dim, ones on the keys'), which must be so; the post-norms at llama.cpp's 1e-8; the final soft
    cap as stated, else llama.cpp's 30."""
    n = cfg["num_hidden_layers"]
    if not cfg.get("sliding_window"):
        raise UnsupportedModelError(f"{path}: no GGUF metadata '{arch}.attention.sliding_window' (or 0): llama.cpp "
                                    "requires it for Muse Glimmer")
    if cfg.get("rope_scaling"):
        raise UnsupportedModelError(f"{path}: a {arch} file with rope scaling {cfg['rope_scaling'].get('rope_type')!r}:"
                                    " compscope reads Muse Glimmer's files without")
    if "layer_types" not in cfg:
        cfg["layer_types"] = _periodic_layers(path, arch, cfg.pop("sliding_window_pattern", 4), n, dense_first=False)
    theta = cfg.pop("rope_local_base_freq", None) or cfg.get("rope_theta") or 10000.0
    cfg["rope_theta"] = theta
    cfg["layer_rope_theta"] = [theta if t == "sliding_attention" else 0 for t in cfg["layer_types"]]
    found = {info.name: (info, buf) for info, buf, _ in located}
    scales = set()
    for i in range(n):
        for which, want in (("q", None), ("k", 1.0)):
            name = f"blk.{i}.attn_{which}_norm.weight"
            if name not in found:
                raise LoadError(f"{path}: tensor '{name}' is missing: llama.cpp's Muse Glimmer graph reads it")
            values = set(dequantize(found[name][1], found[name][0]).reshape(-1).tolist())
            if len(values) != 1 or (want is not None and values != {want}):
                raise UnsupportedModelError(
                    f"{path}: tensor '{name}' holds {len(values)} values ({sorted(values)[:3]}...): Muse Glimmer's "
                    "converter writes one scale on every query dim and ones on the keys', which are what compscope "
                    "reads (a gainless QK-norm, queries then scaled)")
            if which == "q":
                scales |= values
    if len(scales) != 1:
        raise UnsupportedModelError(f"{path}: the layers' query scales differ ({sorted(scales)}): Muse Glimmer has one "
                                    "qk_scale_factor")
    cap = fields.get(f"{arch}.final_logit_softcapping", 30.0)
    cfg.update(qk_scale_factor=scales.pop(), post_norm_eps=1e-8, final_logit_softcapping=cap or None)


def qwen_next_layers(path: Path, arch: str, cfg: dict, fields: dict, n_kv) -> tuple[int, set[int]]:
    """Qwen3-Next's and Qwen3.5's attention layers among their gated DeltaNet layers, as llama.cpp finds them: a
    K/V head count per layer where the file writes one (0 on a DeltaNet layer), else the flags
    ``attention.recurrent_layers`` (true: DeltaNet), else every ``full_attention_interval``-th layer attends (4 where
    it is not stated); the multi-token-prediction blocks after the last layer are not counted. ``cfg`` gets
    ``layer_types``; returns the one K/V head count and the DeltaNet layers."""
    n = cfg["num_hidden_layers"]
    unknown = sorted(k for k in fields if k.startswith(f"{arch}.") and "recurrent" in k
                     and k != f"{arch}.attention.recurrent_layers")
    if unknown:  # (which layers are DeltaNet's, said in a way compscope does not read)
        raise UnsupportedModelError(f"{path}: GGUF metadata {', '.join(map(repr, unknown))}: compscope finds this "
                                    f"file's DeltaNet layers from '{arch}.attention.recurrent_layers', per-layer K/V "
                                    f"head counts or '{arch}.full_attention_interval' only")
    if isinstance(n_kv, list):
        n_kv, ssm = kv_heads_per_layer(path, arch, cfg, n_kv[:n], "a DeltaNet layer")
    elif (flags := fields.get(f"{arch}.attention.recurrent_layers")) is not None:
        if not isinstance(flags, list) or len(flags) < n or not all(isinstance(f, bool) for f in flags):
            raise LoadError(f"{path}: GGUF metadata '{arch}.attention.recurrent_layers' = {flags!r} is not one flag "
                            f"per layer ({n})")
        ssm = {i for i in range(n) if flags[i]}
    else:
        every = fields.get(f"{arch}.full_attention_interval", 4)
        if not isinstance(every, int) or isinstance(every, bool) or every <= 0:
            raise LoadError(f"{path}: GGUF metadata '{arch}.full_attention_interval' = {every!r} is not a count > 0")
        ssm = {i for i in range(n) if (i + 1) % every}
    if len(ssm) == n:
        raise UnsupportedModelError(f"{path}: no layer of this {arch} file attends (every one a DeltaNet layer)")
    cfg["layer_types"] = ["linear_attention" if i in ssm else "full_attention" for i in range(n)]
    return n_kv, ssm


def deci(path: Path, arch: str, cfg: dict, fields: dict, n_heads, n_kv) -> tuple[int, tuple[int, ...], set[int]]:
    """Nemotron-NAS's layers (llama.cpp's ``deci``) from the head counts its converter writes per layer: query and K/V
    heads on an attention layer, query heads and no K/V heads where a linear map stands in its place, neither where
    the layer has no attention (DeciLM-7B's files: one query head count). ``cfg`` gets the ``block_configs`` they
    make; returns the one query head count, each layer's K/V head count and the layers that do not attend."""
    n = cfg["num_hidden_layers"]
    heads = n_heads if isinstance(n_heads, list) else [n_heads] * n
    kv = n_kv if isinstance(n_kv, list) else [n_kv] * n
    counts = {h for h in heads if h}
    if (len(heads) != n or len(kv) != n or len(counts) != 1
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in heads + kv)):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count' = {n_heads!r} and "
                                    f"'.head_count_kv' = {n_kv!r} do not give each of the {n} layers one query head "
                                    "count (or 0) and its K/V heads")
    (H,) = counts
    blocks = []
    for i, (h, g) in enumerate(zip(heads, kv)):
        if g and (not h or H % g):
            raise UnsupportedModelError(f"{path}: GGUF metadata gives layer {i} {g} K/V heads for {h} query heads: "
                                        "not K/V groups of them")
        blocks.append({"attention": {"no_op": not h, "replace_with_linear": bool(h) and not g,
                                     "n_heads_in_group": H // g if g else None}})
    if fields.get(f"{arch}.attention.scale"):  # (llama.cpp would scale the logits by it; the model's config has none)
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.scale' = "
                                    f"{fields[f'{arch}.attention.scale']!r}: a logit scale Nemotron-NAS does not have")
    cfg.pop("num_key_value_heads", None)
    cfg.update(num_attention_heads=H, block_configs=blocks)
    return H, tuple(kv), {i for i, b in enumerate(blocks) if b["attention"]["n_heads_in_group"] is None}


def mimo2_kv_heads(path: Path, arch: str, cfg: dict, fields: dict, n_kv) -> int:
    """MiMo-V2-Flash's K/V head counts as llama.cpp's converter writes them, one per block (its
    multi-token-prediction blocks' after the layers'): the global layers' count, and twice it on each sliding layer
    (``attention.sliding_window_pattern``, 1 on a sliding layer), as transformers builds the model and compscope's
    family reads it; another count is refused. ``cfg`` gets the global layers' count, which is returned."""
    n = cfg["num_hidden_layers"]
    pattern = fields.get(f"{arch}.attention.sliding_window_pattern")
    counts = n_kv if isinstance(n_kv, list) else [n_kv] * n
    if not isinstance(pattern, list) or len(pattern) < n or len(counts) < n:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' and "
                                    f"'.head_count_kv' must give each of the {n} layers its kind and K/V heads, as "
                                    "llama.cpp's converter writes them")
    own = {c // 2 if p else c for c, p in zip(counts[:n], pattern[:n])}
    if len(own) != 1 or any(p and c % 2 for c, p in zip(counts[:n], pattern[:n])):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {n_kv!r}: not one K/V "
                                    "head count on the global layers and twice it on the sliding ones, which is "
                                    "what compscope reads of MiMo-V2-Flash (transformers builds it so)")
    cfg["num_key_value_heads"] = own.pop()
    return cfg["num_key_value_heads"]


def mimo2(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> None:
    """MiMo-V2-Flash's settings as llama.cpp runs a file of it, in the keys its family reads: each layer type's
    rotary base (``rope.freq_base``; ``rope.freq_base_swa``, else llama.cpp's 10 000) and rotated share
    (``rope.dimension_count`` of ``attention.key_length``) as ``rope_parameters``; the value heads' width
    (``attention.value_length``) and their scale (``attention.value_scale``; none: 1, llama.cpp scales nothing);
    the window as stated (llama.cpp's window, keys less than ``sliding_window`` back). A fused ``attn_qkv`` (MiMo-V2.5's
    conversion) and rope scaling are refused."""
    if any(i.name.endswith("attn_qkv.weight") for i in infos):
        raise UnsupportedModelError(f"{path}: a fused attn_qkv in a {arch} file (MiMo-V2.5's conversion): its value "
                                    "rows are narrower than its key rows and its K/V head counts differ between "
                                    "layers, which compscope does not split; MiMo-V2-Flash's separate attn_q, attn_k, "
                                    "attn_v are read")
    if cfg.pop("rope_scaling", None):
        raise UnsupportedModelError(f"{path}: rope scaling in a {arch} file ('{arch}.rope.scaling.type'): not read")
    share = cfg.pop("partial_rotary_factor", 1.0)
    local = cfg.pop("rope_local_base_freq", 10000.0)
    full = cfg.pop("rope_theta", 10000.0)  # (llama.cpp's default base)
    cfg["rope_parameters"] = {
        "full_attention": {"rope_type": "default", "rope_theta": full, "partial_rotary_factor": share},
        "sliding_attention": {"rope_type": "default", "rope_theta": local, "partial_rotary_factor": share}}
    value = fields.get(f"{arch}.attention.value_length")
    if value is not None:
        cfg["v_head_dim"] = value
    cfg["attention_value_scale"] = fields.get(f"{arch}.attention.value_scale") or 1.0


def nemotron_h(path: Path, arch: str, cfg: dict, fields: dict, n_heads, n_kv) -> tuple[int, int, set[int]]:
    """Nemotron-H's blocks as llama.cpp's converter writes them: a K/V head count per block (0 where its mixer is no
    attention) and an MLP width per block (0 where it is no MLP, or no mixture of experts in ``nemotron_h_moe``),
    the others Mamba-2 blocks; the multi-token-prediction block after the last one not counted. ``cfg`` gets the
    blocks' ``layers_block_type``; returns the one query and one K/V head count of the attention blocks and the
    blocks that do not attend."""
    n = cfg["num_hidden_layers"]
    widths = fields.get(f"{arch}.feed_forward_length")
    if not isinstance(n_kv, list) or not isinstance(widths, list) or len(n_kv) < n or len(widths) < n:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' and "
                                    f"'{arch}.feed_forward_length' must give each of the {n} blocks its K/V heads and "
                                    "MLP width (0 where it has none), as llama.cpp writes them, to tell its blocks apart")
    kinds = []
    for i, (kv, ff) in enumerate(zip(n_kv[:n], widths[:n])):
        if kv and ff:
            raise UnsupportedModelError(f"{path}: GGUF metadata gives block {i} both K/V heads ({kv}) and an MLP "
                                        f"({ff}): a Nemotron-H block holds one mixer")
        kinds.append("full_attention" if kv else ("moe" if arch == "nemotron_h_moe" else "mlp") if ff
                     else "linear_attention")
    attending = [i for i, k in enumerate(kinds) if k == "full_attention"]
    heads = n_heads if not isinstance(n_heads, list) else sorted({n_heads[i] for i in attending})
    kv_heads = sorted({n_kv[i] for i in attending})
    if not attending or len(kv_heads) != 1 or isinstance(heads, list) and len(heads) != 1:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count' and '.head_count_kv' give "
                                    "its attention blocks no one query and one K/V head count")
    cfg.update(layers_block_type=kinds, num_key_value_heads=kv_heads[0])
    cfg["num_attention_heads"] = heads if not isinstance(heads, list) else heads[0]
    return cfg["num_attention_heads"], kv_heads[0], {i for i, k in enumerate(kinds) if k != "full_attention"}


def phimoe(cfg: dict, names: set[str]) -> str | None:
    """Phi-3.5-MoE as llama.cpp's converter writes it (Phi-3's): the bias switches as the tensors the file holds
    (``attention_bias`` where the query has one, ``lm_head_bias`` where ``output.bias`` is), into ``cfg``; with
    LongRoPE, the note that its amplitude is the one llama.cpp computes, ``sqrt(1 + ln s / ln n)``, where
    transformers' PhiMoE takes the config's ``short_mscale`` (not written to the file); without, None."""
    cfg.update(attention_bias=any(n.endswith("attn_q.bias") for n in names), lm_head_bias="output.bias" in names)
    if (cfg.get("rope_scaling") or {}).get("rope_type") != "longrope":
        return None
    return ("LongRoPE's amplitude as llama.cpp computes it, sqrt(1 + ln s / ln n) on queries and keys, where "
            "transformers' PhiMoE takes the config's short_mscale, which the file does not hold")



#: MiniCPM3's muP scalars, which its converter does not write and llama.cpp's graph takes as constants (those of
#: MiniCPM3-4B): the embedding scale, the depth scale (each branch times it over √layers), the logit scale's base
#: width
MINICPM3_CONSTANTS = {"scale_emb": 12.0, "scale_depth": 1.4, "dim_model_base": 256}


#: per architecture of multi-head latent attention, the key/value up-projections (``split``: ``attn_k_b`` and
#: ``attn_v_b``; ``fused``: ``attn_kv_b``) and the query paths (``attn_q``, the query latent ``attn_q_a``) llama.cpp
#: runs as the model computes them
_LATENT_FORMS = {**dict.fromkeys(("deepseek2", "mistral4"), ({"split", "fused"}, {"attn_q", "attn_q_a"})),
                 "deepseek32": ({"split", "fused"}, {"attn_q_a"}),
                 "glm-dsa": ({"split"}, {"attn_q_a"}), "kimi-linear": ({"split"}, {"attn_q"}),
                 "minicpm3": ({"fused"}, {"attn_q_a"}), "plm": ({"fused"}, {"attn_q"}),
                 "bailingmoe3": ({"split"}, {"attn_q", "attn_q_a"})}
#: the latent-attention architectures read without rope scaling, and what the refusal of a file with some says
_UNSCALED = {"kimi-linear": "Kimi Linear's without (its latent attention turns no dims)",
             "glm-dsa": ("GLM-5's without (llama.cpp reads its YaRN multiplier by a rule of its own for this "
                         "architecture)"),
             "bailingmoe3": "Ling 3's without", "plm": "PLM's without"}
_KIMI_FUSED = ("llama.cpp runs a file with attn_kv_b with a key's shared dims before its own, against the query's "
               "order: not the model")


def latent_attention(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> int:
    """Multi-head latent attention as llama.cpp's converter writes it, into ``cfg`` as the HF config it runs as.

    ``deepseek2`` (DeepSeek-V2/V3/R1, Kimi K2, Moonlight, Youtu-LLM; read as DeepSeek-V3): the latents' ranks
    (``attention.q_lora_rank``, ``kv_lora_rank``), the rotated width (``rope.dimension_count``), a head's key and value
    widths (``attention.key_length_mla``, ``value_length_mla``, where the file keeps the key/value up-projection split
    as ``attn_k_b`` and ``attn_v_b``; else ``key_length``, ``value_length``, beside the fused ``attn_kv_b``); queries
    from ``attn_q`` where the file has no query latent (DeepSeek-V2-Lite's); rotated in adjacent pairs (llama.cpp's
    ``deepseek2`` rotary); YaRN's attention factor 1 on the rotated dims and ``mscale(factor, m)²`` on the logit,
    ``m = yarn_log_multiplier / 0.1`` (llama.cpp's rule for this architecture); Llama 4's query temperature where the
    file states one (:func:`.rope_scaling.latent_temperature`).

    ``mistral4`` (Mistral Small 4): converted and run as ``deepseek2`` is (llama.cpp's ``deepseek2`` hyperparameters,
    tensors and graph), read as Mistral 4, whose family takes a query head's whole width as the rotary's and the rotated
    share as ``partial_rotary_factor`` (``rope / key``).

    ``deepseek32`` (DeepSeek-V3.2): ``deepseek2``'s conversion and rules (YaRN's included), a query latent always, read
    as the dense attention its sparse indexer leaves on sequences of up to ``attention.indexer.top_k`` tokens
    (``index_topk``).

    ``glm-dsa`` (GLM-5, GLM-5.2): the same, the up-projection split and a query latent always, read as the dense
    attention its sparse indexer leaves on sequences of up to ``attention.indexer.top_k`` tokens (GLM-5's family:
    ``index_topk``; on them every layer attends to every key, whichever layer's indexer chose them), no rope scaling
    (llama.cpp reads this architecture's YaRN multiplier by another rule, and GLM-5 has none).

    ``kimi-linear`` (Kimi Linear): its latent attention layers (a K/V head count per layer, 0 on a Kimi Delta
    Attention layer) read alone, as the ``kimi_linear`` family reads them: no positions (llama.cpp rotates no dims of
    this architecture, as the model does not), queries from ``attn_q`` (llama.cpp's graph reads them so alone), the
    up-projection split (its path for files with ``attn_kv_b`` puts a key's shared dims before its own, against the
    query's order, which the model does not compute), no rope scaling.

    ``bailingmoe3`` (Ling 3): its latent attention layers (a K/V head count per layer, 0 on a KDA layer) read alone,
    as the ``bailing_hybrid`` family reads them: the up-projection split, queries through ``attn_q`` or a latent,
    adjacent pairs rotated (its family's, as llama.cpp's graph turns them), each head's output times a sigmoid gate
    (``attn_gate``), no rope scaling (its graph has no rule for one), the prediction blocks left out.

    ``plm`` (PLM): DeepSeek-V2-Lite's attention (queries from ``attn_q``, ``attn_kv_b`` fused), adjacent pairs
    rotated, no rope scaling (its graph has no rule for one), and the unembedding ``token_embd``'s: llama.cpp's loader
    reads no ``output`` tensor (a file with one refused).

    ``minicpm3``: the same keys but the value width (llama.cpp's default, ``d_model / heads``, as transformers'),
    ``attn_kv_b`` fused, rotated halves; muP's scalars :data:`MINICPM3_CONSTANTS`; LongRoPE from its factor tensors
    (:func:`.rope_scaling.longrope`).

    Both: the latent norms at the file's RMS epsilon, as llama.cpp runs them (``latent_norm_eps``). Returns a head's
    query width."""
    other = {f"blk.{i}." for i, t in enumerate(cfg.get("layer_types") or ()) if t == "linear_attention"}  # (Kimi's)
    names = {i.name for i in infos if not i.name.startswith(tuple(other))}
    has = lambda tail: any(n.startswith("blk.") and n.endswith(tail) for n in names)  # noqa: E731
    forms, query_paths = _LATENT_FORMS[arch]
    split, fused = has(".attn_k_b.weight") or has(".attn_v_b.weight"), has(".attn_kv_b.weight")
    parts, joint = "the split key/value up-projection (attn_k_b, attn_v_b)", "the fused one (attn_kv_b)"
    form = "split" if split else "fused"
    if split == fused or form not in forms:
        held = (f"both {parts} and {joint}" if split and fused else f"neither {parts} nor {joint}" if split == fused
                else f"only {parts}" if split else "only the fused key/value up-projection (attn_kv_b)")
        wants = ("one of them" if len(forms) > 1 else "attn_kv_b" if "fused" in forms else "attn_k_b and attn_v_b"
                 + (f" ({_KIMI_FUSED})" if arch == "kimi-linear" else ""))
        raise UnsupportedModelError(f"{path}: a {arch} file with {held}: llama.cpp's converter writes {wants}")
    suffix = "_mla" if split else ""

    def count(key: str, default: int | None = None) -> int:
        value = fields.get(f"{arch}.{key}", default)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.{key}' = {value!r}: {arch}'s multi-head "
                                        "latent attention needs it, a positive count")
        return value

    key, rope = count(f"attention.key_length{suffix}"), count("rope.dimension_count")
    value = count(f"attention.value_length{suffix}", cfg["hidden_size"] // cfg["num_attention_heads"]
                  if arch == "minicpm3" else None)
    if key <= rope:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.key_length{suffix}' = {key} leaves no "
                                    f"unrotated dims beside the {rope} rotated ('{arch}.rope.dimension_count')")
    queries = has(".attn_q.weight")
    if queries == has(".attn_q_a.weight"):
        raise UnsupportedModelError(f"{path}: a {arch} file with {'both' if queries else 'neither'} the query "
                                    "projection (attn_q) and the query latent (attn_q_a)")
    if ("attn_q" if queries else "attn_q_a") not in query_paths:
        raise UnsupportedModelError(
            f"{path}: a {arch} file with a query latent (attn_q_a): llama.cpp's {arch} graph reads queries through "
            "attn_q alone" if not queries else f"{path}: a {arch} file without the query latent (attn_q_a): "
            f"llama.cpp's {arch} reads queries through it")
    q_rank = None if queries else count("attention.q_lora_rank")
    for dropped in ("head_dim", "num_key_value_heads"):  # (the absorbed form's one key/value head: not the model's)
        cfg.pop(dropped, None)
    cfg.update(q_lora_rank=q_rank, kv_lora_rank=count("attention.kv_lora_rank"), qk_rope_head_dim=rope,
               qk_nope_head_dim=key - rope, v_head_dim=value, attention_bias=False)
    if "rms_norm_eps" in cfg:
        cfg["latent_norm_eps"] = cfg["rms_norm_eps"]
    scaling = cfg.get("rope_scaling")
    if arch == "minicpm3":
        if scaling and scaling.get("rope_type") != "longrope":
            raise UnsupportedModelError(f"{path}: a {arch} file with rope scaling {scaling.get('rope_type')!r}; "
                                        "compscope reads its LongRoPE factors, or none")
        if scaling:  # (the original context where transformers' MiniCPM3 reads it: in its rope settings)
            scaling["original_max_position_embeddings"] = cfg.pop("original_max_position_embeddings")
        cfg.update(MINICPM3_CONSTANTS)
        return key
    if arch in _UNSCALED and scaling:
        raise UnsupportedModelError(f"{path}: a {arch} file with rope scaling {scaling.get('rope_type')!r}: compscope "
                                    f"reads {_UNSCALED[arch]}")
    if arch in ("kimi-linear", "bailingmoe3"):  # (Kimi's: no positions, its family rotates nothing; Ling 3's family
        return key  # turns adjacent pairs whatever its config says: no rope_interleave key)
    if arch == "plm":
        if "output.weight" in names:
            raise UnsupportedModelError(f"{path}: a {arch} file with an 'output.weight': llama.cpp's {arch} loader "
                                        "ties the unembedding to token_embd and takes no output tensor")
        cfg["rope_interleave"] = True
        return key
    if arch == "glm-dsa":  # (its family turns adjacent pairs, as llama.cpp's glm-dsa rotary does)
        cfg["index_topk"] = count("attention.indexer.top_k")
        return key
    if arch == "deepseek32":  # (its family turns adjacent pairs, and keeps to the indexer's top-k)
        cfg["index_topk"] = count("attention.indexer.top_k")
    else:
        cfg["rope_interleave"] = True
    if scaling and scaling.get("rope_type") == "yarn":
        log_mul = scaling.pop("log_multiplier", None)
        scaling["attention_factor"] = 1.0
        if log_mul:
            scaling["mscale_all_dim"] = scaling["mscale"] = float(log_mul) / 0.1
    elif scaling:
        raise UnsupportedModelError(f"{path}: a {arch} file with rope scaling {scaling.get('rope_type')!r}; "
                                    "compscope reads its YaRN, or none")
    rope_scaling.latent_temperature(path, arch, cfg, fields)
    if arch == "mistral4":  # (its family: the rotary's width a query head's, int(width × share) dims turned)
        share = rope / key if int(key * (rope / key)) == rope else (rope + 0.5) / key
        cfg["rope_scaling"] = {**(cfg.get("rope_scaling") or {"rope_type": "default"}), "partial_rotary_factor": share}
    return key


def deepseek2_ocr(path: Path, arch: str, cfg: dict, fields: dict) -> str | None:
    """DeepSeek-OCR's (and OCR 2's, Unlimited-OCR's) language model as llama.cpp's ``deepseek2-ocr`` graph runs it:
    q, k and v each a plain projection of every head, one K/V head per query head, rotate-half rotary over the
    whole head at base 10,000 whatever ``rope.dimension_count`` says, no rope scaling, and every token attending to
    all before it: the sliding window the converter writes (Unlimited-OCR's) is not applied, and left out here (a
    note says so where the file states one). Other settings, which llama.cpp would not run, are refused by name."""
    n_heads, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    if n_kv != n_heads:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {n_kv} for {n_heads} "
                                    f"query heads: llama.cpp's {arch} graph takes one K/V head per query head")
    theta = cfg.get("rope_theta", 10000.0)
    if abs(theta - 10000.0) > 1e-4:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.freq_base' = {theta:g}: llama.cpp's {arch} "
                                    "graph runs only at base 10000")
    scaling, factor = fields.get(f"{arch}.rope.scaling.type"), fields.get(f"{arch}.rope.scaling.factor")
    typed = scaling not in (None, "none")
    if typed or factor not in (None, 0.0, 1.0):
        key, value = ("type", scaling) if typed else ("factor", factor)
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.scaling.{key}' = {value!r}: llama.cpp's "
                                    f"{arch} graph turns the heads unscaled, while scaling its logits by the "
                                    "setting: not one rotary map")
    window = cfg.pop("sliding_window", None)
    return (None if window is None else
            f"the sliding window the file states ({window}) not read: llama.cpp's {arch} graph attends to every "
            "earlier token, as one forward pass of the model does")


def llama_graph(path: Path, arch: str, cfg: dict, fields: dict) -> str | None:
    """InternLM2, XVERSE, DeepSeek's first MoE, Arctic, Ling, Nanbeige and Baichuan 7B models as llama.cpp runs
    them: its Llama graph (q, k and v apart, their rows permuted by its converter, rotary on whole heads, logits at
    ``d_head^-1/2``: Ling's at ``rope.dimension_count^-1/2``, the same, as its rotary covers the whole head), read by
    the Llama family (their models are remote code, which transformers does not hold; the notes say so:
    ``metadata._READ_AS``). DeepSeek's graph scales the logits by ``attention.scale`` where the file states one:
    refused, as no Llama's does (the others' graphs never read it). llama.cpp's Baichuan graph turns the heads at 32
    layers alone; at 40 (13B) it adds ALiBi's biases instead (maximum bias 8): read by the llama_alibi family (``cfg``
    says so, and the note returned); at other depths it runs without positions: refused. Nanbeige's graph runs its
    layers ``num_loops`` times over; a file of more than one loop is refused (the loops share their weights, and
    between them the final norm replaces the residual unless ``skip_loop_final_norm``)."""
    layers = fields.get(f"{arch}.block_count")
    loops = fields.get(f"{arch}.num_loops", 1)
    if arch == "nanbeige" and loops != 1:
        between = ("" if fields.get(f"{arch}.skip_loop_final_norm") else
                   ", and between loops the final norm replaces the residual with its normed self")
        raise UnsupportedModelError(
            f"{path}: GGUF metadata '{arch}.num_loops' = {loops!r}: llama.cpp runs the file's layers that many times "
            f"over, each loop with the same weights{between}; compscope reads a file of one loop")
    if arch == "baichuan" and layers == 40:
        cfg["model_type"] = "llama_alibi"
        return ("Baichuan 13B read by the llama_alibi family (Llama's layers with ALiBi, maximum bias 8, no rotary), "
                "as llama.cpp runs a Baichuan file of 40 layers" + WEIGHTS_ONLY)
    if arch == "baichuan" and layers != 32:
        raise UnsupportedModelError(
            f"{path}: GGUF metadata '{arch}.block_count' = {layers!r}: llama.cpp turns the heads of a Baichuan file "
            "only at 32 layers (7B) and adds ALiBi's biases only at 40 (13B); at any other depth it runs the heads "
            "with neither, which is not Baichuan's model: refused")
    scale = fields.get(f"{arch}.attention.scale")
    if arch == "deepseek" and scale not in (None, 0.0):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.scale' = {scale!r}: llama.cpp scales "
                                    "the logits by it, which no Llama compscope reads does")
    return None


def minicpm(cfg: dict) -> None:
    """MiniCPM's muP scalars where the file states none, as llama.cpp's ``minicpm`` loader defaults them (its
    converter writes them from ``scale_emb``, ``scale_depth`` and ``dim_model_base``): the embeddings times 12, each
    sublayer's output times ``1.4 / sqrt(layers)``, the logits divided by ``256 / d_model`` (its default, though the
    model divides by ``d_model / 256``: the converter always writes the model's). Its loader reads no
    ``attention.scale`` (``metadata._ARCH_KEYS`` leaves it out): the attention logits at ``d_head^-1/2``."""
    cfg.setdefault("embedding_multiplier", 12.0)
    cfg.setdefault("residual_multiplier", 1.4 / cfg["num_hidden_layers"] ** 0.5)
    cfg.setdefault("logits_scaling", 256.0 / cfg["hidden_size"])


def llama_embed(cfg: dict, causal: object) -> str:
    """An embedding Llama (``llama-embed``: NVIDIA's llama-embed-nemotron) as llama.cpp runs it: its Llama graph
    without the unembedding, causal as the file's ``attention.causal`` flag says (llama.cpp's default: causal). Read
    by the Llama family where causal, else by EuroBERT's (Llama's layers attending both ways)."""
    if causal:
        return ("an embedding Llama read by the Llama family, causal as llama.cpp runs it (the file does not flag it "
                "bidirectional)")
    cfg["model_type"] = "eurobert"
    return ("an embedding Llama flagged bidirectional (attention.causal false): read by the EuroBERT family, Llama's "
            "layers attending both ways, as llama.cpp runs it")


def smallthinker(path: Path, arch: str, cfg: dict) -> str:
    """SmallThinker as llama.cpp runs a file of it, into ``cfg`` for the SmolLM3 family (Llama's layers, no rotary on
    some): without a window every layer turned; with one (``attention.sliding_window`` above 0), a window of 4096
    tokens whatever the file states, on every layer but 0, p, 2p, ... (``sliding_window_pattern`` p, 4 where none is
    stated), and no rotary on layers 0, 4, 8, ... (llama.cpp's step of 4, whatever p; every layer turned where the
    model has 4 layers); one rotary base, a ``rope.freq_base_swa`` of another refused. The note says so."""
    n = cfg["num_hidden_layers"]
    window = cfg.pop("sliding_window", None)
    said = ("SmallThinker read by the SmolLM3 family (Llama's layers, rows as HF's, no rotary on some), as llama.cpp "
            "runs it" + WEIGHTS_ONLY)
    if not window:  # (llama.cpp reads no period and turns every layer)
        cfg.pop("sliding_window_pattern", None)
        cfg.pop("layer_types", None)
        cfg["no_rope_layers"] = [1] * n
        unused = _one_base(arch, cfg)
        return said + ("" if unused is None else f"; {unused}")
    if "layer_types" in cfg:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' is a list: "
                                    "llama.cpp's smallthinker loader reads a period (a count of layers)")
    cfg["layer_types"] = _periodic_layers(path, arch, cfg.pop("sliding_window_pattern", 4), n, dense_first=True)
    cfg.update(use_sliding_window=True, sliding_window=4096,
               no_rope_layers=[1 if n == 4 or i % 4 else 0 for i in range(n)])
    theta = cfg.setdefault("rope_theta", 10000.0)
    local = cfg.pop("rope_local_base_freq", None)
    if local is not None and local != theta and "sliding_attention" in cfg["layer_types"]:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.freq_base_swa' = {local:g} beside "
                                    f"rope.freq_base = {theta:g}: llama.cpp turns the sliding layers at a base of "
                                    "their own, which the SmolLM3 family compscope reads SmallThinker by does not hold")
    return said + ("" if window == 4096 else f"; the window the file states ({window}) not read: llama.cpp's "
                   f"{arch} graph slides 4096 tokens whatever it says")


def stated(path: Path, arch: str, fields: dict, key: str, otherwise: str) -> float:
    """The positive number GGUF metadata ``{arch}.{key}`` states, or a refusal naming it (``otherwise``: what
    llama.cpp would do without it)."""
    value = fields.get(f"{arch}.{key}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.{key}' = {value!r}: a positive number is needed "
                                    f"({otherwise})")
    return float(value)


def jina_bert_v2(path: Path, arch: str, infos: list) -> None:
    """Refuse a jina-embeddings-v2 file that llama.cpp runs otherwise than BERT's post-LN layers: LayerNorms on the
    queries and keys over all of a layer's heads (``attn_q_norm``, ``attn_k_norm``: its code models'), or a second
    norm after the attention with the layer's input added again (``attn_norm_2``)."""
    extra = sorted({i.name.split(".", 2)[2].removesuffix(".weight").removesuffix(".bias") for i in infos
                    if i.name.startswith("blk.") and i.name.split(".", 2)[2].startswith(
                        ("attn_q_norm", "attn_k_norm", "attn_norm_2"))})
    if extra:
        raise UnsupportedModelError(f"{path}: a {arch} file with {', '.join(extra)}: llama.cpp normalises the queries "
                                    "and keys over all of a layer's heads, or adds the layer's input again after a "
                                    "second norm, which the BERT layers compscope reads it by do not hold")


def pockettts(path: Path, arch: str, infos: list) -> None:
    """Refuse a Pocket TTS file with an output-projection bias, which llama.cpp's loader does not take (its graph
    adds none; q, k and v biases it adds where the file holds them, as read)."""
    biased = [i.name for i in infos if i.name.startswith("blk.") and i.name.endswith(".attn_output.bias")]
    if biased:
        raise UnsupportedModelError(f"{path}: a {arch} file with '{biased[0]}': llama.cpp's {arch} model has no bias "
                                    "on the attention's output projection (its loader refuses the file)")


def cogvlm(path: Path, arch: str, cfg: dict, fields: dict, infos: list) -> str:
    """CogVLM as llama.cpp runs a file of it on text tokens: its language expert (``attn_qkv``, ``attn_output``; the
    visual expert's ``vis_*`` weights run on image embeddings alone, not read), one K/V head per query head (its graph
    cuts the fused rows so), rotate-half rotary over whole heads at base 10000 (``ggml_rope``'s, whatever
    ``rope.freq_base`` says: a file stating another base, rope scaling or frequency factors, which its graph does not
    apply, refused). Returns the note."""
    n_heads, n_kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    if n_kv != n_heads:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count_kv' = {n_kv} for {n_heads} "
                                    f"query heads: llama.cpp's {arch} graph cuts the fused rows as one K/V head per "
                                    "query head")
    theta = cfg.setdefault("rope_theta", 10000.0)
    unused = [f"'{arch}.rope.freq_base' = {theta:g}"] if abs(theta - 10000.0) > 1e-4 else []
    scaling = cfg.get("rope_scaling")
    unused += [f"'{arch}.rope.scaling.type' = {scaling.get('rope_type')!r}"] if scaling else []
    unused += ["the tensor 'rope_freqs.weight'"] if any(i.name == "rope_freqs.weight" for i in infos) else []
    if unused:
        raise UnsupportedModelError(f"{path}: GGUF metadata {', '.join(unused)}: llama.cpp's {arch} graph turns the "
                                    "heads at base 10000 with no scaling whatever the file says, which is not the "
                                    "rotary it states")
    return ("CogVLM's language expert read by the Llama family, as llama.cpp runs it on text tokens (the visual "
            "expert's weights, which it runs on image embeddings, not read); weights only: transformers has no model "
            "of it")


def plamo3(path: Path, arch: str, cfg: dict, fields: dict) -> str:
    """PLaMo 3 as llama.cpp runs a file of it, into ``cfg`` for the plamo3 family: without a window every layer global
    at ``rope.freq_base``; with one (``attention.sliding_window`` above 0), sliding layers all but p − 1, 2p − 1, ...
    (``sliding_window_pattern`` p, 8 where none is stated), turned at ``rope.freq_base_swa`` (llama.cpp's 10 000 where
    none is stated). Values as wide as keys (its graph's views; another ``value_length`` refused) and no rope scaling
    (refused). Returns the note."""
    _plamo(path, arch, cfg, fields)
    said = ("PLaMo 3 read by the plamo3 family (per-head QK norms, a norm on each attention output), as llama.cpp runs "
            "it" + WEIGHTS_ONLY)
    if not cfg.get("sliding_window"):  # (llama.cpp reads no period and no second base)
        for unused in ("sliding_window", "sliding_window_pattern", "layer_types", "rope_local_base_freq"):
            cfg.pop(unused, None)
        return said
    if "layer_types" in cfg:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.sliding_window_pattern' is a list: "
                                    f"llama.cpp's {arch} loader reads a period (a count of layers)")
    cfg["layer_types"] = _periodic_layers(path, arch, cfg.pop("sliding_window_pattern", 8), cfg["num_hidden_layers"],
                                          dense_first=False)
    stated = "rope_local_base_freq" in cfg
    cfg.setdefault("rope_local_base_freq", 10000.0)
    return said + ("" if stated else "; its sliding layers turned at llama.cpp's base 10000, the file stating none "
                                     "(rope.freq_base_swa)")


def _plamo(path: Path, arch: str, cfg: dict, fields: dict) -> None:
    """What PLaMo 2's and 3's graphs share, checked: values as wide as keys (their views of the fused rows; another
    ``value_length`` refused) and no rope scaling (refused); llama.cpp's base 10 000 where none is stated."""
    key = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    value = fields.get(f"{arch}.attention.value_length", key)
    if value != key:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.value_length' = {value} beside keys "
                                    f"{key} wide: compscope reads PLaMo's values as wide as its keys")
    scaling = cfg.get("rope_scaling")
    if scaling:
        raise UnsupportedModelError(f"{path}: a {arch} file with rope scaling {scaling.get('rope_type')!r}: compscope "
                                    "reads PLaMo's without")
    cfg.setdefault("rope_theta", 10000.0)


def plamo2_note(path: Path, arch: str, cfg: dict, fields: dict) -> str:
    """PLaMo 2 as llama.cpp runs a file of it (:func:`_plamo`'s checks; no window, whatever the file states: its
    graph reads none). Returns the note."""
    _plamo(path, arch, cfg, fields)
    for unused in ("sliding_window", "sliding_window_pattern", "rope_local_base_freq"):
        cfg.pop(unused, None)
    return ("PLaMo 2 read by the plamo2 family (its attention layers alone, per-head QK norms, a norm on each "
            "attention output), as llama.cpp runs it" + WEIGHTS_ONLY)


def plamo2(path: Path, arch: str, cfg: dict, heads: object, kv: object) -> tuple[int, int, set[int]]:
    """PLaMo 2's layers from the per-layer query and K/V head counts its converter writes (both 0 on a Mamba layer):
    ``cfg`` gets the one count of each on the attention layers and ``layer_types`` (``attention``, ``mamba``);
    returns the two counts and the Mamba layers."""
    n = cfg["num_hidden_layers"]
    heads = heads if isinstance(heads, list) else [heads] * n
    kv = kv if isinstance(kv, list) else [kv] * n
    one_q, one_kv = sorted({h for h in heads if h}), sorted({k for k in kv if k})
    if (len(heads) != n or len(kv) != n or len(one_q) != 1 or len(one_kv) != 1
            or any(bool(h) != bool(k) for h, k in zip(heads, kv))):
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.head_count' = {heads!r} and "
                                    f"'{arch}.attention.head_count_kv' = {kv!r}: expected one query and one K/V head "
                                    f"count on each attention layer, 0 for both on a Mamba layer ({n} layers)")
    mamba = {i for i, h in enumerate(heads) if not h}
    cfg.update(num_attention_heads=one_q[0], num_key_value_heads=one_kv[0],
               layer_types=["mamba" if i in mamba else "attention" for i in range(n)])
    return one_q[0], one_kv[0], mamba


#: llama.cpp's Grok scalars where a file states none: (config key, GGUF key, value)
GROK_DEFAULTS = (("attn_logit_softcapping", "attn_logit_softcapping", 30.0),
                 ("attention_output_multiplier", "attention.output_scale", 0.08838834764831845),
                 ("embedding_multiplier", "embedding_scale", 78.38367176906169),
                 ("logits_scaling", "logit_scale", 0.5773502691896257))


def grok(path: Path, arch: str, cfg: dict, fields: dict) -> str:
    """Grok-1 as llama.cpp runs a file of it, into ``cfg`` for the grok family: its four scalars as the file states
    them, llama.cpp's Grok-1 values where it states none (:data:`GROK_DEFAULTS`, said). Refused: rope scaling and an
    attention temperature (Grok-2's, which llama.cpp applies by rules of its own); a final soft cap on the logits is
    said (W_U-based scores describe the logits before it). Returns the note."""
    if cfg.get("rope_scaling") or fields.get(f"{arch}.attention.temperature_length"):
        what = "rope scaling" if cfg.get("rope_scaling") else "an attention temperature (attention.temperature_length)"
        raise UnsupportedModelError(f"{path}: a {arch} file with {what}: compscope reads Grok-1's files, without")
    defaulted = []
    for key, gguf_key, value in GROK_DEFAULTS:
        if key not in cfg:
            cfg[key] = value
            defaulted.append(f"{gguf_key} {value:g}")
    cap = fields.get(f"{arch}.final_logit_softcapping")
    return ("Grok-1 read by the grok family (a norm on each attention output, soft-capped logits), as llama.cpp runs "
            "it" + WEIGHTS_ONLY
            + (f"; llama.cpp's values where the file states none: {', '.join(defaulted)}" if defaulted else "")
            + (f"; the logits soft-capped at {cap:g} after W_U, which W_U-based scores do not see" if cap else ""))
