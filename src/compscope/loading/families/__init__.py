"""Model families: how a checkpoint's tensor names map onto heads. One file per family;
each registers itself with :func:`register` where it is defined."""

from __future__ import annotations

import dataclasses
import difflib

from ...errors import UnsupportedModelError, one_line
from ...core.heads import HeadWeights
from ...registry import Registry
from ..checkpoint import LEGACY_NORM_NAMES
from .base import Family

#: every family, found by its ``model_types`` (and ``gguf_types``) and ``architectures``
FAMILIES: Registry = Registry("family", "families", error=UnsupportedModelError)


def register(cls: type[Family]) -> type[Family]:
    """Class decorator: make a family findable by its ``model_types`` (``gguf_types``) and ``architectures``."""
    return FAMILIES.add(cls.name, cls)


def families() -> dict[str, type[Family]]:
    return dict(FAMILIES.items())


def family_for(config: dict, where: str) -> type[Family]:
    """The family that handles ``config`` (by ``model_type``, a GGUF file's among ``gguf_types`` too, then
    ``architectures``)."""
    model_type = config.get("model_type")
    archs = config.get("architectures") or []
    for fam in families().values():
        if model_type in fam.model_types or model_type in fam.gguf_types:
            return fam
    for fam in families().values():
        if any(a in fam.architectures for a in archs):
            return fam
    from ..catalogue import why_not

    what = f"model_type={model_type!r}" + (f", architectures={archs}" if archs else "")
    reason = why_not(model_type)
    if reason is not None:
        raise UnsupportedModelError(f"{where}: {what}, which compscope does not read: {reason}")
    known = sorted(t for f in families().values() for t in f.model_types)
    close = difflib.get_close_matches(model_type, known, n=3) if isinstance(model_type, str) else []
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise UnsupportedModelError(f"{where}: unsupported architecture ({what}){hint} (`compscope models` lists the "
                                f"{len(known)} model types compscope reads)")


def _known(config: dict) -> bool:
    """Whether a family reads ``config`` by its ``model_type`` or ``architectures``."""
    archs = config.get("architectures") or []
    return any(config.get("model_type") in (*f.model_types, *f.gguf_types) or any(a in f.architectures for a in archs)
               for f in families().values())


def _a(name: object) -> str:
    """``name`` after its article: 'a clip', 'an aimv2'."""
    return f"{'an' if str(name)[:1].lower() in 'aeiou' else 'a'} {name}"


def language_model(config: dict, where: str) -> tuple[dict, str | None]:
    """``(config, None)`` for a model a family reads; for a model that wraps a language model no
    family reads as a whole (a vision-language model: Gemma 3 from 4B up, LLaVA, Mistral Small 3.1,
    Qwen2-VL, Qwen2.5-VL, ...), its language model's config (``text_config``, its thinker's in
    Qwen2.5-Omni and Qwen3-Omni, or what transformers builds as one from the top-level keys) and a
    note saying so. transformers saves
    that nested config as what differs from its model type's defaults, so the defaults are
    transformers' own (the ones the running model has); without transformers it is refused."""
    from ..catalogue import why_not

    if why_not(config.get("model_type")) is not None or _known(config):  # (refused as a whole: PaliGemma's prefix LM)
        return config, None
    inner, where_found = nested_text_config(config)
    if inner is None or not _known(inner):
        return config, None
    in_vlm = where_found.startswith("vlm ")  # (a retriever's vision-language model holds it: ColQwen2's)
    holder = config["vlm_config"] if in_vlm else config
    where_found = where_found.removeprefix("vlm ")
    flat, in_thinker = where_found == "flat", where_found == "thinker"
    key = {"thinker": "thinker_config", "esmc": "esmc_config"}.get(where_found, "text_config")
    outer, kind = config.get("model_type"), inner.get("model_type")
    try:
        from transformers import AutoConfig
    except ImportError as e:
        raise UnsupportedModelError(
            f"{where}: the language model of {_a(outer)} model, whose text_config ({kind}) is saved as what differs from "
            "transformers' defaults: reading it needs transformers (pip install transformers)") from e
    settings = {k: v for k, v in inner.items() if k != "model_type"}
    try:
        built = _sub_config(holder.get("model_type"), key, kind)
        full = (built(**settings) if built is not None else AutoConfig.for_model(kind, **settings)).to_dict()
    except Exception as e:  # transformers raises several kinds for a config it cannot build
        raise UnsupportedModelError(f"{where}: transformers cannot build the text_config of this {outer} model "
                                    f"({type(e).__name__}: {one_line(e)[:300]})") from e
    full.pop("architectures", None)  # the language model's own, not the wrapper's
    if "tie_word_embeddings" in config:  # transformers 5 ties the head by the outer config's word (4 by the inner's);
        full["tie_word_embeddings"] = config["tie_word_embeddings"]  # what a file without its own head means
    parts = {**holder, **(holder["thinker_config"] if in_thinker else {})}  # (a thinker's audio, vision; the talker)
    others = sorted(k.removesuffix("_config") for k, v in parts.items()  # (EsmFold2's parts: sub-configs not so named)
                    if (k.endswith("_config") or "model_type" in v if isinstance(v, dict) else False)
                    and k not in ("text_config", key))
    whose = "its thinker's text_config" if in_thinker else f"its {key}"
    whose = f"its vlm_config's ({holder.get('model_type')}) {whose.removeprefix('its ')}" if in_vlm else whose
    top = f"its vlm_config's ({holder.get('model_type')})" if in_vlm else "its"
    whence = (f"{top} settings kept at the top of the config, read as transformers builds its text_config, {kind}"
              if flat else f"{whose}, {kind}, completed with transformers' defaults")
    part = family_for(inner, where).part  # (a dual encoder's text tower: its text encoder)
    return full, f"the {part} of {_a(outer)} model ({whence}): {', '.join(others) or 'its other parts'} not read"


