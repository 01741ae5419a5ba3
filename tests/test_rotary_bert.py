"""BERT encoders with rotary positions (jina-embeddings-v3, nomic-embed-text, GTE) from their
released files' layout: the fused ``Wqkv`` and their own norm names, under each model's prefix
(GTE's released ``new.`` too), read as the loaded model transformers builds from them; a folder runs
on data as an encoder. (The family-wide suites run the tiny variants against transformers: hooks,
processing, runner, post-LN interventions.)"""

from __future__ import annotations

import pytest
import torch

import compscope

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
if not hasattr(transformers, "JinaEmbeddingsV3Config"):
    pytest.skip(f"transformers {transformers.__version__} has no rotary BERTs", allow_module_level=True)

from hf_tiny import BY_ID, build  # noqa: E402

FIELDS = ("W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O", "W_E", "W_pos")
CASES = [("jina-embeddings-v3-rotary-post-ln", "mixer.Wqkv"), ("nomic-bert-rotary-no-bias", "attn.Wqkv"),
         ("gte-rotary-no-token-types", "attention.qkv_proj")]


def _same(a, b) -> bool:
    return all((getattr(a, f) is None and getattr(b, f) is None) or torch.equal(getattr(a, f), getattr(b, f))
               for f in FIELDS) and torch.equal(a.attn_norm.weight, b.attn_norm.weight) and torch.equal(
        a.attn_norm.bias, b.attn_norm.bias) and torch.equal(a.rotary.inv_freq, b.rotary.inv_freq)


@pytest.mark.parametrize("vid, fused", CASES)
def test_the_files_layout_reads_as_the_loaded_model(tmp_path, vid, fused):
    """A masked-LM folder as transformers saves it (the released names, the model's prefix) reads
    as the loaded model: every attention tensor, the norms each layer reads, the rotary frequencies."""
    model = build(BY_ID[vid])
    want = compscope.load(model)
    masked = transformers.AutoModelForMaskedLM.from_config(model.config)
    getattr(masked, masked.base_model_prefix).load_state_dict(model.state_dict(), strict=False)  # (no pooler there)
    masked.save_pretrained(tmp_path)
    names = list(safetensors_torch.load_file(tmp_path / "model.safetensors"))
    assert any(n.endswith(f"{fused}.weight") for n in names)  # (the files' names, not the loaded model's)
    got = compscope.load(tmp_path)
    assert got.meta.family == want.meta.family and _same(got, want)
    assert got.W_U is None and not got.causal and got.norm_placement == "post" and got.W_pos is None


def test_gte_released_prefix_new_reads_alike(tmp_path):
    """GTE's released files keep their tensors under ``new.`` (transformers strips it when it loads)."""
    model = build(BY_ID["gte-rotary-no-token-types"])
    model.save_pretrained(tmp_path)
    tensors = safetensors_torch.load_file(tmp_path / "model.safetensors")
    safetensors_torch.save_file({f"new.{k}": v for k, v in tensors.items()}, tmp_path / "model.safetensors")
    assert _same(compscope.load(tmp_path), compscope.load(model))


def test_nomic_file_with_biases_transformers_does_not_build_drops_them(tmp_path):
    """nomic-embed-text's projections have no biases: a file that holds some (not what transformers
    builds, which ignores them) is read without them, saying so."""
    model = build(BY_ID["nomic-bert-rotary-no-bias"])
    model.save_pretrained(tmp_path)
    tensors = safetensors_torch.load_file(tmp_path / "model.safetensors")
    extra = {k.replace(".weight", ".bias"): torch.ones(t.shape[0]) for k, t in tensors.items() if k.endswith("Wqkv.weight")}
    safetensors_torch.save_file({**tensors, **extra}, tmp_path / "model.safetensors")
    hw = compscope.load(tmp_path)
    assert hw.b_Q is None and any("not read" in n for n in hw.meta.notes)


def test_validate_runs_on_a_folder_as_an_encoder(tmp_path):
    from compscope.data.runner import transformers_at_least
    from compscope.data.validate import validate

    if transformers_at_least(5, 4) and not transformers_at_least(5, 17):  # (the tiny model's 64 positions)
        pytest.skip("transformers 5.4-5.16's Jina v3 takes no sequence past max_position_embeddings (its token "
                    "types' buffer)")
    build(BY_ID["jina-embeddings-v3-rotary-post-ln"]).save_pretrained(tmp_path)
    v = validate(str(tmp_path), sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                 progress=False)
    assert {h["score"] for h in v.heads} == {"previous_token"}
