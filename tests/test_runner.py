"""The runner: hooks each family owns, on tiny random configs (no downloads), and the toy model
behind the same interface. What is hooked, recomputed per head from ``HeadWeights``, must give
the module's own attention output (summed over heads) and its own attention pattern
(``output_attentions``), at float32 tolerance."""

import pytest
import torch

import compscope
from compscope.core.attention import combine
from compscope.data.runner import HFRunner, ToyRunner, layer_state, runner_for

from hf_tiny import VARIANTS, build, random_ids

ATOL = 2e-5


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_hooks_and_per_head_recomputation_match_the_module(variant):
    model = build(variant)
    hw = compscope.load(model)
    runner = runner_for(model, hw)
    assert isinstance(runner, HFRunner)
    ids = random_ids()
    tr = runner.trace(ids)
    with torch.no_grad():
        res = model(input_ids=ids, output_attentions=True)
    assert len(tr.resid) == len(tr.attn_out) == hw.n_layers == len(res.attentions)
    for layer in range(hw.n_layers):
        st = layer_state(hw, layer, tr.resid[layer])
        scale = max(1.0, float(tr.attn_out[layer].abs().max()))
        torch.testing.assert_close(st.out, tr.attn_out[layer], atol=ATOL * scale, rtol=0)
        torch.testing.assert_close(combine(hw, layer, st.outputs), tr.attn_out[layer], atol=ATOL * scale, rtol=0)
        torch.testing.assert_close(st.pattern, res.attentions[layer].float(), atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_post_ln_traces_carry_the_sums_their_norms_take(variant):
    """Post-LN (BERT): the first norm takes residual + attention output, and the two norms, in
    turn, give the next layer's residual; pre-LN traces carry none."""
    model = build(variant, **({"num_hidden_layers": 3} if variant.kind == "bert" else {}))
    runner = runner_for(model, compscope.load(model))
    tr = runner.trace(random_ids())
    if variant.kind != "bert":
        assert tr.norm_in is None and runner.post_norms is None
        return
    assert len(tr.norm_in) == len(runner.post_norms) == 3
    with torch.no_grad():
        for layer, ((u, v), (ln1, ln2)) in enumerate(zip(tr.norm_in, runner.post_norms)):
            torch.testing.assert_close(u, tr.resid[layer] + tr.attn_out[layer], atol=ATOL, rtol=0)
            if layer + 1 < 3:
                torch.testing.assert_close(ln2(v), tr.resid[layer + 1], atol=ATOL, rtol=0)
            assert float((v - ln1(u)).abs().max()) > 0.1  # the MLP's output is in v


@pytest.mark.parametrize("variant, n_ctx", [("gpt2", 32), ("opt", 32), ("gptj-interleaved-rotary", 32), ("llama-mha", None)])
def test_models_that_cannot_run_past_their_context_say_so(variant, n_ctx):
    """Learned positions (GPT-2, OPT) and GPT-J's table of rotary sines bound the sequences a model
    runs; other rotary models run past their training context. A longer batch is refused by name."""
    from hf_tiny import BY_ID

    model = build(BY_ID[variant])
    runner = runner_for(model, compscope.load(model))
    assert runner.n_ctx == n_ctx
    if n_ctx is not None:
        with pytest.raises(compscope.OptionError, match="use shorter sequences"):
            runner.trace(torch.zeros(1, n_ctx + 1, dtype=torch.long))


def test_the_toy_model_runs_behind_the_same_interface():
    runner = runner_for("induction-2l")
    assert isinstance(runner, ToyRunner)
    from compscope.toy import repeated_random

    tokens = repeated_random(4, 16, runner.hw.n_vocab, seed=3)
    tr = runner.trace(tokens)
    cache: dict = {}
    with torch.no_grad():
        runner.model(tokens, cache=cache)
    for layer in range(runner.hw.n_layers):
        st = layer_state(runner.hw, layer, tr.resid[layer])
        torch.testing.assert_close(st.pattern, cache[f"pattern.{layer}"], atol=1e-6, rtol=0)
        torch.testing.assert_close(st.outputs, cache[f"head_out.{layer}"], atol=1e-5, rtol=0)


def test_runner_refuses_what_it_cannot_run(tmp_path):
    with pytest.raises(compscope.OptionError, match="cannot run a HeadWeights"):
        runner_for(compscope.load("induction-2l"))  # weights alone do not run
    with pytest.raises(compscope.OptionError, match="unprocessed"):
        runner_for("induction-2l", compscope.load("induction-2l", fold_value_bias=True))
    runner = runner_for("induction-2l")
    with pytest.raises(compscope.OptionError, match="token ids"):
        runner.trace(torch.tensor([[0, runner.hw.n_vocab]]))


def test_a_running_model_that_is_not_the_one_read_is_refused_on_its_first_trace():
    """The runner checks, on its first trace, that each layer's attention recomputed from the
    ``HeadWeights`` is what the running model added. Weights of another model (here: one query
    row of layer 1 scaled, as a reader that converts a file differently would) are refused, naming
    the layer, before any data-based number is made from them; the model they were read from runs."""
    import dataclasses

    from hf_tiny import BY_ID

    model = build(BY_ID["llama-gqa-bias"])
    hw = compscope.load(model)
    other = dataclasses.replace(hw, W_Q=hw.W_Q.clone())
    other.W_Q[1, 0, 0] *= 3.0
    with pytest.raises(compscope.UnsupportedModelError, match="attention at layer 1 is not what compscope recomputes"):
        runner_for(model, other).trace(random_ids())
    runner_for(model, hw).trace(random_ids())  # the weights it was read from: no complaint
