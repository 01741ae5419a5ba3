"""Rotary scaling as llama.cpp's converter writes it (``{arch}.rope.scaling.*``, LongRoPE's factor tensors),
read back as the HF rope setting it came from: YaRN, Phi-3's LongRoPE, Ministral 3's."""

from __future__ import annotations

import math
from pathlib import Path

from ...checkpoint import one_line
from ...gguf_file import dequantize
from ....errors import LoadError, UnsupportedModelError

#: the tensors in which llama.cpp's converter writes LongRoPE's per-pair factors, and the HF rope settings they are
_LONGROPE = {"rope_factors_short.weight": "short_factor", "rope_factors_long.weight": "long_factor"}


def longrope(path: Path, arch: str, cfg: dict, fields: dict, located: list[tuple]) -> None:
    """Phi-3's LongRoPE as llama.cpp's converter writes it (no ``rope.scaling.type``): the per-pair factors
    as the tensors ``rope_factors_short`` and ``_long``, the original context as
    ``rope.scaling.original_context_length`` (the context as ``context_length``; MiniCPM3's converter writes no
    original context, and llama.cpp takes the context, at attention factor 1), and the attention
    factor it computes from the context ratio ``s`` as ``rope.scaling.attn_factor``: read into ``cfg``
    as the HF config it came from (``rope_scaling`` longrope with both factor lists,
    ``original_max_position_embeddings``, ``max_position_embeddings``); a stated attention factor
    other than ``sqrt(1 + ln s / ln n)`` (1 for ``s <= 1``), the one transformers computes, is refused."""
    found = {info.name: (info, buf, file) for info, buf, file in located if info.name.startswith("rope_factors_")}
    if set(found) != set(_LONGROPE):
        raise UnsupportedModelError(f"{path}: rotary factors {', '.join(sorted(found))}: LongRoPE needs both "
                                    f"{' and '.join(_LONGROPE)}, and no other")
    key = f"{arch}.rope.scaling.original_context_length"
    n, ctx = fields.get(key), fields.get(f"{arch}.context_length")
    if arch == "minicpm3" and n is None:  # (its converter writes none: llama.cpp takes the trained context)
        n = ctx
    if not isinstance(n, int) or n <= 1 or not isinstance(ctx, int) or ctx <= 0:
        raise UnsupportedModelError(f"{path}: LongRoPE factors without a usable '{key}' ({n!r}) and context length "
                                    f"({ctx!r})")
    out: dict = {"rope_type": "longrope"}
    for name, setting in _LONGROPE.items():
        info, buf, file = found[name]
        try:
            out[setting] = [float(x) for x in dequantize(buf, info).reshape(-1).tolist()]
        except (ValueError, NotImplementedError, RuntimeError) as e:
            raise LoadError(f"{file}: tensor '{name}' cannot be read ({one_line(e)})") from e
    cfg.update(rope_scaling=out, original_max_position_embeddings=n, max_position_embeddings=ctx)
    scale = ctx / n
    want = math.sqrt(1 + math.log(scale) / math.log(n)) if scale > 1 else 1.0
    stated = fields.get(f"{arch}.rope.scaling.attn_factor")
    if stated is None and arch == "minicpm3" and want != 1.0:  # (llama.cpp: 1, where none is stated)
        raise UnsupportedModelError(f"{path}: LongRoPE over a context {ctx} longer than the original {n} without GGUF "
                                    f"metadata '{arch}.rope.scaling.attn_factor': llama.cpp runs it at attention "
                                    f"factor 1, transformers at sqrt(1 + ln {scale:g} / ln {n}) = {want:.6g}")
    if stated is not None and abs(float(stated) - want) > 1e-6 * want:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.rope.scaling.attn_factor' = {float(stated):.6g} is "
                                    f"not LongRoPE's sqrt(1 + ln {scale:g} / ln {n}) = {want:.6g} (context {ctx} over "
                                    f"the original {n}), which compscope and transformers compute")


#: llama.cpp's YaRN keys (``{arch}.rope.scaling.*``) -> the HF rope setting each states
_YARN = {"factor": "factor", "original_context_length": "original_max_position_embeddings",
         "yarn_beta_fast": "beta_fast", "yarn_beta_slow": "beta_slow"}
