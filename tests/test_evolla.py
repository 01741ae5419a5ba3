"""Evolla (family ``evolla``): its language model read from a folder of the whole protein-language model, and run on
text as the class that folder names (transformers' auto classes do not build it). (The model's heads, hooks and
interventions: the ``evolla-aligner-layer-text-only`` variant of ``hf_tiny``.)"""

from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import compscope  # noqa: E402

transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("stated_rope", [True, False])
def test_an_evolla_folder_reads_and_runs_on_text_as_the_class_it_names(tmp_path, stated_rope):
    """The folder's heads and head are the model object's; its sequence aligner not read, said; a config stating no
    rope is turned at Evolla's default base, 500000, as transformers builds it (the runner's check that the attention
    it recomputes is the model's holds); it runs as EvollaForProteinText2Text."""
    from hf_tiny import BY_ID, make_config, random_ids

    from compscope.data.runner import runner_for, transformers_at_least

    variant = BY_ID["evolla-aligner-layer-text-only"]
    cfg = transformers.EvollaConfig(**{k: v for k, v in variant.config.items() if k != "rope_parameters"},
                                    rope_theta=600.0) if not transformers_at_least(5) else make_config(variant)
    torch.manual_seed(0)
    model = transformers.EvollaForProteinText2Text(cfg).eval()
    model.save_pretrained(tmp_path)
    if not stated_rope:
        path = tmp_path / "config.json"
        saved = json.loads(path.read_text())
        saved.pop("rope_parameters", None)
        saved.pop("rope_theta", None)
        path.write_text(json.dumps(saved))
    hw = compscope.load(tmp_path)
    assert hw.meta.family == "evolla" and torch.equal(hw.W_U, model.lm_head.weight.detach())
    assert any("Evolla's sequence aligner" in n for n in hw.meta.notes)
    base = 600.0 if stated_rope else 500_000.0
    want = 1.0 / base ** (torch.arange(0, hw.d_head, 2, dtype=torch.float64) / hw.d_head)
    torch.testing.assert_close(hw.rotary.inv_freq.double(), want.expand(hw.n_layers, -1), rtol=1e-6, atol=0)
    if stated_rope:
        ref = compscope.load(model)
        for name in ("W_Q", "W_K", "W_V", "W_O", "W_E"):
            assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    if not transformers_at_least(5):  # (its eager attention does not repeat grouped K/V heads there)
        return
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model) is transformers.EvollaForProteinText2Text
    runner.trace(random_ids())
    assert runner._agreed
