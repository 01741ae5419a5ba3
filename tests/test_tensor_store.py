"""``TensorStore``: names read under the model's names, missing tensors named with look-alikes, dtypes kept."""

from __future__ import annotations

import re

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


def test_a_missing_tensor_is_named_with_up_to_three_of_the_same_ending():
    """``take`` of a name the store lacks names the file and, where stored names end in the same two
    parts (``q_proj.weight``), the first three of them; none where nothing ends alike."""
    t = torch.ones(2)
    names = [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(4)] + ["model.norm.weight"]
    store = TensorStore.from_dict(dict.fromkeys(names, t), "model.safetensors")
    with pytest.raises(WeightError) as e:
        store.take("model.layers.0.attn.q_proj.weight")
    assert str(e.value) == ("tensor 'model.layers.0.attn.q_proj.weight' is missing from model.safetensors (similar "
                            "names: " + ", ".join(names[:3]) + ")")
    with pytest.raises(WeightError) as e:
        store.take("model.layers.0.attn.k_proj.bias")
    assert str(e.value) == "tensor 'model.layers.0.attn.k_proj.bias' is missing from model.safetensors"
    assert store.take("model.layers.0.attn.k_proj.bias", required=False) is None
    # the file named: the store's source; else its one file, or the first of several and how many more
    two = TensorStore({"a": lambda: t, "b": lambda: t}, {"a": "x.safetensors", "b": "y.safetensors"})
    for where, s in (("x.safetensors (+1 more files)", two), ("an empty checkpoint", TensorStore({}, {})),
                     ("the folder", TensorStore({}, {}, source="the folder"))):
        with pytest.raises(WeightError, match=rf"^tensor 'c' is missing from {re.escape(where)}$"):
            s.take("c")


def test_a_bias_beside_a_weight_read_is_unread_until_taken_or_left():
    """``unread_biases``: each ``X.bias`` stored beside an ``X.weight`` that was read, while it is not read
    or left on purpose itself; a bias beside a weight not read is not listed."""
    t = torch.ones(2)
    store = TensorStore.from_dict(dict.fromkeys(["a.weight", "a.bias", "bb.weight", "bb.bias", "c.bias"], t), "m")
    assert store.unread_biases() == []
    store.take("a.weight")
    store.take("bb.weight")
    assert store.unread_biases() == ["a.bias", "bb.bias"]
    store.take("a.bias")
    store.leave("bb.bias")
    assert store.unread_biases() == [] and store.taken("bb.bias") and not store.taken("c.bias")


def test_a_renamed_tensor_keeps_its_stored_dtype():
    """A tensor read under a new name (:meth:`TensorStore.renamed`) counts its stored dtype as read, as
    under its own name."""
    store = TensorStore.from_dict({"a.to_q.weight": torch.ones(2, dtype=torch.float16),
                                   "a.norm.weight": torch.ones(2, dtype=torch.bfloat16)}, "model.safetensors")
    named = store.renamed([(r"\.to_q\.", ".q_proj.")])
    assert named.take("a.q_proj.weight").dtype == torch.float32 and named.source_dtypes == "float16"
    named.take("a.norm.weight")
    assert named.source_dtypes == store.source_dtypes == "bfloat16+float16"