#: llama.cpp's YaRN keys whose values here change nothing (its defaults: the ramp on, no extra factor; whether the
#: model was trained so), and what they are: another value is refused
_YARN_NEUTRAL = {"yarn_ext_factor": ((-1.0, 1.0), "the ramp's weight; -1: llama.cpp's default, 1 for YaRN"),
                 "yarn_attn_factor": ((1.0,), "a factor on YaRN's own attention factor"),
                 "attn_factor": ((1.0,), "a factor on the rotary map's attention factor"),
                 "yarn_log_multiplier": ((0.0,), "DeepSeek's scaling of YaRN's attention factor"),
                 "finetuned": ((True, False), "whether the model was trained so")}
#: gpt-oss's ``rope.scaling.*`` keys -> the YaRN setting transformers' GGUF reader makes of each (it reads these
#: alone, and passes no other on)
_GPT_OSS_YARN = {"factor": "factor", "original_context_length": "original_max_position_embeddings",
                 "attention_factor": "attention_factor", "beta_fast": "beta_fast", "beta_slow": "beta_slow"}


#: Ministral 3's: the log multiplier is the HF config's ``mscale_all_dim`` (its converter writes it), read by
#: :func:`mistral3`
_MISTRAL3_YARN_NEUTRAL = {**_YARN_NEUTRAL, "yarn_log_multiplier": ((1.0,), "Ministral 3's mscale_all_dim: with any "
                                                                          "value but 1 llama.cpp's runtimes disagree "
                                                                          "on YaRN's attention factor")}
#: DeepSeek-V2's and V3's: the log multiplier is ``0.1 mscale_all_dim`` (its converter writes it so), read by
#: :func:`.rules.latent_attention` as ``log_multiplier``
_DEEPSEEK2_YARN = {**_YARN, "yarn_log_multiplier": "log_multiplier"}
_DEEPSEEK2_YARN_NEUTRAL = {k: v for k, v in _YARN_NEUTRAL.items() if k != "yarn_log_multiplier"}
#: the architectures whose YaRN keys are read otherwise: (keys read, keys neutral at the values given)
_YARN_READ = {"gpt-oss": (_GPT_OSS_YARN, {}), "mistral3": (_YARN, _MISTRAL3_YARN_NEUTRAL),
              **dict.fromkeys(("deepseek2", "mistral4", "deepseek32"), (_DEEPSEEK2_YARN, _DEEPSEEK2_YARN_NEUTRAL))}


def yarn(path: Path, arch: str, fields: dict) -> dict:
    """A file's YaRN (``rope.scaling.type`` yarn) as the HF setting its converter read it from: the
    factor, the original context (``original_context_length``) and the ramp's bounds (``yarn_beta_fast``,
    ``yarn_beta_slow``; HF's defaults 32 and 1 where absent); the attention factor YaRN's own,
    ``0.1 ln(factor) + 1``, as llama.cpp and transformers both compute it, and the ramp's bounds rounded
    outwards, as both do. gpt-oss's as transformers' GGUF reader builds them from its own keys
    (:data:`_GPT_OSS_YARN`). A key that would change it (:data:`_YARN_NEUTRAL` at another value, or one
    compscope does not know) is refused by name."""
    keys, neutral = _YARN_READ.get(arch, (_YARN, _YARN_NEUTRAL))
    prefix = f"{arch}.rope.scaling."
    out: dict = {"rope_type": "yarn"}
    for key, value in fields.items():
        short = key[len(prefix):] if key.startswith(prefix) else None
        if short is None or short == "type" or (short in neutral and value in neutral[short][0]):
            continue
        if short not in keys:
            what = (neutral[short][1] if short in neutral
                    else f"not a YaRN setting compscope reads; it reads {', '.join(prefix + k for k in keys)}")
            raise UnsupportedModelError(f"{path}: GGUF metadata '{key}' = {value!r} ({what}) is not supported with "
                                        f"YaRN; read the model's HuggingFace folder, whose YaRN compscope reads")
        out[keys[short]] = value
    for need in ("factor", "original_max_position_embeddings"):
        if need not in out:
            key = prefix + next(k for k, v in keys.items() if v == need)
            raise UnsupportedModelError(f"{path}: rope scaling 'yarn' without GGUF metadata '{key}'")
    return out


