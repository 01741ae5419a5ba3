"""DPR: its context encoder, question encoder and reader read as the BERT each holds, and run on data
as the class its folder's config names (one model type, three classes whose tensors sit under
different names: the auto class would build the question encoder for every one)."""

from __future__ import annotations

import pytest
import torch

import compscope
from compscope.data.runner import layer_state, runner_for

transformers = pytest.importorskip("transformers")

from hf_tiny import perturbed  # noqa: E402


@pytest.mark.parametrize("cls_name, inner", [("DPRContextEncoder", "ctx_encoder.bert_model"),
                                             ("DPRQuestionEncoder", "question_encoder.bert_model"),
                                             ("DPRReader", "span_predictor.encoder.bert_model")])
def test_each_dpr_model_reads_as_its_bert_and_runs_as_itself(tmp_path, cls_name, inner):
    config = transformers.DPRConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                    num_attention_heads=2, max_position_embeddings=20)
    model = perturbed(lambda: getattr(transformers, cls_name)(config), seed=7, scale=0.25)
    g = torch.Generator().manual_seed(7)
    model.save_pretrained(tmp_path)
    bert = model
    for part in inner.split("."):
        bert = getattr(bert, part)
    hw, ref = compscope.load(tmp_path), compscope.load(bert)
    assert hw.meta.family == ref.meta.family == "dpr" and not hw.causal  # (the inner BERT, its tensors unprefixed)
    for name in ("W_Q", "W_K", "W_V", "W_O", "b_Q", "W_E", "W_pos"):
        assert torch.equal(getattr(hw, name), getattr(ref, name)), name
    runner = runner_for(tmp_path, progress=False, device="cpu")
    assert type(runner.model).__name__ == cls_name
    tr = runner.trace(torch.randint(2, 40, (2, 9), generator=g))
    for layer in range(2):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=1e-5,
                                   rtol=1e-5)
