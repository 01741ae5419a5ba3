"""``TensorStore.renamed``: a model maker's file names read under the loaded model's names."""

from __future__ import annotations

import pytest
import torch

from compscope import WeightError
from compscope.loading.checkpoint import LEGACY_NORM_NAMES, TensorStore


def test_renamed_reads_a_files_names_as_the_loaded_models_and_keeps_a_stored_name():
    q, o, kept, other = torch.ones(2, 2), torch.zeros(2, 2), torch.full((2,), 3.0), torch.full((2,), 4.0)
    store = TensorStore.from_dict({"layers.0.self_attn.to_q.weight": q, "layers.0.self_attn.to_out.weight": o,
                                   "enc.LayerNorm.gamma": kept, "enc.LayerNorm.weight": other}, "model.safetensors")
    rules = ((r"\.self_attn\.to_q\.", ".self_attn.q_proj."), (r"\.self_attn\.to_out\.", ".self_attn.o_proj."),
             *LEGACY_NORM_NAMES)
    named = store.renamed(rules)
    assert set(named.names()) == {"layers.0.self_attn.q_proj.weight", "layers.0.self_attn.o_proj.weight",
                                  "enc.LayerNorm.gamma", "enc.LayerNorm.weight"}  # (a stored name is not replaced)
    assert torch.equal(named.take("layers.0.self_attn.q_proj.weight", (2, 2)), q)
    assert torch.equal(named.take("enc.LayerNorm.weight"), other)
    assert named.origin("layers.0.self_attn.o_proj.weight") == "model.safetensors"
    with pytest.raises(WeightError, match="to_q"):  # the file's own name is no longer read
        named.take("layers.0.self_attn.to_q.weight")
    assert store.renamed(()) is store and store.renamed([(r"nothing", "x")]) is store