def _temperature_scale(path: Path, arch: str, fields: dict) -> float | None:
    """``attention.temperature_scale`` (Llama 4's query temperature's β), None where absent or 0; refused unless a
    finite number >= 0."""
    beta = fields.get(f"{arch}.attention.temperature_scale")
    if not beta:
        return None
    if not isinstance(beta, (int, float)) or isinstance(beta, bool) or not math.isfinite(beta) or beta < 0:
        raise LoadError(f"{path}: GGUF metadata '{arch}.attention.temperature_scale' = {beta!r} is not a finite "
                        "number >= 0")
    return float(beta)


def latent_temperature(path: Path, arch: str, cfg: dict, fields: dict) -> None:
    """Llama 4's query temperature as llama.cpp's ``deepseek2`` graph runs it (Mistral 4's, Mistral Large 3's):
    queries times ``1 + β ln(1 + ⌊i / n⌋)`` at position i, β ``attention.temperature_scale`` and n
    ``attention.temperature_length`` (llama.cpp needs both: β without n is refused); into ``cfg``'s rope settings as
    HF's ``llama_4_scaling_beta`` over the original context n, which must be YaRN's where the file has YaRN (HF's
    config states one original context for both)."""
    beta = _temperature_scale(path, arch, fields)
    if beta is None:
        return
    key = f"{arch}.attention.temperature_length"
    n = fields.get(key)
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.temperature_scale' = {beta:g} without a "
                                    f"positive '{key}' ({n!r}), by which llama.cpp floors the positions")
    scaling = cfg.get("rope_scaling") or {"rope_type": "default"}
    original = scaling.get("original_max_position_embeddings")
    if original is not None and original != n:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{key}' = {n} is not YaRN's original context {original} "
                                    f"('{arch}.rope.scaling.original_context_length'): compscope reads one original "
                                    "context for both, as the HF config states it")
    cfg["rope_scaling"] = {**scaling, "llama_4_scaling_beta": beta, "original_max_position_embeddings": n}


def mistral3(path: Path, arch: str, cfg: dict, fields: dict) -> None:
    """Ministral 3 as llama.cpp runs a ``mistral3`` file, into ``cfg`` as the HF config it was converted from:
    Llama's layers; YaRN's attention factor 1 (``mscale = mscale_all_dim = 1``: its graph divides the factor
    ``0.1 ln s + 1`` out again), stated by ``yarn_log_multiplier`` = 1, which the converter writes (any other
    value, or none, and llama.cpp's runtimes disagree: refused); Llama 4's query temperature
    ``1 + β ln(1 + ⌊i / n⌋)`` at position i (``attention.temperature_scale`` β, HF's ``llama_4_scaling_beta``;
    n YaRN's original context, else the trained context, as llama.cpp takes it)."""
    scaling = cfg.get("rope_scaling")
    if scaling and scaling.get("rope_type") == "yarn":
        key = f"{arch}.rope.scaling.yarn_log_multiplier"
        if key not in fields:
            raise UnsupportedModelError(f"{path}: a Ministral 3 file with YaRN and no GGUF metadata '{key}' (the "
                                        "converter writes mscale_all_dim there, 1): llama.cpp's runtimes disagree on "
                                        "YaRN's attention factor without it")
        scaling.update(mscale=1.0, mscale_all_dim=1.0)
    elif scaling:
        raise UnsupportedModelError(f"{path}: a Ministral 3 file with rope scaling {scaling.get('rope_type')!r}; "
                                    "compscope reads its YaRN, or none")
    beta = _temperature_scale(path, arch, fields)
    if beta is None:
        return
    n = fields.get(f"{arch}.rope.scaling.original_context_length") or fields.get(f"{arch}.context_length")
    if not isinstance(n, int) or n <= 0:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.temperature_scale' = {beta:g} without "
                                    "an original context or a context length, from which llama.cpp floors positions")
    length = fields.get(f"{arch}.attention.temperature_length")
    if length is not None and length != n:
        raise UnsupportedModelError(f"{path}: GGUF metadata '{arch}.attention.temperature_length' = {length!r}, and "
                                    f"llama.cpp floors Ministral 3's positions by its original context {n} instead")
    cfg["rope_scaling"] = {**(scaling or {"rope_type": "default"}), "llama_4_scaling_beta": float(beta),
                           "original_max_position_embeddings": n}