def _sub_config(outer: object, key: str, kind: object):
    """The config class transformers' ``outer`` config builds its ``text_config`` (or its thinker's) with,
    where its AutoConfig does not know the text model type ``kind`` by name (Emu3's ``emu3_text_model`` in
    transformers 4, the Omni thinkers' ``qwen2_5_omni_text`` and ``qwen3_omni_moe_text`` in 5.4 and 5.5), and
    it is that class's; None otherwise (AutoConfig builds it by name)."""
    from transformers import CONFIG_MAPPING

    path = {"text_config": ("text_config",), "thinker_config": ("thinker_config", "text_config")}.get(key)
    if path is None or not isinstance(kind, str) or kind in CONFIG_MAPPING or outer not in CONFIG_MAPPING:
        return None
    cls = CONFIG_MAPPING[outer]
    for step in path:
        cls = getattr(cls, "sub_configs", {}).get(step)
    return cls if getattr(cls, "model_type", None) == kind else None


def nested_text_config(config: dict) -> tuple[dict | None, str]:
    """The language model's config inside a wrapper's ``config`` and where it sits: its
    ``text_config`` (``'text'``), its thinker's (Qwen2.5-Omni, Qwen3-Omni: ``'thinker'``), the ESM C that
    EsmFold2 bundles (its ``esmc_config``: ``'esmc'``), or, beside a ``vision_config``, what transformers
    builds from the top-level keys (Qwen2-VL and Qwen2.5-VL as first published: ``'flat'``); a retriever's
    vision-language model's (ColQwen2's ``vlm_config``: ``'vlm '`` before where it sits there, unless
    compscope refuses that model); ``(None, '')`` where there is none (an encoder-decoder's decoder)."""
    from ..catalogue import why_not

    vlm = config.get("vlm_config")
    if isinstance(vlm, dict):
        inner, where_found = (None, "") if why_not(vlm.get("model_type")) else nested_text_config(vlm)
        return (inner, f"vlm {where_found}") if inner is not None else (None, "")
    if isinstance(config.get("text_config"), dict):
        return config["text_config"], "text"
    thinker = config.get("thinker_config")
    if isinstance(thinker, dict) and isinstance(thinker.get("text_config"), dict):
        return thinker["text_config"], "thinker"
    if isinstance(config.get("esmc_config"), dict):
        return config["esmc_config"], "esmc"
    flat = _flat_text_config(config) if isinstance(config.get("vision_config"), dict) else None
    return (flat, "flat") if flat is not None else (None, "")


def _flat_text_config(config: dict) -> dict | None:
    """The ``text_config`` transformers builds from a vision-language config that keeps its language
    model's settings at the top level (Qwen2-VL and Qwen2.5-VL as first published), as what differs
    from that text config's defaults; None without transformers or where it builds none."""
    try:
        from transformers import AutoConfig
    except ImportError:
        return None
    try:
        built = AutoConfig.for_model(config.get("model_type"), **{k: v for k, v in config.items() if k != "model_type"})
    except Exception:  # noqa: BLE001  (not a model type transformers builds: the caller says it is unsupported)
        return None
    text = built.get_text_config()
    return None if text is built else text.to_diff_dict()


