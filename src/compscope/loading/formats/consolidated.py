"""A folder in the format of the model makers' own reference code: ``params.json`` beside the
weights, as Mistral ships models (``consolidated.safetensors``, or ``consolidated-0000k-of-0000n
.safetensors``; what mistral-inference and vLLM's ``--load-format mistral`` read) and as Meta
shipped Llama (``consolidated.00.pth``, read through torch's weights-only unpickler; the larger models
split across tensor-parallel ranks, ``consolidated.00.pth`` ... ``consolidated.07.pth``, joined as
the reference code splits them).

Llama-like decoders only (the attention of Mistral, Mixtral, Llama): the reference names
(``layers.N.attention.wq``, ``attention_norm``, ``tok_embeddings``, ...) are read as HF's Llama
names, and the query and key rows, which these files keep in the order that rotates adjacent
pairs, are put in HF's rotate-half order (:func:`~compscope.loading.checkpoint.pairs_to_halves`,
as transformers' conversion scripts do). A folder that also has a ``config.json`` is a HuggingFace
folder and read as one. What a ``params.json`` holds that changes attention and compscope does not
read (a quantisation, rotary scaling, per-layer windows) is refused by name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from ..checkpoint import Checkpoint, TensorStore, one_line, pairs_to_halves
from ...errors import LoadError, UnsupportedModelError
from ..families.base import MAX_LAYERS, MAX_WIDTH, integer
from .safetensors_folder import pickled_tensors, safetensors_tensors

PARAMS = "params.json"
#: params.json key -> the HF config key the Llama family reads
_KEYS = {"dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
         "n_kv_heads": "num_key_value_heads", "head_dim": "head_dim", "norm_eps": "rms_norm_eps",
         "rope_theta": "rope_theta", "sliding_window": "sliding_window", "vocab_size": "vocab_size"}
#: params.json keys of the MLP, the tokenizer, the run or another part of the model: not attention
_NOT_ATTENTION = frozenset("hidden_dim multiple_of ffn_dim_multiplier moe max_seq_len max_batch_size "
                           "max_position_embeddings model_type vision_encoder tied_embeddings lora".split())
#: what the reference code's default is where params.json is silent (transformers' conversion agrees)
_DEFAULT_THETA = 10000.0
#: reference name inside ``layers.N.`` -> HF name inside ``model.layers.N.``
_BLOCK = {"attention.wq.weight": "self_attn.q_proj.weight", "attention.wk.weight": "self_attn.k_proj.weight",
          "attention.wv.weight": "self_attn.v_proj.weight", "attention.wo.weight": "self_attn.o_proj.weight",
          "attention_norm.weight": "input_layernorm.weight"}
_TOP = {"tok_embeddings.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight",
        "output.weight": "lm_head.weight"}
#: how a missing tensor's message says which file name an HF name stands for
_SAID = {"layers.N.attention.wq/wk/wv/wo": "model.layers.N.self_attn.q/k/v/o_proj",
         "attention_norm": "input_layernorm", "tok_embeddings": "model.embed_tokens", "output": "lm_head"}
_LAYER = re.compile(r"^layers\.(\d+)\.(.+)$")
#: Mistral's files (sharded or not) and Meta's (one per tensor-parallel rank)
_SAFETENSORS = re.compile(r"^consolidated(-\d{5}-of-\d{5})?\.safetensors$")
_PTH = re.compile(r"^consolidated\.(\d+)\.pth$")


def folder_of(source: object) -> Path | None:
    """The reference-format folder ``source`` names (the folder, its ``params.json`` or one of its
    ``consolidated`` weight files), or None: not a path, or a folder with a ``config.json`` (a
    HuggingFace folder, though it may hold the reference files too)."""
    from . import existing_path

    path = existing_path(source)
    if path is None:
        return None
    folder = path if path.is_dir() else path.parent
    if path.is_file() and not (path.name == PARAMS or _SAFETENSORS.match(path.name) or _PTH.match(path.name)):
        return None
    return folder if (folder / PARAMS).is_file() and not (folder / "config.json").exists() else None


def recognise(source: object) -> bool:
    """A folder with a ``params.json`` and no ``config.json`` (or that file, or one of its weight files)."""
    return folder_of(source) is not None


def read_params(folder: Path) -> dict:
    path = folder / PARAMS
    try:
        params = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LoadError(f"{path}: not valid JSON ({one_line(e)})") from e
    if not isinstance(params, dict):
        raise LoadError(f"{path}: expected a JSON object")
    return params


def to_config(params: dict, where: str) -> tuple[dict, list[str]]:
    """The HF config (Llama family keys) of a ``params.json`` and the notes it gives; what it
    holds that changes attention and compscope does not read is refused by name."""
    if params.get("quantization"):
        raise UnsupportedModelError(f"{where}: 'quantization' = {params['quantization']!r}: quantised reference-format "
                                    "weights are not read (use the model's unquantised files)")
    if params.get("use_scaled_rope"):
        raise UnsupportedModelError(
            f"{where}: 'use_scaled_rope' is true and params.json does not state the rescaling (Llama 3.1 divides by 8, "
            "Llama 3.2 by 32): read the model's HuggingFace folder, whose config states it")
    if isinstance(params.get("sliding_window"), list):
        raise UnsupportedModelError(f"{where}: 'sliding_window' = {params['sliding_window']!r}: a window per layer "
                                    "is not supported")
    cfg: dict = {"model_type": "mixtral" if params.get("moe") else "mistral"}
    notes = []
    unknown = []
    for key, value in params.items():
        if key in _KEYS:
            cfg[_KEYS[key]] = value
        elif key not in _NOT_ATTENTION and key not in ("quantization", "use_scaled_rope") and value not in \
                (None, False, 0, "", [], {}):
            unknown.append(f"{key}={value!r}")
    if unknown:  # e.g. yarn, llama_4_scaling: rotary or attention settings the Llama family does not read
        raise UnsupportedModelError(f"{where}: settings compscope does not read: {', '.join(unknown)}")
    for key in ("dim", "n_layers", "n_heads"):
        if key not in params:
            raise LoadError(f"{where}: '{key}' is missing")
    for key in ("dim", "n_layers", "n_heads", "n_kv_heads", "head_dim"):  # sizes: checked before a shape uses them
        if params.get(key) is not None:
            cfg[_KEYS[key]] = integer(params, where, key, high=MAX_LAYERS if key == "n_layers" else MAX_WIDTH)
    if cfg.get("vocab_size") in (None, -1):  # Meta's Llama 2 writes -1: the tokenizer's size
        cfg.pop("vocab_size", None)
    if "rope_theta" not in cfg:
        cfg["rope_theta"] = _DEFAULT_THETA
        notes.append(f"params.json states no rope_theta: {_DEFAULT_THETA:g}, the reference code's default")
    if params.get("sliding_window") is not None:  # sometimes written as a string
        window = params["sliding_window"]
        if isinstance(window, str) and window.strip().isdigit():
            window = int(window)
        cfg["sliding_window"] = integer({"sliding_window": window}, where, "sliding_window")
    cfg["tie_word_embeddings"] = bool(params.get("tied_embeddings", False))
    if params.get("moe"):
        notes.append("a mixture of experts (Mixtral): the experts are MLP, not read")
    if params.get("vision_encoder"):
        notes.append("the language model's attention only: the vision encoder and its adapter are not read")
    return cfg, notes


def weight_files(folder: Path) -> tuple[list[Path], str]:
    """The folder's weight files and their kind ('safetensors' or 'pth'; Meta's, one per tensor-parallel
    rank, in rank order: ``consolidated.00.pth``, ``consolidated.01.pth``, ...)."""
    names = sorted(f.name for f in folder.iterdir() if f.is_file())
    tensors = [folder / n for n in names if _SAFETENSORS.match(n)]
    if tensors:
        return tensors, "safetensors"
    pth = sorted((folder / n for n in names if _PTH.match(n)), key=lambda f: int(_PTH.match(f.name)[1]))
    if not pth:
        raise LoadError(f"{folder}: {PARAMS} but no weights (consolidated.safetensors or consolidated.00.pth)")
    ranks = [int(_PTH.match(f.name)[1]) for f in pth]
    if ranks != list(range(len(pth))):
        raise LoadError(f"{folder}: tensor-parallel files for ranks {ranks}: expected consolidated.00.pth to "
                        f"consolidated.{len(pth) - 1:02d}.pth, one per rank (a file is missing or misnamed)")
    return pth, "pth"


#: how Meta's reference code splits a tensor across tensor-parallel ranks: the dimension its ranks' slices
#: are joined along (column-parallel maps by output rows, row-parallel ones by input columns)
_SPLIT = {"attention.wq.weight": 0, "attention.wk.weight": 0, "attention.wv.weight": 0, "attention.wo.weight": 1,
          "feed_forward.w1.weight": 0, "feed_forward.w3.weight": 0, "feed_forward.w2.weight": 1, "output.weight": 0}
#: tensors every rank holds whole
_WHOLE = ("attention_norm.weight", "ffn_norm.weight", "norm.weight", "rope.freqs")


def tensor_parallel(files: list[Path], d_model: int) -> tuple[dict, dict, dict]:
    """``(loaders, origin, dtypes)`` of Meta's tensor-parallel files (one per rank, in rank order), each
    tensor joined from the ranks' slices as the reference code splits it (:data:`_SPLIT`); the token
    embeddings by their shape (Llama 2 splits the model width, Llama 3 the vocabulary); norms and rotary
    frequencies, which every rank holds whole, checked equal. A tensor is joined when it is read."""
    shards = [pickled_tensors([f]) for f in files]
    first = shards[0][0]
    for f, (loaders, _, _) in zip(files[1:], shards[1:]):
        if set(loaders) != set(first):
            odd = sorted(set(loaders) ^ set(first))[:3]
            raise LoadError(f"{f}: holds other tensors than {files[0].name} ({', '.join(odd)} ...): not ranks of one "
                            "model")
    where = f"{files[0].parent} ({len(files)} tensor-parallel files)"

    def joined(name: str):
        inside = (m.group(2) if (m := _LAYER.match(name)) else name)
        parts = [loaders[name] for loaders, _, _ in shards]

        def load() -> torch.Tensor:
            ts = [p() for p in parts]
            if inside in _WHOLE:
                if any(not torch.equal(t, ts[0]) for t in ts[1:]):
                    raise LoadError(f"{where}: '{name}' differs between ranks, which all hold it whole")
                return ts[0]
            dim = _SPLIT.get(inside)
            if name == "tok_embeddings.weight" and ts[0].ndim == 2:
                dim = 0 if ts[0].shape[1] == d_model else 1 if ts[0].shape[1] * len(ts) == d_model else None
            if dim is None:
                raise LoadError(f"{where}: how the ranks split '{name}' (shape {tuple(ts[0].shape)} each) is not known")
            try:
                return torch.cat(ts, dim=dim)
            except RuntimeError as e:
                raise LoadError(f"{where}: the ranks' slices of '{name}' do not join along dimension {dim} "
                                f"({', '.join(str(tuple(t.shape)) for t in ts)})") from e
        return load

    loaders = {name: joined(name) for name in first}
    origin = {name: where for name in first}
    return loaders, origin, shards[0][2]


def open_folder(folder: Path) -> Checkpoint:
    where = str(folder / PARAMS)
    cfg, notes = to_config(read_params(folder), where)
    files, kind = weight_files(folder)
    if kind == "safetensors":
        raw, origin, dtypes = safetensors_tensors(files)
    elif len(files) == 1:
        raw, origin, dtypes = pickled_tensors(files)
    else:
        raw, origin, dtypes = tensor_parallel(files, cfg["hidden_size"])
    if kind == "pth":
        notes.append(f"read from {files[0].name}" + (f" ... {files[-1].name}, {len(files)} tensor-parallel ranks whose "
                                                      "slices are joined as the reference code splits them"
                                                      if len(files) > 1 else "")
                     + " with torch.load(weights_only=True): tensors only, no other object unpickled")
    n_heads, r = cfg["num_attention_heads"], head_width(cfg, where)
    rows = {"self_attn.q_proj.weight": n_heads, "self_attn.k_proj.weight": cfg.get("num_key_value_heads") or n_heads}
    loaders, names, attention = {}, {}, {}
    for name, load in raw.items():
        m = _LAYER.match(name)
        inside = m.group(2) if m else None
        hf = f"model.layers.{m.group(1)}.{_BLOCK[inside]}" if inside in _BLOCK else _TOP.get(name) if not m else None
        if (inside or "").startswith("attention") or name == "tok_embeddings.weight":
            attention[name] = () if hf is None else (hf,)  # read, or refused as unread (a bias, a norm inside)
        if hf is None:
            continue
        n = next((c for k, c in rows.items() if hf.endswith(k)), None)
        loaders[hf] = load if n is None else lambda load=load, n=n: _in_halves(load(), n, r)
        names[hf] = name
    if "rope.freqs" in raw:  # Meta's Llama 2 stores its rotary frequencies: they must be the ones compscope computes
        _check_frequencies(raw["rope.freqs"](), cfg, f"{origin['rope.freqs']} (rope.freqs)")
    store = TensorStore(loaders, {hf: f"{origin[n]} ({n})" for hf, n in names.items()},
                        {hf: dtypes[n] for hf, n in names.items()},
                        source=f"{folder} (read by HF's names: {', '.join(f'{a} as {b}' for a, b in _SAID.items())})")
    return Checkpoint(cfg, store, str(folder), folder.name, notes + ["reference-format folder (params.json): query "
                      "and key rows put from rotating adjacent pairs into HF's rotate-half order"],
                      attention_sources=attention)


def head_width(cfg: dict, where: str) -> int:
    """The query/key head width, which must be even: the rotary turns pairs of dims."""
    r = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    if not isinstance(r, int) or r <= 0 or r % 2:
        raise UnsupportedModelError(f"{where}: head width {r!r} (head_dim, or dim / n_heads): rotary turns pairs of "
                                    "dims, so it must be a positive even integer")
    return r


def _in_halves(w: torch.Tensor, n: int, r: int) -> torch.Tensor:
    """``w``'s rows in rotate-half order when they are ``n`` heads of ``r``; else as stored, for the
    family's shape check to name."""
    return pairs_to_halves(w, n) if w.ndim == 2 and w.shape[0] == n * r else w


def _check_frequencies(stored: torch.Tensor, cfg: dict, where: str) -> None:
    """Refuse stored rotary frequencies other than ``theta ** (-2i / d_head)``."""
    r = head_width(cfg, where)
    want = 1.0 / cfg["rope_theta"] ** (torch.arange(0, r, 2, dtype=torch.float64) / r)
    got = stored.detach().to(torch.float64).reshape(-1)
    if got.shape != want.shape or not torch.allclose(got, want, rtol=1e-5, atol=0):
        first = [f"{v:.6g}" for v in got[:3].tolist()]
        raise UnsupportedModelError(f"{where}: rotary frequencies {first}... are not theta^(-2i/d) with theta = "
                                    f"{cfg['rope_theta']:g} and d = {r}, which compscope would compute")


def read(source):
    from ..families import to_heads

    return to_heads(open_folder(folder_of(source)))

