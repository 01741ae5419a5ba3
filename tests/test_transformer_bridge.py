"""TransformerLens 4 ``TransformerBridge`` objects, read by compscope.

transformer-lens 4 cannot be installed beside the 3.9 the rest of the suite tests against, so
the checks (``bridge_check.py``) run in a second environment: ``.venv-tl4`` (``make test``
builds it: torch 2.13.0 CPU and transformer-lens 4.3.0), or the Python named by
``COMPSCOPE_TL4_PYTHON``. Without one this module is skipped, saying how to build it.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from environments import ROOT, python_of, subprocess_env

CASES = ["gpt2", "gpt-neo", "neox", "llama-gqa", "qwen2-bias", "qwen3", "gemma2", "gemma3", "olmo2", "phi", "gptj", "opt",
         "bloom", "mpt", "gpt-oss", "bert", "roberta", "glm", "glm4", "ernie4_5", "seed-oss", "arcee", "nemotron",
         "apertus", "exaone4", "glm4_moe", "lfm2", "falcon_h1", "minimax_m2",
         "nanochat", "phimoe", "flex_olmo", "gemma4", "qwen3_5", "openai-gpt", "modernbert-decoder", "afmoe", "vaultgemma"]
#: OLMo-2, FlexOlmo and EXAONE 4 have no norm before their attention, and BERT's, RoBERTa's and GPT-1's norms come after
#: it (post-LN);
#: TransformerLens' GLM adapters do not fold norms (``supports_fold_ln = False``, their MLP's joint gate_up_proj), nor
#: its Nemotron one (LayerNorm1P, gain 1 + w): compatibility mode's processing leaves their attention weights as
#: they were, so the check that they changed (and are read as changed) cannot apply; and TransformerLens 4.3 fails to
#: enter Falcon-H1's compatibility mode itself, and refuses VaultGemma's (bridge_check.RAW_ONLY); nanochat's norms have no gains to fold; Gemma 4's
#: processed bridge is refused (below); TransformerLens 4.3's Qwen3.5, ModernBERT-decoder and AFMoE adapters disable
#: fold_ln
PROCESSED = [c for c in CASES if c not in ("olmo2", "bert", "roberta", "openai-gpt", "glm", "glm4", "nemotron", "exaone4", "falcon_h1",
                                                "nanochat", "flex_olmo", "gemma4", "qwen3_5",
                                                "modernbert-decoder", "afmoe", "vaultgemma")]


@pytest.fixture(scope="module")
def rows() -> dict:
    python = python_of(".venv-tl4", "COMPSCOPE_TL4_PYTHON", "transformer-lens 4 environment")
    done = subprocess.run([str(python), str(ROOT / "tests" / "bridge_check.py")], env=subprocess_env(),
                          capture_output=True, text=True, timeout=900)
    lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert done.returncode == 0 and lines, f"bridge_check.py failed:\n{done.stderr[-3000:]}"
    versions, cases = lines[0], {r["case"]: r for r in lines[1:]}
    assert versions["transformer_lens"].startswith("4."), versions
    return cases


@pytest.mark.parametrize("case", CASES)
def test_bridge_reads_as_the_model_it_wraps(rows, case):
    row = rows[case]
    assert "error" not in row, row.get("error")
    assert row["same_as_hf"], "tensors differ from those read from an untouched copy of the HF model"
    assert row["unchanged"] and row["compat_unchanged"], "reading the bridge changed its weights"
    assert row["raw_processing"] == []
    assert row["raw_out_err"] < 1e-5 and row["raw_pattern_err"] < 1e-5, row
    assert row["raw_runner_err"] < 1e-5, row
    assert row["raw_interventions_err"] < 1e-6 and row["raw_interventions_max"] > 5e-4, row


def test_a_post_ln_bridge_runs_through_its_own_norms(rows):
    """BERT behind a bridge: its ``ln1`` is the norm *after* the attention, so the runner reads the
    block's input and the output projection, and the direct path passes through ``ln1`` and ``ln2``
    (before, it read ``ln1``'s input as the residual: recomputed outputs off by more than 100%); one
    block without ``ln2`` is refused, saying what the runner needs."""
    row = rows["bert"]
    assert "error" not in row, row.get("error")
    assert row["raw_runner_err"] < 1e-5 and row["compat_runner_err"] < 1e-5, row
    assert row["raw_interventions_err"] < 1e-6, row
    assert row["cut_refused"] == ("UnsupportedModelError: bert: a bridge around a post-LN model needs blocks with "
                                     "ln1, ln2 and attn.o to be run on data"), row


def test_a_bloom_bridge_without_its_output_projection_is_refused_on_data(rows):
    """BLOOM's attention returns the residual with what it adds, so the runner reads the addition at the
    output projection ``attn.o``: a block without one is refused, saying so."""
    assert rows["bloom"]["cut_refused"] == (
        "UnsupportedModelError: bloom: the bloom attention returns the residual with what it adds, and the bridge "
        "has no attn.o (its output projection) to read the addition from"), rows["bloom"]


@pytest.mark.parametrize("case", PROCESSED)
def test_compatibility_mode_weights_are_read_as_processed(rows, case):
    row = rows[case]
    assert "error" not in row, row.get("error")
    assert row["compat_processing"] == ["transformer_lens_bridge:process_weights"] and row["compat_note"]
    assert row["compat_weights_differ"], "processing changed nothing: the check would not see stale weights"
    assert row["compat_out_err"] < 1e-5 and row["compat_pattern_err"] < 1e-5, row
    assert row["compat_runner_err"] < 1e-5, row


def test_a_bridge_without_attention_components_is_read_for_its_weights_and_refused_on_data(rows):
    """TransformerLens 4.3's RecurrentGemma adapter wraps each block whole: compscope reads the HF
    tensors under it (the same as from the HF model, unchanged by reading), before and after
    compatibility mode, and the data runner, which has no attention hooks there, refuses the bridge
    saying what to run instead."""
    row = rows["recurrent_gemma"]
    assert "error" not in row, row.get("error")
    assert row["same_as_hf"] and row["unchanged"] and row["raw_processing"] == []
    refused = row["runner_refused"]
    assert refused.startswith("UnsupportedModelError") and "bridge.original_model" in refused, refused
    # compatibility mode reaches no attention weight there; what it rewrites (the unembedding) is read as the model
    # holds it, the processing recorded
    assert row["compat_processing"] == ["transformer_lens_bridge:process_weights"], row
    assert row["compat_attention_same_as_hf"] and row["compat_unembedding_as_held"], row


def test_a_processed_bridge_around_gemma4_is_refused_with_the_reason(rows):
    """Gemma 4's heads of two widths do not fit TransformerLens's stacked projections, which its
    processing rewrites: the raw bridge is read (above), the processed one refused, saying why."""
    refused = rows["gemma4"]["compat_refused"]
    assert refused and refused.startswith("UnsupportedModelError") and "differ in width" in refused, refused


def test_unsupported_architecture_is_refused_by_name(rows):
    refused = rows["hunyuan_v1_dense"]["refused"]
    assert refused and "UnsupportedModelError" in refused and "model_type='hunyuan_v1_dense'" in refused


def test_no_environment_means_a_skip_not_a_pass(tmp_path, monkeypatch):
    """Without the environment the fixture skips, never passes (guard against a vacuous green); a
    Python named by the variable is taken first."""
    monkeypatch.setenv("COMPSCOPE_TL4_PYTHON", str(tmp_path / "no-such-python"))
    with pytest.raises(pytest.skip.Exception, match=r"`make \.venv-none` builds one \(or set COMPSCOPE_TL4_PYTHON\)"):
        python_of(".venv-none", "COMPSCOPE_TL4_PYTHON", "transformer-lens 4 environment")
    named = tmp_path / "python"
    named.write_text("")
    monkeypatch.setenv("COMPSCOPE_TL4_PYTHON", str(named))
    assert python_of(".venv-none", "COMPSCOPE_TL4_PYTHON", "transformer-lens 4 environment") == named