#: retrievers whose vision-language model's language model compscope reads, and what they output instead of logits
RETRIEVERS = {"colqwen2": ("ColQwen2 outputs a projection of each position's last state (embedding_proj_layer), a "
                           "multi-vector embedding scored against another's, not logits over tokens")}


def to_heads(ckpt) -> HeadWeights:
    """``HeadWeights`` of a format's ``Checkpoint``, by the family its config names. A bias the
    checkpoint holds beside a weight the family read, but that the family did not read, is refused
    by name rather than dropped (what the model computes would differ from what compscope reads);
    so is any tensor the format marks as entering attention that the family did not read."""
    outer = ckpt.config.get("model_type")
    config, inside = language_model(ckpt.config, ckpt.source)
    if inside is not None:  # a vision-language model: its language model is what composes
        ckpt = dataclasses.replace(ckpt, config=config, notes=[*ckpt.notes, inside])
    family = family_for(ckpt.config, ckpt.source)
    if (named := ckpt.tensors.renamed(LEGACY_NORM_NAMES + family.saved_names)) is not ckpt.tensors:
        ckpt = dataclasses.replace(ckpt, tensors=named)  # (read under the names the loaded model has)
    hw = family.convert(ckpt)
    if inside is not None and outer in RETRIEVERS:
        hw = hw.replace(W_U=None, note=f"no unembedding read (W_U is None): {RETRIEVERS[outer]}")
    unread = ckpt.tensors.unread_biases()
    if unread:
        names = ", ".join(f"'{n}'" for n in unread[:3]) + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")
        raise UnsupportedModelError(
            f"{ckpt.tensors.origin(unread[0])}: {names} present but not read by the {family.name} family: the model "
            "adds these biases, so compscope would describe a different model")
    unread = ckpt.unread_attention_sources()
    if unread:
        names = ", ".join(f"'{n}'" for n in unread[:3]) + (f" and {len(unread) - 3} more" if len(unread) > 3 else "")
        raise UnsupportedModelError(
            f"{ckpt.source}: {names} enter{'s' if len(unread) == 1 else ''} attention but compscope does not read "
            f"{'it' if len(unread) == 1 else 'them'} for this {family.name} model: it would describe a different model")
    return _without_unbuilt_biases(hw, family, ckpt) if ckpt.biases_from_config else hw


def _without_unbuilt_biases(hw: HeadWeights, family: type[Family], ckpt) -> HeadWeights:
    """``hw`` without the attention biases a HF folder holds but transformers does not build from
    its config (Llama with ``attention_bias`` false, GPT-J, ...): the running model ignores them."""
    qkv, out = family.attention_biases(ckpt.config)
    unbuilt = [b for b, on in (("b_Q", qkv), ("b_K", qkv), ("b_V", qkv), ("b_O", out)) if not on and getattr(hw, b) is not None]
    if not unbuilt:
        return hw
    note = (f"{', '.join(unbuilt)} not read: the file holds these attention biases, but transformers builds this "
            f"{family.name} model's projections without them (its config) and ignores the tensors")
    meta = dataclasses.replace(hw.meta, notes=hw.meta.notes + (note,))
    return dataclasses.replace(hw, **dict.fromkeys(unbuilt), meta=meta)


from . import (  # noqa: E402,F401  (registration)
    afmoe, apertus, bamba, bart, bert, big_bird, bloom, bros, chameleon, clip, cohere, cosmos, ctrl, cwm,
    deberta, deepseek, dia, emu3, ernie, esm, esmc, eurobert, evolla, exaone, falcon, falcon_h1, gemma, gemma4,
    glm, gpt2, git, gpt_bigcode, gpt_neo, gpt_oss, gptj, granite, grok, helium, higgs_audio, jais2, jamba,
    kolibri, kosmos, layoutlm, lfm2, lfm3, llama, llama4, markuplm, mimo, minicpm5, minimax, mllama, modernbert,
    molmo2, mpnet, mpt, muse, nanochat, nemotron, nemotron_h, nemotron_nas, neox, olmo, openai_gpt, opt, paddleocr,
    phi, phi3, phimoe, plamo, pocket_tts, qwen3, qwen3_5, recurrent_gemma, rotary_bert, seed_oss, smollm3,
    solar_open, squeezebert, stablelm, starcoder2, t5, talkie, ultrabert, unlimited_ocr, xlm)

__all__ = ["FAMILIES", "Family", "family_for", "families", "language_model", "register", "to_heads"]

from ...registry import submodules as _submodules

__getattr__ = _submodules(__name__)
