"""The runner: hooks each family owns, on tiny random configs (no downloads), and the toy model
behind the same interface. What is hooked, recomputed per head from ``HeadWeights``, must give
the module's own attention output (summed over heads) and its own attention pattern
(``output_attentions``), at float32 tolerance."""

import re
import sys

import pytest
import torch

import compscope
from compscope.core.attention import combine
from compscope.data.runner import HFRunner, ToyRunner, layer_state, runner_for

from hf_tiny import (DICT_LAYERS, HANDED_ON, HYBRIDS, SIDE_BY_SIDE, VARIANTS, attentions, build, model_inputs, random_ids,
                     transformers_at_least, word_tokenizer)

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
        res = attentions(model(**model_inputs(model, ids), output_attentions=True))
    if res is None and variant.config_cls == "RecurrentGemmaConfig" and not transformers_at_least(5, 13):
        res = [None] * hw.n_layers  # (its patterns are returned from transformers 5.13 on: the hooks checked alone)
    assert len(tr.resid) == len(tr.attn_out) == hw.n_layers == len(res)
    for layer in range(hw.n_layers):
        st = layer_state(hw, layer, tr.resid[layer])
        scale = max(1.0, float(tr.attn_out[layer].abs().max()))
        torch.testing.assert_close(st.out, tr.attn_out[layer], atol=ATOL * scale, rtol=0)
        torch.testing.assert_close(combine(hw, layer, st.outputs), tr.attn_out[layer], atol=ATOL * scale, rtol=0)
        pattern = st.pattern
        if variant.config_cls in ("GraniteSWAConfig", "GraniteMoeSWAConfig"):  # it returns the softmax before its
            # sink scales the output
            pattern = pattern / pattern.sum(-1, keepdim=True)
            assert float(st.pattern.sum(-1).min()) < 0.99  # (the sink takes a share: the pattern sums to less)
        if res[layer] is None:
            continue
        want = res[layer].float()
        if variant.config_cls in ("LongformerConfig", "LEDConfig"):  # its attentions are bands around the diagonal
            want = _dense_from_band(want, ids.shape[1])
        if variant.config_cls == "LongT5Config":  # its attentions are blocks, each against three
            want = _dense_from_blocks(want, ids.shape[1])
        if variant.config_cls in ("SqueezeBertConfig", "ProphetNetConfig"):  # it returns the logits, before their softmax
            want = want.softmax(-1)
        torch.testing.assert_close(pattern, want, atol=ATOL, rtol=0)


def _dense_from_band(band: torch.Tensor, n: int) -> torch.Tensor:
    """Longformer's attentions ``(batch, head, seq, 2w + 1)``, column ``c`` of query ``i`` its weight on key
    ``i + c − w``, as ``(batch, head, n, n)``; keys outside ``0..n-1`` (before the start, or its padding) left out."""
    w = (band.shape[-1] - 1) // 2
    dense = band.new_zeros(*band.shape[:2], n, n)
    for i in range(n):
        for c in range(2 * w + 1):
            if 0 <= i + c - w < n:
                dense[:, :, i, i + c - w] = band[:, :, i, c]
    return dense


def _dense_from_blocks(blocks: torch.Tensor, n: int) -> torch.Tensor:
    """LongT5's local attentions ``(batch, block, head, b, 3b)``, column ``c`` of row ``q`` in block ``k`` the weight of
    query ``k b + q`` on key ``(k − 1) b + c``, as ``(batch, head, n, n)``; positions outside ``0..n-1`` left out."""
    b = blocks.shape[-2]
    dense = blocks.new_zeros(blocks.shape[0], blocks.shape[2], n, n)
    for k in range(blocks.shape[1]):
        for q in range(b):
            for c in range(3 * b):
                i, j = k * b + q, (k - 1) * b + c
                if 0 <= i < n and 0 <= j < n:
                    dense[:, :, i, j] = blocks[:, k, :, q, c]
    return dense


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_post_ln_traces_carry_the_sums_their_norms_take(variant):
    """Post-LN (BERT): the first norm takes residual + attention output, and the two norms, in
    turn, give the next layer's residual; pre-LN traces carry none."""
    layers = {"bert": {"num_hidden_layers": 3}, "rotary_bert": {"num_hidden_layers": 3}, "altclip": {"num_hidden_layers": 3},
              "git": {"num_hidden_layers": 3}, "squeezebert": {"num_hidden_layers": 3},
              "gpt1": {"n_layer": 3}, "xlm": {"n_layers": 3}}.get(variant.kind, {})
    if variant.kind == "bart" and variant.config_cls in ("BartConfig", "BlenderbotSmallConfig", "MarianConfig",
                                                         "LEDConfig", "FSMTConfig"):
        layers = {"encoder_layers": 3}  # (BART's kin, post-LN)
    if variant.config_cls == "ProphetNetConfig":
        layers = {"num_encoder_layers": 3}
    if variant.config.get("do_layer_norm_before") is False:
        layers = {"num_hidden_layers": 3}  # (OPT-350m, post-LN)
    model = build(variant, **layers)
    runner = runner_for(model, compscope.load(model))
    tr = runner.trace(random_ids())
    if not layers:
        assert tr.norm_in is None and runner.post_norms is None
        return
    assert len(tr.norm_in) == len(runner.post_norms) == 3
    with torch.no_grad():
        for layer, ((u, v), (ln1, ln2)) in enumerate(zip(tr.norm_in, runner.post_norms)):
            torch.testing.assert_close(u, tr.resid[layer] + tr.attn_out[layer], atol=ATOL, rtol=0)
            if layer + 1 < 3:
                torch.testing.assert_close(ln2(v), tr.resid[layer + 1], atol=ATOL, rtol=0)
                # the weights' attn_norm row of the next layer is the norm that made its residual
                torch.testing.assert_close(runner.hw.attn_norm.apply(v, layer + 1), tr.resid[layer + 1], atol=ATOL,
                                           rtol=0)
            assert float((v - ln1(u)).abs().max()) > 0.1  # the MLP's output is in v


@pytest.mark.parametrize("variant, n_ctx", [("gpt2", 32), ("opt", 32), ("gptj-interleaved-rotary", 32),
                                            ("llama-mha", None), ("bert", 32), ("roberta-offset-positions", 32)])
def test_models_that_cannot_run_past_their_context_say_so(variant, n_ctx):
    """Learned positions (GPT-2, OPT, BERT) and GPT-J's table of rotary sines bound the sequences a model
    runs; other rotary models run past their training context. A longer batch is refused by name. RoBERTa's
    table has 34 rows, of which the first two (up to its padding id) no sequence reads: 32 positions."""
    from hf_tiny import BY_ID

    model = build(BY_ID[variant])
    runner = runner_for(model, compscope.load(model))
    assert runner.n_ctx == n_ctx
    if n_ctx is not None:
        with pytest.raises(compscope.OptionError, match="use shorter sequences"):
            runner.trace(torch.zeros(1, n_ctx + 1, dtype=torch.long))


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_a_changed_run_given_its_clean_trace_leaves_the_layers_before_the_change_out(variant, k):
    """``trace(tokens repeated k times, add={l: δ}, clean=trace(tokens))`` of every family: the layers
    before ``l`` are not run (the hook on layer 0's residual never fires), every residual, attention
    output and post-LN norm input equals the changed run from layer 0 (float32, 1e-5 of the scale),
    and the clean trace is left as it was."""
    model = build(variant)
    runner = runner_for(model, compscope.load(model))
    # a hybrid's attention layers (Granite 4) are not the elements of one module list, XLM's layers are no
    # modules at all, T5's first layer hands the others its bias, and SqueezeBERT's layers return dicts: no layer is
    # left out there
    hybrid = variant.kind in (*HYBRIDS, *SIDE_BY_SIDE, *HANDED_ON, *DICT_LAYERS)
    assert (runner.layer_modules is None) == hybrid
    assert hybrid or len(runner.layer_modules) == runner.hw.n_layers
    ids = random_ids()
    clean = runner.trace(ids)
    before = [r.clone() for r in clean.resid + clean.attn_out]
    last = runner.hw.n_layers - 1
    delta = torch.randn(k * ids.shape[0], ids.shape[1], runner.hw.d_model, generator=torch.Generator().manual_seed(0))
    calls = []
    # (where the layer module itself reads the residual, Higgs Audio's, a stand-in still calls its hooks: watch its
    # attention, which the stand-in does not run)
    first = runner.points[0][0]
    watched = runner.points[0][1] if runner.layer_modules and first is runner.layer_modules[0] else first
    handle = watched.register_forward_pre_hook(lambda m, a: calls.append(1))
    try:
        full = runner.trace(ids.repeat(k, 1), add={last: delta})
        assert len(calls) == 1
        part = runner.trace(ids.repeat(k, 1), add={last: delta}, clean=clean)
        assert len(calls) == (2 if hybrid else 1)  # layer 0 left out (a hybrid's: run again)
    finally:
        handle.remove()
    scale = max(1.0, max(float(r.abs().max()) for r in full.resid))
    for a, b in zip(full.resid + full.attn_out, part.resid + part.attn_out):
        torch.testing.assert_close(b, a, atol=1e-5 * scale, rtol=0)
    assert (full.norm_in is None) == (part.norm_in is None)
    for a, b in zip(full.norm_in or (), part.norm_in or ()):
        torch.testing.assert_close(b[0], a[0], atol=1e-5 * scale, rtol=0)
        torch.testing.assert_close(b[1], a[1], atol=1e-5 * scale, rtol=0)
    # δ is in it, in the residual's units (Granite's hooked module returns 1 / residual_multiplier of that)
    torch.testing.assert_close(full.attn_out[last] - clean.attn_out[last].repeat(k, 1, 1), delta, atol=1e-5 * scale, rtol=0)
    for a, b in zip(before, clean.resid + clean.attn_out):
        assert torch.equal(a, b)
    for layer in runner.layer_modules or ():
        assert "forward" not in layer.__dict__  # the modules are as they were


def test_layer_modules_are_the_one_list_whose_elements_hold_each_layers_two_hook_points():
    """``layer_modules(body, points)``: the module list whose i-th element holds both of layer i's hook points.
    Lists of the same length met before it are passed over: one holding other modules, one holding each layer's
    norm alone, one its attention alone, one whose first element alone is a layer, one with the layers in another
    order; None where no list holds them."""
    from compscope.data.runner.hf import layer_modules

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.attn = torch.nn.LayerNorm(4), torch.nn.Linear(4, 4)

    layers = [Layer() for _ in range(3)]
    points = [(m.norm, m.attn) for m in layers]
    body = torch.nn.Module()  # (registered in this order: body.modules() meets the decoys first)
    body.scales = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in layers)
    body.norms = torch.nn.ModuleList(m.norm for m in layers)
    body.attns = torch.nn.ModuleList(m.attn for m in layers)
    body.first = torch.nn.ModuleList([layers[0], torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
    body.turned = torch.nn.ModuleList(layers[::-1])
    assert layer_modules(body, points) is None
    body.layers = torch.nn.ModuleList(layers)
    found = layer_modules(body, points)
    assert found is not None and len(found) == 3 and all(a is b for a, b in zip(found, layers))
    assert layer_modules(body, points[:2]) is None  # (no list of two)


@pytest.mark.parametrize("variant", VARIANTS, ids=str)
def test_a_run_for_residuals_only_leaves_the_last_layer_out(variant):
    """``trace(..., last=False)`` of every family, changed at the layer before the last and given the
    clean trace: the last layer's attention never runs (its output hook never fires), every residual,
    the last layer's input included, and every earlier attention output equal the run of every layer
    (float32, 1e-5 of the scale); the last attention output (and post-LN norm inputs) are None."""
    model = build(variant)
    runner = runner_for(model, compscope.load(model))
    ids, L = random_ids(), runner.hw.n_layers
    clean = runner.trace(ids)
    delta = torch.randn(ids.shape[0], ids.shape[1], runner.hw.d_model, generator=torch.Generator().manual_seed(1))
    full = runner.trace(ids, add={L - 2: delta}, clean=clean)
    calls = []
    handle = runner.points[-1][1].register_forward_hook(lambda m, a, o: calls.append(1))
    try:
        part = runner.trace(ids, add={L - 2: delta}, clean=clean, last=False)
    finally:
        handle.remove()
    hybrid = variant.kind in (*HYBRIDS, *SIDE_BY_SIDE, *HANDED_ON, *DICT_LAYERS)  # (not one module list, or handed on: all run)
    assert calls == ([1] if hybrid else []) and part.attn_out[-1] is None
    assert part.norm_in is None if full.norm_in is None else part.norm_in[-1] is None
    scale = max(1.0, max(float(r.abs().max()) for r in full.resid))
    for a, b in zip(full.resid + full.attn_out[:-1], part.resid + part.attn_out[:-1]):
        torch.testing.assert_close(b, a, atol=1e-5 * scale, rtol=0)
    assert float((full.resid[-1] - clean.resid[-1]).abs().max()) > 1e-3  # δ reaches the last layer's input
    for layer in runner.layer_modules or ():
        assert "forward" not in layer.__dict__  # the modules are as they were
    again = runner.trace(ids)
    assert again.attn_out[-1] is not None and torch.equal(again.attn_out[-1], clean.attn_out[-1])


def test_a_run_changed_at_two_layers_given_its_clean_trace_runs_from_the_first():
    """``add`` at layers 0 and the last, given the clean trace: every layer runs (layer 0 is changed) and
    every value equals the same changed run without the clean trace; changed at layer 1 alone, layer 0
    alone is left out."""
    from hf_tiny import BY_ID

    model = build(BY_ID["llama-gqa-bias"])
    runner = runner_for(model, compscope.load(model))
    ids, L = random_ids(), runner.hw.n_layers
    clean = runner.trace(ids)
    gen = torch.Generator().manual_seed(2)
    for changed, runs in (((0, L - 1), L), ((1,), L - 1)):
        add = {l: torch.randn(*ids.shape, runner.hw.d_model, generator=gen) for l in changed}
        full = runner.trace(ids, add=add)
        calls = []
        # (a left-out layer's module still calls its hooks: watch the attention inside, which it does not run)
        handles = [attn.register_forward_pre_hook(lambda m, a: calls.append(1)) for _, attn in runner.points]
        try:
            part = runner.trace(ids, add=add, clean=clean)
        finally:
            for h in handles:
                h.remove()
        assert len(calls) == runs
        for a, b in zip(full.resid + full.attn_out, part.resid + part.attn_out):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=0)
        assert (float((part.resid[1] - clean.resid[1]).abs().max()) > 1e-2) == (0 in changed)  # layer 0's change
        # reaches layer 1


def test_a_forward_set_on_a_layer_module_is_put_back_after_a_changed_run():
    """accelerate's hooks (a model loaded with a device map) set each module's own ``forward``; a
    changed run that leaves the layer out puts that one back, and later runs go through it again."""
    from accelerate.hooks import ModelHook, add_hook_to_module

    from hf_tiny import BY_ID

    class Count(ModelHook):
        calls = 0

        def pre_forward(self, module, *args, **kwargs):
            Count.calls += 1
            return args, kwargs

    model = build(BY_ID["llama-gqa-bias"])
    runner = runner_for(model, compscope.load(model))
    add_hook_to_module(runner.layer_modules[0], Count())
    own = runner.layer_modules[0].__dict__["forward"]
    ids = random_ids()
    clean = runner.trace(ids)
    assert Count.calls == 1
    runner.trace(ids, add={1: torch.zeros(*ids.shape, runner.hw.d_model)}, clean=clean)
    assert Count.calls == 1 and runner.layer_modules[0].__dict__["forward"] is own
    again = runner.trace(ids)
    assert Count.calls == 2
    torch.testing.assert_close(again.resid[1], clean.resid[1], atol=0, rtol=0)


def test_a_clean_trace_of_other_sequences_is_refused():
    from hf_tiny import BY_ID

    model = build(BY_ID["llama-gqa-bias"])
    runner = runner_for(model, compscope.load(model))
    ids = random_ids()
    clean = runner.trace(ids)
    delta = torch.zeros(ids.shape[0], ids.shape[1], runner.hw.d_model)
    with pytest.raises(compscope.OptionError, match="clean: a trace of other sequences"):
        runner.trace((ids + 1) % runner.hw.n_vocab, add={1: delta}, clean=clean)
    with pytest.raises(compscope.OptionError, match="clean: expected a Trace"):
        runner.trace(ids, add={1: delta}, clean="not a trace")


def test_the_toy_model_runs_behind_the_same_interface():
    runner = runner_for("induction-2l")
    assert isinstance(runner, ToyRunner)
    from compscope.toy import repeated_random

    tokens = repeated_random(4, 16, runner.hw.n_vocab, seed=3)
    tr = runner.trace(tokens)  # on the runner's device (CUDA where there is one)
    cache: dict = {}
    with torch.no_grad():
        runner.model(tokens.to(runner.device), cache=cache)
    for layer in range(runner.hw.n_layers):
        st = layer_state(runner.weights_here(), layer, tr.resid[layer])
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


_SHAPE = "tokens must be a non-empty (batch, seq) tensor, got "


@pytest.mark.parametrize("tokens, message", [
    (torch.zeros(8, dtype=torch.long), _SHAPE + "shape (8,)"),
    (torch.zeros(1, 1, 8, dtype=torch.long), _SHAPE + "shape (1, 1, 8)"),
    (torch.zeros(0, 8, dtype=torch.long), _SHAPE + "shape (0, 8)"),
    (torch.zeros(2, 0, dtype=torch.long), _SHAPE + "shape (2, 0)"),
    ([[1, 2, 3]], _SHAPE + "a list"),
    (torch.zeros(1, 8), "tokens must be integer token ids, got dtype float32"),
    (torch.zeros(1, 8, dtype=torch.complex64), "tokens must be integer token ids, got dtype complex64"),
    (torch.zeros(1, 8, dtype=torch.bool), "tokens must be integer token ids, got dtype bool"),
    (torch.tensor([[3, -1, 5]]), "token ids must lie in 0..63 for induction-2l"),
    (torch.tensor([[3, 64, 5]]), "token ids must lie in 0..63 for induction-2l"),
    (torch.zeros(1, 65, dtype=torch.long), "sequences of 65 tokens are longer than induction-2l takes (64)"),
], ids=["1-d", "3-d", "no-sequence", "no-position", "list", "float", "complex", "bool", "negative", "past-vocab",
        "past-context"])
def test_a_trace_names_the_tokens_it_cannot_run(tokens, message):
    """The toy model (64 tokens, 64 positions): each bad batch refused before the model runs, by
    what is wrong with it; the extremes it takes run (ids 0 and 63, one token, all 64 positions)."""
    runner = runner_for("induction-2l", progress=False)
    with pytest.raises(compscope.OptionError) as got:
        runner.trace(tokens)
    assert str(got.value).startswith(message)
    for fine in (torch.tensor([[0, 63, 0, 63]]), torch.tensor([[63]]), torch.zeros(2, 64, dtype=torch.int32)):
        tr = runner.trace(fine)
        assert tr.resid[0].shape == (*fine.shape, runner.hw.d_model)


def test_weights_here_are_the_weights_asked_for_and_the_latest_copy_is_kept():
    """``weights_here(hw)``: ``hw`` on the runner's device, the runner's own by default; asked again
    for the same weights, the same copy; asked for others, theirs (never the copy kept of the last)."""
    runner = runner_for("induction-2l", progress=False)
    own = runner.weights_here()
    assert runner.weights_here() is own and runner.weights_here(runner.hw) is own
    torch.testing.assert_close(own.W_Q.cpu(), runner.hw.W_Q, atol=0, rtol=0)
    other = runner.hw.replace(W_Q=2 * runner.hw.W_Q)
    theirs = runner.weights_here(other)
    torch.testing.assert_close(theirs.W_Q.cpu(), 2 * runner.hw.W_Q, atol=0, rtol=0)
    assert runner.weights_here(other) is theirs
    torch.testing.assert_close(runner.weights_here().W_Q.cpu(), runner.hw.W_Q, atol=0, rtol=0)


def test_a_trace_names_the_change_it_cannot_add():
    """``add``'s layers are ints 0..L-1 (not bools, not their strings), its changes ``(batch, seq,
    d_model)`` tensors; each refused by what is wrong, before the model runs. The first and last layer,
    and an empty dict (no change), are taken."""
    runner = runner_for("induction-2l", progress=False)
    ids = torch.tensor([[1, 2, 3, 1, 2, 3]])
    d = torch.ones(1, 6, runner.hw.d_model)
    layers = "is not a layer of induction-2l (0..1)"
    for add, message in (([d], "add must be a dict {layer: (batch, seq, d_model) tensor}, got a list"),
                         ({True: d}, f"add: True {layers}"), ({"1": d}, f"add: '1' {layers}"),
                         ({-1: d}, f"add: -1 {layers}"), ({2: d}, f"add: 2 {layers}"),
                         ({0: d[:, :5]}, "add[0]: expected a (batch, seq, d_model) = (1, 6, 64) tensor, got shape "
                                         "(1, 5, 64)"),
                         ({1: d.tolist()}, "add[1]: expected a (batch, seq, d_model) = (1, 6, 64) tensor, got a list")):
        with pytest.raises(compscope.OptionError) as got:
            runner.trace(ids, add=add)
        assert str(got.value) == message
    clean = runner.trace(ids)
    assert torch.equal(runner.trace(ids, add={}).resid[1], clean.resid[1])
    for layer in (0, 1):
        changed = runner.trace(ids, add={layer: d})
        torch.testing.assert_close(changed.attn_out[layer] - clean.attn_out[layer], d, atol=1e-5, rtol=0)


@pytest.mark.parametrize("bos", [None, 5])
def test_repeats_are_cut_to_the_context_by_hand(bos):
    """``repeat_half``: ``[bos] t t`` fits ``n_ctx`` when ``first + 2|t| <= n_ctx``; the default is cut
    to the longest that fits (with a note), a ``|t|`` given that does not fit is refused, and a context
    too short for ``|t| >= 2`` is refused; no context known: the default as it is."""
    runner = runner_for("induction-2l", progress=False)
    runner.bos, first = bos, int(bos is not None)
    runner.n_ctx = None
    assert runner.repeat_half(None, 32) == (32, None) and runner.repeat_half(500, 32) == (500, None)
    runner.n_ctx = 64 + first
    assert runner.repeat_half(None, 32) == (32, None)  # fits exactly: no note
    assert runner.repeat_half(32, 32) == (32, None) and runner.repeat_half(3, 32) == (3, None)
    with pytest.raises(compscope.OptionError, match=rf"^half=33: sequences \[t, t\] of {first + 66} tokens are longer "
                       rf"than induction-2l takes \({64 + first}\); give \|t\| <= 32, or leave it out"):
        runner.repeat_half(33, 32)
    runner.n_ctx = 63 + first  # one short: the default cut to 31
    assert runner.repeat_half(None, 32) == (31, f"|t| cut from 32 to 31 so that [t, t] fits the {63 + first} tokens "
                                                 "induction-2l takes")
    assert runner.repeat_half(None, 8) == (8, None) and runner.repeat_half(31, 8) == (31, None)  # a default that fits
    runner.n_ctx = 4 + first
    assert runner.repeat_half(None, 32)[0] == 2 and runner.repeat_half(2, 32) == (2, None)
    runner.n_ctx = 3 + first
    with pytest.raises(compscope.OptionError, match=rf"^induction-2l takes {3 + first} tokens: too few for repeated "
                       r"sequences \[t, t\] with \|t\| >= 2$"):
        runner.repeat_half(None, 32)
    with pytest.raises(compscope.OptionError, match="^half=2: "):
        runner.repeat_half(2, 32)


@pytest.mark.parametrize("model", ["induction-2l", "llama-gqa-bias"])
def test_a_first_trace_that_is_changed_or_for_residuals_only_leaves_the_check_to_the_next_clean_one(model):
    """The check that the running model computes what compscope read waits for a clean trace of every
    layer: a runner's first trace with ``add``, or with ``last=False``, runs unchecked (checked, the
    change would read as a mismatch, and the missing last layer as nothing to compare); the next clean
    trace is checked, and the one after it not again."""
    from hf_tiny import BY_ID

    if model == "induction-2l":
        runner = runner_for(model, progress=False)
    else:
        built = build(BY_ID[model])
        runner = runner_for(built, compscope.load(built))
    checked = []
    own = runner._check_agreement
    runner._check_agreement = lambda trace, low_precision: (checked.append(1), own(trace, low_precision))
    ids = random_ids() % runner.hw.n_vocab
    delta = torch.randn(*ids.shape, runner.hw.d_model, generator=torch.Generator().manual_seed(3))
    changed = runner.trace(ids, add={0: delta})
    part = runner.trace(ids, last=False)
    assert part.attn_out[-1] is None and checked == []
    clean = runner.trace(ids)
    assert checked == [1]
    torch.testing.assert_close(changed.attn_out[0] - clean.attn_out[0], delta, atol=1e-5, rtol=0)
    runner.trace(ids)
    assert checked == [1]


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
    import transformers

    with pytest.raises(compscope.UnsupportedModelError, match="attention at layer 1 is not what compscope recomputes") \
            as refusal:
        runner_for(model, other).trace(random_ids())
    assert str(refusal.value).endswith(f"no data-based result would hold (run by transformers {transformers.__version__}"
                                       ": if the weights are the model's own, this release may run the family "
                                       "otherwise than its makers do, and another may not)")
    runner_for(model, hw).trace(random_ids())  # the weights it was read from: no complaint


def test_a_folder_runs_without_hub_kernels_where_transformers_turns_them_on(tmp_path, monkeypatch):
    """transformers 5.25 loads kernels from the hub by default (a download, and layers other than the eager ones
    compscope hooks; without the ``kernels`` package, a refusal): the runner asks for none, so a folder runs with the
    environment's switch (which the tests' conftest sets off) unset. Earlier versions load none by default: skipped."""
    from compscope.loading.families.base import transformers_at_least
    from hf_tiny import BY_ID

    if not transformers_at_least(5, 25):
        pytest.skip("transformers before 5.25 loads no hub kernels unless asked")
    monkeypatch.delenv("USE_HUB_KERNELS", raising=False)
    build(BY_ID["llama-gqa-bias"]).save_pretrained(tmp_path)
    runner = runner_for(tmp_path, progress=False)
    assert not runner.model.use_kernels
    runner.trace(random_ids()[:1])


@pytest.mark.parametrize("variant_id", ["llama-gqa-bias", "gemma3-text-mqa-bias", "gpt2", "bert"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_model_from_files_runs_in_16_bit_when_asked(variant_id, dtype, tmp_path):
    """``runner_for(folder, dtype=)``: transformers loads the model in that dtype (half the
    memory), the first trace's agreement check passes at its 16-bit tolerance, and the labels and
    every pair's effect, recomputed in float32 on the 16-bit residuals, stay within 16-bit
    rounding of the float32 run's."""
    from hf_tiny import BY_ID

    from compscope.data.head_labels import activation_labels
    from compscope.data.intervene import intervention_effects
    from compscope.data.sequences import repeats

    build(BY_ID[variant_id]).save_pretrained(tmp_path)
    got, held = {}, {}
    for name in ("float32", dtype):
        runner = runner_for(tmp_path, progress=False, device="cpu", dtype=name)
        assert runner.dtype == getattr(torch, name)
        assert {p.dtype for p in runner.model.parameters()} == {getattr(torch, name)}  # every one, norms too
        held[name] = sum(p.numel() * p.element_size() for p in runner.model.parameters())
        reps = repeats(6, 4, runner.hw.n_vocab, 3, runner.bos)
        labels = activation_labels(runner, reps, batch_size=3, progress=False)
        fx = intervention_effects(runner, reps.tokens, "QKV", batch_size=3, progress=False)
        assert runner.trace(reps.tokens[:1]).resid[0].dtype == torch.float32  # what compscope computes on
        got[name] = {**{f"label {k}": v for k, v in labels.mean.items()}, **{f"effect {k}": v for k, v in fx.by_kind.items()}}
    assert 2 * held[dtype] == held["float32"]  # half the parameter memory
    tol = 2 ** -7 if dtype == "bfloat16" else 2 ** -10  # the 16-bit format's relative rounding, a few times over
    for key, a in got["float32"].items():
        b = got[dtype][key]
        assert torch.isfinite(b).sum() == torch.isfinite(a).sum() > 0, key
        scale = float(a.nan_to_num().abs().max())
        assert float((b - a).nan_to_num().abs().max()) <= 8 * tol * max(scale, 1e-6), key


def test_a_device_that_is_not_there_is_refused_and_a_bar_shows_by_default(tmp_path):
    """``runner_for(..., device=)`` with a CUDA device this machine lacks: refused by name, for a toy
    and for a folder, before anything loads; a runner shows its bars unless asked not to."""
    from compscope.toy import ToyConfig, ToyTransformer
    from compscope.toy.storage import save_toy

    bad = "cuda" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"
    folder = save_toy(ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=8, d_head=4, d_vocab=10, n_ctx=8),
                                     seed=1), tmp_path / "toy")
    for model in ("induction-2l", str(folder)):
        with pytest.raises(compscope.OptionError, match=f"^device={bad!r}: "):
            runner_for(model, device=bad)
    assert runner_for("induction-2l").progress is True and runner_for("induction-2l", progress=False).progress is False
    runner = runner_for("induction-2l", device="cpu")
    assert runner_for(runner, device="cpu") is runner  # where it runs already: taken


def test_runner_for_refuses_weights_beside_a_runner_and_records_the_name():
    """A runner with other weights beside it is refused (it runs with its own); a model named by a string is
    recorded as the command line names it, with no ``--tokenizer`` unless one was given, and a model object is
    not named. (A device that is not there: the test above.)"""
    from compscope.errors import OptionError

    runner = runner_for("induction-2l", progress=False)
    with pytest.raises(OptionError, match="^hw: a runner runs with its own weights"):
        runner_for(runner, runner.hw)
    assert runner.named == ("induction-2l", ())
    assert getattr(runner_for(runner.model, runner.hw, progress=False), "named", None) is None


def test_nothing_stops_a_runner_a_toy_or_a_model_object_from_running():
    """:func:`cannot_run` is None (not a reason, not a falsy stand-in) for a runner, a built-in toy's name
    and a model object, whose runs no file header can stop."""
    from compscope.data.runner.choose import cannot_run

    runner = runner_for("induction-2l", progress=False)
    assert cannot_run(runner) is None and cannot_run("induction-2l") is None and cannot_run(runner.model) is None


def test_dtypes_a_runner_cannot_honour_are_refused():
    """A dtype that is not a floating format, a model object in another dtype (never converted
    behind the user's back), a runner in another dtype, and the toy models (float32 only)."""
    from hf_tiny import BY_ID

    with pytest.raises(compscope.OptionError, match="dtype='int8': a model runs on data in float32, bfloat16, float16"):
        runner_for("induction-2l", dtype="int8")
    with pytest.raises(compscope.OptionError, match="toy models run in float32"):
        runner_for("induction-2l", dtype="bfloat16")
    assert runner_for("induction-2l", dtype=torch.float32).dtype == torch.float32
    model = build(BY_ID["llama-mqa"])
    hw = compscope.load(model)
    with pytest.raises(compscope.OptionError, match=r"computes in float32; convert it yourself \(model.to\(torch.bfloat16\)\)"):
        runner_for(model, hw, dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.float32  # not converted
    runner = runner_for(model.to(torch.bfloat16), hw, dtype="bfloat16")
    assert runner.dtype == torch.bfloat16
    runner.trace(random_ids())  # the agreement check at the 16-bit tolerance
    with pytest.raises(compscope.OptionError, match="the runner given computes in bfloat16"):
        runner_for(runner, dtype="float32")
    assert runner_for(runner) is runner and runner_for(runner, dtype="bfloat16") is runner
    with pytest.raises(compscope.OptionError, match=r"^hw: a runner runs with its own weights \(llama's\)"):
        runner_for(runner, hw)  # (not "cannot run a HFRunner")


def test_validate_runs_a_model_in_16_bit_and_records_it(tmp_path, capsys):
    """``compscope validate FOLDER --model-dtype bfloat16``: the verdict of a tiny random Llama run
    in bfloat16, recorded in run.json; the toy model refuses it in one line."""
    import json

    from hf_tiny import BY_ID

    from compscope.cli.main import main

    build(BY_ID["llama-gqa-bias"]).save_pretrained(tmp_path / "m")
    args = ["validate", str(tmp_path / "m"), "--sequences", "4", "--half", "4", "--intervention-sequences", "2",
            "--metric", "identity", "--device", "cpu", "--model-dtype", "bfloat16", "--out", str(tmp_path / "v")]
    assert main(args) == 0
    run = json.loads((tmp_path / "v" / "run.json").read_text())
    assert run["model_dtype"] == "bfloat16"
    import transformers

    assert (run["compscope"], run["transformers"]) == (compscope.__version__, transformers.__version__)  # what computed it
    capsys.readouterr()
    assert main(["intervene", "--model-dtype", "float16"]) == 2
    assert capsys.readouterr().err.splitlines() == ["compscope: error: dtype='float16': compscope's toy models run in float32"]


def test_a_transformers_older_than_compscope_takes_is_named_before_any_load(tmp_path, monkeypatch):
    """transformers before 4.57 (the floor; tests/test_oldest_versions.py runs 4.57): running a model
    object or files is refused with the version found and the one needed, not with what an older
    ``from_pretrained`` makes of today's arguments."""
    import sys

    model = build(VARIANTS[0])
    model.save_pretrained(tmp_path)
    transformers = sys.modules["transformers"]  # (building a model can put another module object there)
    monkeypatch.setattr(transformers, "__version__", "4.56.2")
    for source in (model, tmp_path):
        with pytest.raises(compscope.OptionError, match=r"needs transformers >= 4\.57, and 4\.56\.2 is installed"):
            runner_for(source, progress=False)
    monkeypatch.setattr(transformers, "__version__", "4.57.0")
    assert isinstance(runner_for(model, progress=False), HFRunner)


class _Bytes:
    """A stand-in tokenizer of one's own: each byte of the text, folded into the tiny vocabulary."""

    def encode(self, text, add_special_tokens=False):
        from hf_tiny import VOCAB

        return [b % VOCAB for b in text.encode()]


class _Wide:
    """Another model's tokenizer: ids past the tiny vocabulary, on long texts only (a short probe passes)."""

    def encode(self, text, add_special_tokens=False):
        return [b % 40 + (100 if len(text) > 200 else 0) for b in text.encode()]


def test_a_transformers_model_object_reads_natural_text_with_the_tokenizer_given():
    """``runner_for(model, tokenizer=...)``: a model object, which carries no tokenizer, estimates its
    metrics on data on natural text cut by that tokenizer (the same windows, seed and BOS as a
    folder's own tokenizer would be given), and every function that takes a model takes the
    runner (``load`` reads it as its weights). A tokenizer that is none, fails, or gives ids past
    the vocabulary is refused by name; so is one for a toy model or an already-made runner."""
    from compscope.core.metrics import activations
    from compscope.data.residual_moments import MetricData, runner_second_moments
    from compscope.data.sequences import natural_text
    from hf_tiny import BY_ID

    model = build(BY_ID["llama-mha"])
    runner = runner_for(model, tokenizer=_Bytes())
    assert compscope.load(runner) is runner.hw and runner.tokenizer is not None
    data = MetricData(sequences=4, length=16, shrinkage="none")
    t = compscope.scores(runner, "K", ["frobenius"], "activations", metric_data=data, progress=False)
    assert t.info["metric_data"] == ("4 sequences of 16 tokens of standard-library docstrings (seed 12346), tokenised "
                                     "by a _Bytes given")
    tokens = natural_text(_Bytes(), 4, 16, 12346, runner.bos)
    plain = runner_for(model)
    assert plain.tokenizer is None
    G = activations(runner_second_moments(plain, tokens, hw=plain.hw, shrinkage="none"), 1e-6, "activations")
    want = compscope.scores(plain.hw, "K", ["frobenius"], G, progress=False)
    torch.testing.assert_close(t.dense("frobenius", "K"), want.dense("frobenius", "K"), rtol=1e-6, atol=1e-9,
                               equal_nan=True)
    on_repeats = compscope.scores(plain, "K", ["frobenius"], "activations", metric_data=data, progress=False)
    assert on_repeats.info["metric_data"].startswith("4 repeated random sequences")
    v = compscope.validate(runner, sequences=4, half=4, intervention_sequences=2, kinds="K", progress=False)
    assert v.options["activations_metric_data"].startswith("64 sequences of 128 tokens of standard-library docstrings")
    assert not any("no tokenizer" in n for n in v.notes)
    c = compscope.head_circuits(runner, content="activations")
    assert c.content == "activations" and c.previous.shape == (2, 4) and c.previous.isfinite().all()

    for tok, needle in ((object(), "tokenizer: 'object' has no encode(text) method"),
                        ("gpt2", "tokenizer='gpt2': give a tokenizer object"),
                        (type("Big", (), {"encode": lambda self, text, add_special_tokens=False: [7, 1000]})(),
                         "tokenizer: token id 1000 is past llama's vocabulary of 61 (ids 0..60)"),
                        (type("Floats", (), {"encode": lambda self, text, add_special_tokens=False: [1.5, 2.0]})(),
                         "tokenizer: gives a list, not integer token ids"),
                        (_Bytes, "tokenizer: encode(text, add_special_tokens=False) failed (TypeError"),
                        (type("Empty", (), {"encode": lambda self, text, add_special_tokens=False: []})(),
                         "encodes text to nothing")):
        with pytest.raises(compscope.OptionError, match=re.escape(needle)):
            runner_for(model, tokenizer=tok)
    wide = runner_for(model, tokenizer=_Wide())  # its probe's ids fit; the text's do not
    with pytest.raises(compscope.OptionError, match=r"the tokenizer: token id 1\d\d is past llama's vocabulary of "
                                                    r"61 \(ids 0\.\.60\): not this model's tokenizer"):
        compscope.scores(wide, "K", ["frobenius"], "activations", metric_data=data, progress=False)
    with pytest.raises(compscope.OptionError, match="toy models, which run on repeated random sequences"):
        runner_for("induction-2l", tokenizer=_Bytes())
    with pytest.raises(compscope.OptionError, match="give it when making the runner"):
        runner_for(runner, tokenizer=_Bytes())


def test_a_model_handed_over_in_training_mode_runs_without_dropout_and_leaves_as_it_came():
    """A model object in training mode (a user's, mid-training; here with dropout 0.5 in attention
    and residual) runs in eval mode, so its traces are the eval model's, and afterwards every
    module has the mode it had (a module the user had put in eval mode stays so); the toy model too."""
    from hf_tiny import BY_ID

    model = build(BY_ID["gpt2"], resid_pdrop=0.5, attn_pdrop=0.5, embd_pdrop=0.5)
    ids = random_ids()
    want = runner_for(model).trace(ids)  # built in eval mode
    model.train()
    model.transformer.h[1].eval()  # a mode of the user's own
    modes = {name: m.training for name, m in model.named_modules()}
    runner = runner_for(model)
    for _ in range(2):
        got = runner.trace(ids)
        for a, b in zip(got.resid + got.attn_out, want.resid + want.attn_out):
            torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert {name: m.training for name, m in model.named_modules()} == modes and model.training
    v = compscope.validate(model, sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",),
                           progress=False)
    assert v.labels is not None and {name: m.training for name, m in model.named_modules()} == modes

    from compscope.toy import ToyConfig, ToyTransformer

    toy = ToyTransformer(ToyConfig(n_layers=2, n_heads=2, d_model=16, d_head=8, d_vocab=20, n_ctx=16), seed=0).train()
    runner_for(toy).trace(torch.randint(0, 20, (2, 8)))
    assert all(m.training for m in toy.modules())


def test_the_command_line_reads_text_with_the_tokenizer_given(tmp_path, capsys):
    """``--tokenizer DIR`` (or a ``tokenizer.json``) gives a folder without a tokenizer natural text in
    scores, pair, intervene, circuits and validate, recorded as the tokenizer's ("tokenised by the
    tokenizer DIR"); a path that holds none, a toy model and another vocabulary are refused by name."""
    import json

    from compscope.cli.main import main
    from hf_tiny import BY_ID

    folder, tok = tmp_path / "llama", word_tokenizer(tmp_path / "tok")
    build(BY_ID["llama-mha"]).save_pretrained(folder)
    text = f"standard-library docstrings (seed 12346), tokenised by the tokenizer {tok}"
    data = ["--metric", "covariance", "--metric-sequences", "4", "--metric-length", "16"]
    assert main(["scores", str(folder), "--kinds", "K", "--measure", "frobenius", "--top", "1", *data,
                 "--tokenizer", str(tok)]) == 0
    assert f"estimated on 4 sequences of 16 tokens of {text}; Ledoit-Wolf" in capsys.readouterr().out
    assert main(["scores", str(folder), "--kinds", "K", "--measure", "frobenius", "--top", "1", *data,
                 "--tokenizer", str(tok / "tokenizer.json")]) == 0
    assert f"tokenised by the tokenizer {tok / 'tokenizer.json'}; Ledoit-Wolf" in capsys.readouterr().out
    assert main(["pair", str(folder), "0.0", "1.1", "--kind", "K", *data, "--tokenizer", str(tok)]) == 0
    assert text in capsys.readouterr().out.splitlines()[0]
    assert main(["intervene", str(folder), "--kinds", "K", "--sequences", "2", "--half", "4", "--top", "1", *data,
                 "--tokenizer", str(tok)]) == 0
    assert text in capsys.readouterr().out.splitlines()[0]
    assert main(["circuits", str(folder), "--content", "activations", "--sample-sequences", "2", "--sample-length", "16",
                 "--tokenizer", str(tok)]) == 0
    assert "sequences of 16 tokens of standard-library docstrings" in capsys.readouterr().out.splitlines()[0]
    assert main(["validate", str(folder), "--sequences", "4", "--half", "4", "--intervention-sequences", "2",
                 "--kinds", "K", "--metric", "covariance", "--tokenizer", str(tok), "--out", str(tmp_path / "v")]) == 0
    assert "no tokenizer" not in capsys.readouterr().out
    run = json.loads((tmp_path / "v" / "run.json").read_text())
    assert run["activations_metric_data"].startswith(f"64 sequences of 128 tokens of {text}")

    (tmp_path / "notes.txt").write_text("x")
    for path, needle in ((tmp_path / "none", f"--tokenizer {tmp_path / 'none'}: no such file or folder"),
                         (tmp_path / "notes.txt", "give a folder with a tokenizer's files, or a tokenizer.json"),
                         (tmp_path, "transformers could not read a tokenizer there"),
                         (word_tokenizer(tmp_path / "big", first=100), "is past llama's vocabulary of 61")):
        assert main(["scores", str(folder), "--kinds", "K", *data, "--tokenizer", str(path)]) == 2
        assert needle in capsys.readouterr().err, needle
    for argv, readers in ((["scores", str(folder), "--metric", "embed"], "the metrics estimated on data, "
                                                                          "--linearise-qk-norm text and --linearise-norms"),
                          (["pair", str(folder), "0.0", "1.1"], "the metrics estimated on data"),
                          (["intervene", str(folder)], "the metrics estimated on data"),
                          (["circuits", str(folder)], "--content activations")):  # nothing reads text: refused
        assert main([*argv, "--tokenizer", str(tok)]) == 2
        assert f"--tokenizer: for {readers}" in capsys.readouterr().err, argv
    assert main(["validate", "--kinds", "K", "--tokenizer", str(tok)]) == 2
    assert "toy models, which run on repeated random sequences and take no tokenizer" in capsys.readouterr().err


def test_track_reads_every_checkpoint_with_the_tokenizer_given(tmp_path, capsys):
    """HuggingFace checkpoints saved without a tokenizer (a training run's): ``track --tokenizer``
    estimates each checkpoint's metric on natural text cut by it (each as ``scores`` of that
    checkpoint with the same tokenizer), recorded per row; refused where no metric reads text,
    and for toy checkpoints."""
    import pandas as pd

    from compscope.cli.main import main
    from compscope.data.residual_moments import MetricData
    from compscope.data.tokenizers import read_tokenizer
    from hf_tiny import BY_ID

    run, tok = tmp_path / "run", word_tokenizer(tmp_path / "tok")
    for step, seed in ((100, 1), (200, 2)):
        build(BY_ID["llama-mha"], seed=seed).save_pretrained(run / f"step_{step}")
    data = MetricData(sequences=4, length=16)
    tr = compscope.track(run, "K", ["frobenius"], ["covariance"], metric_data=data, tokenizer=read_tokenizer(tok),
                         tokenizer_said="the words", progress=False)
    for c, (table,) in zip(tr.checkpoints, tr.tables):
        runner = runner_for(c.path, tokenizer=read_tokenizer(tok), tokenizer_said="the words")
        want = compscope.scores(runner, "K", ["frobenius"], "covariance", metric_data=data, progress=False)
        torch.testing.assert_close(table.dense("frobenius", "K"), want.dense("frobenius", "K"), equal_nan=True)
        assert table.info["metric_data"].startswith("4 sequences of 16 tokens of standard-library docstrings "
                                                    "(seed 12346), tokenised by the words; Ledoit-Wolf shrinkage")
    out = tmp_path / "t.parquet"
    assert main(["track", str(run), "--metric", "covariance", "--metric-sequences", "4", "--metric-length", "16",
                 "--tokenizer", str(tok), "--quiet", "--out", str(out)]) == 0
    assert f"tokenised by the tokenizer {tok}" in capsys.readouterr().out
    assert pd.read_parquet(out).metric_data.str.contains(f"tokenised by the tokenizer {tok}", regex=False).all()
    assert main(["track", str(run), "--tokenizer", str(tok)]) == 2
    assert "--tokenizer: for the metrics estimated on data, and none is selected (metrics: identity, embed)" \
        in capsys.readouterr().err
    with pytest.raises(compscope.OptionError, match="tokenizer: for the metrics estimated on data"):
        compscope.track(run, metrics=["identity"], tokenizer=read_tokenizer(tok), progress=False)
    import dataclasses

    from compscope.toy import PRESETS, train

    p = PRESETS["tiny"]
    train(p.model, p.data, dataclasses.replace(p.train, steps=4, n_checkpoints=2, eval_sequences=2, batch_size=2),
          tmp_path / "toy", progress=False)
    with pytest.raises(compscope.OptionError, match="toy models, which run on repeated random sequences"):
        compscope.track(tmp_path / "toy", metrics=["covariance"], tokenizer=read_tokenizer(tok), progress=False)


def test_sweep_reads_text_with_the_tokenizer_given_and_its_files_are_part_of_the_task(tmp_path, capsys):
    """``sweep --tokenizer``: each task that reads text (a metric estimated on data; every verdict)
    cuts it with that tokenizer, as ``scores`` with it does, recorded in ``metric_data``; the
    tokenizer's files are part of the task (a rerun skips, an edited file makes new tasks); a sweep
    where nothing reads text refuses it."""
    import json

    from compscope.cli.main import main
    from compscope.data.tokenizers import read_tokenizer
    from compscope.sweep import read_dataset
    from hf_tiny import BY_ID

    run, tok = tmp_path / "run", word_tokenizer(tmp_path / "tok")
    for step, seed in ((100, 1), (200, 2)):
        build(BY_ID["llama-mha"], seed=seed).save_pretrained(run / f"step_{step}")
    argv = ["sweep", str(run), "--metric", "covariance", "--metric-sequences", "4", "--metric-length", "16",
            "--kinds", "K", "--tokenizer", str(tok), "--out", str(tmp_path / "ds"), "--quiet"]
    assert main(argv) == 0
    d = read_dataset(tmp_path / "ds")
    assert d.metric_data.str.contains(f"tokenised by the tokenizer {tok}", regex=False).all()
    from compscope.data.residual_moments import MetricData

    runner = runner_for(run / "step_200", tokenizer=read_tokenizer(tok))
    want = compscope.scores(runner, "K", ["frobenius"], "covariance", metric_data=MetricData(sequences=4, length=16),
                            progress=False).dense("frobenius", "K")
    for r in d[d.step == 200].itertuples():
        assert r.value == pytest.approx(float(want[r.src_layer, r.src_head, r.dst_layer, r.dst_head]), rel=1e-6)
    capsys.readouterr()
    assert main(argv) == 0 and "nothing to do (2 tasks already done)" in capsys.readouterr().out
    config = json.loads((tok / "tokenizer_config.json").read_text())
    (tok / "tokenizer_config.json").write_text(json.dumps({**config, "model_max_length": 64}))  # an edited tokenizer
    assert main(argv) == 0 and "computed 2 tasks" in capsys.readouterr().out
    assert main(["sweep", str(run), "--job", "validate", "--kinds", "K", "--sequences", "4", "--half", "4",
                 "--metric", "identity", "--tokenizer", str(tok), "--out", str(tmp_path / "v"), "--quiet"]) == 0
    v = read_dataset(tmp_path / "v")
    assert {json.loads(o)["tokenizer"] for o in v.options} == {str(tok)}
    assert main(["sweep", str(run), "--metric", "identity", "--tokenizer", str(tok), "--out", str(tmp_path / "x")]) == 2
    assert "--tokenizer: for the metrics estimated on data, --linearise-norms and --job validate, and none is selected" \
        in capsys.readouterr().err


def test_sequences_whose_patterns_cannot_fit_are_refused_by_their_length(monkeypatch, capsys):
    """A batch whose attention patterns (``PATTERN_COPIES`` x batch x heads x seq² float32) exceed
    the memory free on the device is refused before the model runs, naming the length, the batch and
    what to change (the command line's options too); with the memory unreadable, or enough of it,
    the model runs."""
    from compscope.cli.main import main
    from compscope.data import runner as runner_module
    from compscope.core import memory

    runner = runner_for("induction-2l", device="cpu")  # the message names the device
    tokens = torch.zeros(16, 64, dtype=torch.long)
    # by hand: 4 heads; 2 layers of width 64, each keeping its input and its attention's output
    need = (runner_module.PATTERN_COPIES * 16 * 4 * 64 * 64 + 2 * 2 * 16 * 64 * 64) * 4
    monkeypatch.setattr(memory, "free_memory", lambda device: need - 1)
    with pytest.raises(compscope.OptionError, match=re.escape(
            "sequences of 64 tokens, 16 at a time: their attention patterns while a layer runs (4 x 16 x 4 heads x "
            "64^2 float32) and the residuals kept (2 x 2 layers x 16 x 64 x 64 float32) take about 0.00488 GiB, "
            "more than the 0.00488 GiB free on cpu; use shorter sequences "
            "(validate, intervene: a smaller half) or fewer at a time (a smaller batch_size)")):
        runner.trace(tokens)
    assert main(["intervene", "--kinds", "K", "--sequences", "16"]) == 2
    assert "fewer at a time (a smaller batch_size)" in capsys.readouterr().err
    runner.trace(tokens[:15])  # one sequence fewer fits
    monkeypatch.setattr(memory, "free_memory", lambda device: need)
    runner.trace(tokens)
    monkeypatch.setattr(memory, "free_memory", lambda device: None)
    runner.trace(tokens)


def test_many_short_sequences_are_refused_for_the_residuals_they_keep(monkeypatch):
    """Where the patterns are small (short sequences) the residuals a trace keeps decide: a post-LN
    model keeps four per layer (input, attention output, the sums its two norms normalise), a pre-LN
    one two; counted by hand, and a batch that fits their patterns but not their residuals is refused."""
    from compscope.core import memory
    from hf_tiny import BY_ID, build

    for variant, kept in (("bert", 4), ("llama-mha", 2)):
        runner = runner_for(build(BY_ID[variant]))
        hw = runner.hw
        b, t = 64, 4
        patterns = 4 * b * hw.n_heads * t * t * 4
        residuals = kept * hw.n_layers * b * t * hw.d_model * 4
        assert residuals > patterns, variant  # the case this test is about
        assert runner.trace_bytes((b, t))[0] == patterns + residuals, variant
        monkeypatch.setattr(memory, "free_memory", lambda device: patterns + residuals - 1)
        with pytest.raises(compscope.OptionError, match=re.escape(
                f"and the residuals kept ({kept} x {hw.n_layers} layers x {b} x {t} x {hw.d_model} float32)")):
            runner.trace(torch.ones(b, t, dtype=torch.long))
        monkeypatch.setattr(memory, "free_memory", lambda device: patterns + residuals)
        tr = runner.trace(torch.ones(b, t, dtype=torch.long))
        held = [*tr.resid, *tr.attn_out, *(x for pair in (tr.norm_in or []) for x in pair)]
        assert len(held) == kept * hw.n_layers and all(x.shape == (b, t, hw.d_model) for x in held), variant


@pytest.mark.parametrize("vid", ["gpt2", "llama-mha"])
def test_a_causal_models_folder_runs_as_its_causal_lm_every_tensor_read(tmp_path, capfd, vid):
    """A causal model saved whole (GPT-2's LM head model, Llama's causal LM) is built as that class, so every tensor
    in the folder is the model's (transformers' load report names no unexpected weight, as it would for the base
    model alone: the LM head's), and its base model runs as compscope reads it."""
    from hf_tiny import BY_ID

    _runs_as_saved(build(BY_ID[vid]), tmp_path, capfd)


def _runs_as_saved(model, folder, capfd):
    """``model`` saved to ``folder`` and run from it: built as ``model``'s class, transformers' load report naming no
    unexpected weight, and every layer's hooked output the one recomputed from the folder's heads. Its heads."""
    model.save_pretrained(folder)
    hw = compscope.load(folder)
    capfd.readouterr()
    runner = runner_for(folder, progress=False, device="cpu")
    assert type(runner.model) is type(model)
    assert "UNEXPECTED" not in "".join(capfd.readouterr())
    tr = runner.trace(random_ids())
    for layer in range(hw.n_layers):
        torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=ATOL, rtol=0)
    return hw


def test_an_encoder_saved_with_its_head_runs_as_the_class_its_folder_names(tmp_path, capfd):
    """BERT's masked LM saved to a folder is built as that class, every tensor the model's (transformers reports no
    unexpected weights), and its base model runs as compscope reads it; a class of another model type named by the
    folder is not built (the auto class's model is)."""
    import json

    import transformers

    from compscope.data.runner.hf import _named_class
    from hf_tiny import BY_ID, make_config

    hw = _runs_as_saved(transformers.BertForMaskedLM(make_config(BY_ID["bert"])).eval(), tmp_path, capfd)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "architectures": ["RobertaForMaskedLM"]}))
    assert _named_class(tmp_path, hw) is None



def _without(folder, *parts: str) -> list[str]:
    """Drop from the checkpoint in ``folder`` every tensor whose name holds one of ``parts``; the names dropped."""
    from safetensors.torch import load_file, save_file

    file = folder / "model.safetensors"
    tensors = load_file(file)
    gone = sorted(k for k in tensors if any(p in k for p in parts))
    assert gone, parts
    save_file({k: v for k, v in tensors.items() if k not in gone}, file, metadata={"format": "pt"})
    return gone


@pytest.mark.parametrize(("variant_id", "parts"), [("bert", ["intermediate.dense"]),
                                                    ("bert", ["attention.output.LayerNorm"]),
                                                    ("llama-mha", ["mlp.down_proj"]),
                                                    ("llama-mha", ["layers.0.post_attention_layernorm"])])
def test_a_checkpoint_lacking_tensors_the_runs_read_is_refused_by_name(tmp_path, variant_id, parts):
    """transformers fills the tensors a checkpoint lacks in at random and runs; where they reach the residual stream
    the heads read (an MLP, a norm inside the layers) compscope refuses the folder, naming it and the tensors, while
    the weight-only side still reads the heads."""
    from hf_tiny import BY_ID

    build(BY_ID[variant_id]).save_pretrained(tmp_path)
    gone = _without(tmp_path, *parts)
    compscope.load(tmp_path)  # the heads are all there
    with pytest.raises(compscope.OptionError, match="lacks") as e:
        runner_for(tmp_path, progress=False)
    assert str(tmp_path) in str(e.value) and gone[0].split(".", 1)[-1] in str(e.value)


@pytest.mark.parametrize("parts, n, more", [(["mlp"], 6, ""),
                                            (["mlp", "layers.0.post_attention_layernorm"], 7, " and 1 more"),
                                            (["mlp", "post_attention_layernorm"], 8, " and 2 more")])
def test_a_checkpoint_lacking_many_tensors_names_six_and_counts_the_rest(tmp_path, parts, n, more):
    """The refusal names the first six missing tensors (in order of name) and counts the rest: a two-layer Llama
    without its MLPs lacks six (gate, up and down of each layer), with a layer's norm too seven, both norms eight."""
    from hf_tiny import BY_ID

    build(BY_ID["llama-mha"]).save_pretrained(tmp_path)
    gone = _without(tmp_path, *parts)
    assert len(gone) == n
    with pytest.raises(compscope.OptionError) as e:
        runner_for(tmp_path, progress=False)
    assert f"the checkpoint lacks {n} tensor(s) the model's class builds ({', '.join(gone[:6])}{more}), " in str(
        e.value)


def test_a_checkpoint_lacking_tensors_no_run_reads_runs(tmp_path):
    """Tensors a run never reads may be missing: a Llama folder without its final norm and its (untied) unembedding,
    a BERT folder saved without its pooler (built as the base model its config names); and a table transformers
    computes, not draws: RoFormer's sinusoids (its rotary map); the runs agree with the heads."""
    import json

    import transformers

    from hf_tiny import BY_ID, make_config

    llama = tmp_path / "llama"
    build(BY_ID["llama-mha"], tie_word_embeddings=False).save_pretrained(llama)
    _without(llama, "model.norm.weight", "lm_head.weight")
    bert = tmp_path / "bert"
    transformers.BertForMaskedLM(make_config(BY_ID["bert"])).save_pretrained(bert)
    config = json.loads((bert / "config.json").read_text())
    (bert / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    roformer = tmp_path / "roformer"
    build(BY_ID["roformer-rotary-post-ln"]).save_pretrained(roformer)
    _without(roformer, "embed_positions")
    runners = {}
    for folder in (llama, bert, roformer):
        hw = compscope.load(folder)
        runner = runners[folder.name] = runner_for(folder, progress=False, device="cpu")
        tr = runner.trace(random_ids())
        for layer in range(hw.n_layers):
            torch.testing.assert_close(layer_state(hw, layer, tr.resid[layer]).out, tr.attn_out[layer], atol=ATOL,
                                       rtol=0)
    assert type(runners["bert"].model).__name__ == "BertModel" and runners["bert"].model.pooler is not None


def test_a_folders_tokenizer_is_read_on_first_use_only(tmp_path, monkeypatch, capsys):
    """A runner from files reads its model's tokenizer when something first asks for it: labels and
    interventions on repeated random tokens (``pair --on-data`` too) never read it; natural text
    reads it once, the tokenizer transformers reads from the folder; a tokenizer given is used and
    the folder's never read; a folder without one gives None, read once."""
    import transformers

    from compscope.cli.main import main
    from compscope.data.head_labels import activation_labels
    from compscope.data.intervene import intervention_effects
    from compscope.data.sequences import natural_text, repeats
    from hf_tiny import BY_ID

    folder = tmp_path / "llama"
    build(BY_ID["llama-mha"]).save_pretrained(folder)
    plain = tmp_path / "plain"
    build(BY_ID["llama-mha"]).save_pretrained(plain)
    word_tokenizer(folder)
    own = transformers.AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    read = transformers.AutoTokenizer.from_pretrained
    calls = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda *a, **k: calls.append(a[0]) or read(*a, **k))

    import compscope.progress

    bars, made = [], compscope.progress.progress_bar
    monkeypatch.setattr(compscope.progress, "progress_bar", lambda total, desc, enabled=True, **k: bars.append(
        (desc, enabled)) or made(total, desc, enabled, **k))
    runner = runner_for(folder, progress=False)
    reps = repeats(2, 4, runner.hw.n_vocab, 0, runner.bos)
    activation_labels(runner, reps, progress=False)
    intervention_effects(runner, reps.tokens, "QKV", progress=False)
    assert main(["pair", str(folder), "0.0", "1.1", "--kind", "K", "--on-data", "--quiet"]) == 0
    assert calls == [] and "on data" in capsys.readouterr().out.lower()
    text = "def the list of value and the text"
    assert runner.tokenizer.encode(text) == own.encode(text) and runner.tokenizer is runner.tokenizer
    assert calls == [str(folder)]
    want = f"reading {runner.hw.meta.name}'s tokenizer (transformers)"  # a bar, as the runner's (off here)
    assert [b for b in bars if "tokenizer" in b[0]] == [(want, False)]
    assert natural_text(runner.tokenizer, 2, 8, 1, runner.bos).shape == (2, 8) and calls == [str(folder)]

    given = runner_for(folder, tokenizer=own, progress=False)
    assert given.tokenizer is own and calls == [str(folder)]
    none = runner_for(plain, progress=False)
    assert none.tokenizer is None and none.tokenizer is None and calls == [str(folder), str(plain)]

    import threading
    import time

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",  # a slow read: both threads ask during it
                        lambda *a, **k: calls.append(a[0]) or time.sleep(0.3) or read(*a, **k))
    twice = runner_for(folder, progress=False)
    seen = []
    threads = [threading.Thread(target=lambda: seen.append(twice.tokenizer)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 2 and seen[0] is not None and seen[0] is seen[1] and calls[2:] == [str(folder)]


class _FakeTokenizer:
    """``encode`` gives ``ids``, after ``special`` when asked to add special tokens; unknown token 0."""

    unk_token_id = 0

    def __init__(self, ids, special=(), fail=False):
        self.ids, self.special, self.fail = list(ids), list(special), fail

    def encode(self, text, add_special_tokens=True):
        if self.fail:
            raise ValueError("broken")
        return self.special * add_special_tokens + self.ids


def test_a_tokenizer_is_read_for_the_texts_own_ids_and_checked_against_the_vocabulary():
    """What a tokenizer gives the text alone (no special tokens added) is what is checked and read; a tokenizer that
    fails, or gives the unknown token alone, has no vocabulary; an id at the vocabulary's size is past it, and the
    first such id is named; booleans and floats are not token ids."""
    from compscope.data.tokenizers import check_token_ids, check_tokenizer, checked_tokenizer, encode, has_vocabulary
    from compscope.errors import OptionError

    assert not has_vocabulary(None) and not has_vocabulary(_FakeTokenizer([1], fail=True))
    assert not has_vocabulary(_FakeTokenizer([0, 0], special=[2])) and has_vocabulary(_FakeTokenizer([0, 3]))
    no_unknown = type("NoUnknown", (), {"encode": lambda self, text, add_special_tokens=True: [0]})()
    assert has_vocabulary(no_unknown)  # without an unknown token, id 0 is a token like any other
    ok = _FakeTokenizer([3, 9], special=[10])  # its special token is past a vocabulary of 10, the text's ids are not
    assert checked_tokenizer(ok, 10, "m") is ok and encode(ok, "any text") == [3, 9]
    with pytest.raises(OptionError, match=r"^tokenizer: token id 10 is past m's vocabulary of 10 \(ids 0\.\.9\)"):
        checked_tokenizer(_FakeTokenizer([3, 10]), 10, "m")
    with pytest.raises(OptionError, match="^tokenizer: it encodes text to nothing, or to its unknown token alone$"):
        checked_tokenizer(_FakeTokenizer([0], special=[2]), 10, "m")
    with pytest.raises(OptionError, match=r"^tokenizer: encode\(text, add_special_tokens=False\) failed \(ValueError"):
        checked_tokenizer(_FakeTokenizer([1], fail=True), 10, "m")
    check_token_ids([0, 9], 10, "m", "the text")
    with pytest.raises(OptionError, match="^the text: token id 12 is past"):
        check_token_ids([1, 12, 15], 10, "m", "the text")
    for bad in (torch.tensor([True, False]), [1.0, 2.0], ["a", "b"]):  # strings: no tensor at all
        with pytest.raises(OptionError, match="not integer token ids"):
            check_token_ids(bad, 10, "m", "the text")
    with pytest.raises(OptionError, match="^natural text: needs the model's tokenizer"):
        check_tokenizer(None)
    with pytest.raises(OptionError, match="^corpus notes.txt: needs the model's tokenizer"):
        check_tokenizer(None, "notes.txt")


def test_a_tokenizer_is_recorded_by_the_first_12_hex_digits_of_its_files_names_and_bytes(tmp_path):
    """:func:`tokenizer_digest`: SHA-256 (hashlib here) over each file of the folder in name order, its name, a
    zero byte, its bytes (subfolders left out); a ``tokenizer.json`` alone the same way; an edit changes it."""
    import hashlib

    from compscope.data.tokenizers import tokenizer_digest

    (tmp_path / "vocab.txt").write_bytes(b"a\nb\n")
    (tmp_path / "tokenizer.json").write_bytes(b'{"model": {}}')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.txt").write_bytes(b"not read")
    want = hashlib.sha256(b'tokenizer.json\0{"model": {}}' + b"vocab.txt\0a\nb\n").hexdigest()
    assert tokenizer_digest(tmp_path) == want[:12]
    alone = hashlib.sha256(b'tokenizer.json\0{"model": {}}').hexdigest()[:12]
    assert tokenizer_digest(tmp_path / "tokenizer.json") == alone
    (tmp_path / "vocab.txt").write_bytes(b"a\nc\n")
    assert tokenizer_digest(tmp_path) != want[:12]


def test_a_tokenizer_without_transformers_is_refused_by_name(tmp_path, monkeypatch):
    """``--tokenizer PATH`` where transformers cannot be imported (``sys.modules[...] = None``): one
    error naming the path and what to install, not an ImportError."""
    from compscope.data.tokenizers import read_tokenizer
    from compscope.errors import OptionError

    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(OptionError, match=r"^--tokenizer .*: reading a tokenizer needs transformers \(pip install"):
        read_tokenizer(tmp_path)


def test_a_tokenizer_folder_is_read_from_local_files_only(tmp_path, monkeypatch):
    """``--tokenizer FOLDER`` never reaches a hub, whatever the environment says: transformers is told local files
    only (the tests run with HF_HUB_OFFLINE set, which would hide a download asked for)."""
    transformers = pytest.importorskip("transformers")
    from compscope.data.tokenizers import read_tokenizer

    asked = []
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda path, **kw: asked.append((path, kw)) or "a tokenizer")
    assert read_tokenizer(tmp_path) == "a tokenizer"
    assert asked == [(str(tmp_path), {"local_files_only": True})]


def test_a_running_model_of_another_depth_than_its_heads_is_refused_by_name():
    """``HFRunner(model, hw)`` with ``hw`` read from a model of another depth: refused, naming both counts,
    before anything runs; the same depth is taken."""
    from hf_tiny import BY_ID

    two, three = build(BY_ID["gpt2"], n_layer=2), build(BY_ID["gpt2"], n_layer=3)
    with pytest.raises(compscope.UnsupportedModelError,
                       match="the running model has 2 layers, its HeadWeights 3: they are not the same model"):
        HFRunner(two, compscope.load(three))
    with pytest.raises(compscope.UnsupportedModelError, match="the running model has 3 layers, its HeadWeights 2"):
        HFRunner(three, compscope.load(two))
    assert HFRunner(two, compscope.load(build(BY_ID["gpt2"], n_layer=2, seed=1))).hw.n_layers == 2


def test_rotary_frequencies_are_handed_to_the_running_model_or_refused_by_name():
    """``set_frequencies`` (a GGUF file's ``rope_freqs``, which transformers' GGUF reader drops) sets every rotary
    module's ``inv_freq`` (and a dynamic rope's ``original_inv_freq``) to the one set the heads state; frequencies
    that differ by layer, heads without rotary positions, a model without a rotary module, or a module of another
    width are refused by name, the model left as it was."""
    import dataclasses

    from hf_tiny import BY_ID

    from compscope.data.runner.hf import set_frequencies

    model = build(BY_ID["llama-mha"])
    hw = compscope.load(model)
    rotary = [m for m in model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)]
    assert rotary
    before = [m.inv_freq.clone() for m in rotary]
    L, half = hw.rotary.inv_freq.shape
    new = torch.linspace(0.5, 0.01, half, dtype=torch.float64)

    def turning(inv_freq, dim=hw.rotary.dim):
        return hw.replace(rotary=dataclasses.replace(hw.rotary, dim=dim, inv_freq=inv_freq))

    slow = turning(new.expand(L, half).clone())
    cases = [turning(torch.stack([new * (1 + i) for i in range(L)])),  # one set a layer
             hw.replace(rotary=None),  # no rotary positions
             turning(new[:-1].expand(L, half - 1).clone(), dim=hw.rotary.dim - 2)]  # a narrower rotary part
    for bad in cases:
        with pytest.raises(compscope.UnsupportedModelError, match=r"m\.gguf: the file's rotary frequency divisors"):
            set_frequencies(model, bad, "m.gguf")
        assert all(torch.equal(m.inv_freq, b) for m, b in zip(rotary, before))
    with pytest.raises(compscope.UnsupportedModelError, match="no rotary module"):
        set_frequencies(build(BY_ID["gpt2"]), slow, "m.gguf")  # (no module with inv_freq)
    for m in rotary:
        m.original_inv_freq = m.inv_freq.clone()  # (what a dynamic rope keeps)
    set_frequencies(model, slow, "m.gguf")
    for m in rotary:
        torch.testing.assert_close(m.inv_freq, new.to(m.inv_freq.dtype), rtol=0, atol=0)
        torch.testing.assert_close(m.original_inv_freq, new.to(m.inv_freq.dtype), rtol=0, atol=0)


@pytest.mark.parametrize("bos, kept", [(0, True), (1, True), (60, True), (-1, False), (61, False), (None, False)])
def test_the_runner_takes_a_bos_token_only_inside_the_vocabulary(bos, kept):
    """``runner.bos``: the config's ``bos_token_id`` where it is a token of the model (an int in ``0..V-1``; random
    configs keep ids of other vocabularies), else None; an encoder's is None (no sequence of its starts with it)."""
    from hf_tiny import BY_ID, VOCAB

    assert VOCAB == 61  # (the ids above: 60 the last token, 61 past it)
    model = build(BY_ID["llama-mha"])
    model.config.bos_token_id = bos
    assert HFRunner(model, compscope.load(model)).bos == (bos if kept else None)
    encoder = build(BY_ID["bert"])
    encoder.config.bos_token_id = 1
    assert HFRunner(encoder, compscope.load(encoder)).bos is None


def test_a_class_named_by_a_config_is_found_exported_or_in_its_model_types_module():
    """``_model_class(name, model_type)``: transformers' exported class of that name; else the one in the modeling
    module of ``model_type`` (BridgeTower's text model, which transformers does not export); None for a name neither
    has, a model type transformers does not know, or no model type given."""
    import transformers
    from transformers.models.bridgetower import modeling_bridgetower

    from compscope.data.runner.hf import _model_class

    assert not hasattr(transformers, "BridgeTowerTextModel")
    assert _model_class("BridgeTowerTextModel", "bridgetower") is modeling_bridgetower.BridgeTowerTextModel
    assert _model_class("LlamaModel", "llama") is _model_class("LlamaModel", None) is transformers.LlamaModel
    for name, model_type in [("BridgeTowerTextModel", None), ("BridgeTowerTextModel", 3), ("NoSuchModel", "llama"),
                             ("BridgeTowerTextModel", "no_such_type")]:
        assert _model_class(name, model_type) is None, (name, model_type)
    assert _model_class("RobertaModel", "bert") is transformers.RobertaModel  # (exported: whatever the type given)


def test_a_folder_whose_config_names_no_usable_class_runs_as_the_auto_class(tmp_path):
    """``architectures`` as saved names the class a folder is built as: an encoder's (BERT's masked LM) and a
    vision-language model's (LLaVA's). Empty, not a list, a list whose first entry is no string, a name transformers
    lacks, a name that is no model class (a config's), or no key at all: neither is taken, and the folder is built
    by the auto class (None; for the wrapper, ``AutoModelForImageTextToText``). A folder without a config, or with a
    language model's alone, is no wrapper; a causal model's class named in its folder is not taken either (but by a
    family that runs its models as named)."""
    import json

    import transformers

    from compscope.data.runner.hf import _named_class, _wrapper_class
    from hf_tiny import BY_ID, make_config

    bert, llava = tmp_path / "bert", tmp_path / "llava"
    bert_config = make_config(BY_ID["bert"])
    bert_config.architectures = ["BertForMaskedLM"]
    bert_config.save_pretrained(bert)
    hw = compscope.load(build(BY_ID["bert"]))
    text = make_config(BY_ID["llama-mha"])
    transformers.LlavaConfig(text_config=text, architectures=["LlavaForConditionalGeneration"]).save_pretrained(llava)
    assert _named_class(bert, hw) is transformers.BertForMaskedLM
    assert _wrapper_class(llava) is transformers.LlavaForConditionalGeneration
    configs = {f: json.loads((f / "config.json").read_text()) for f in (bert, llava)}
    for named in ([], "BertForMaskedLM", [3], ["NoSuchModel"], ["BertConfig"], ["LlavaConfig"], None):
        for folder, config in configs.items():
            saved = {k: v for k, v in config.items() if k != "architectures"}
            written = saved if named is None else {**saved, "architectures": named}
            (folder / "config.json").write_text(json.dumps(written))
        assert _named_class(bert, hw) is None, named
        assert _wrapper_class(llava) is transformers.AutoModelForImageTextToText, named
    text.save_pretrained(tmp_path / "llama")
    assert _wrapper_class(tmp_path / "llama") is None and _wrapper_class(tmp_path / "empty") is None
    assert _named_class(tmp_path / "empty", hw) is None
    # a causal model's folder runs as its auto causal LM whatever class of its type it names (Llama's classifier)
    text.architectures = ["LlamaForSequenceClassification"]
    text.save_pretrained(tmp_path / "llama")
    assert _named_class(tmp_path / "llama", compscope.load(build(BY_ID["llama-mha"]))) is None


def test_post_ln_norms_are_applied_in_float32_copies_only_where_a_norm_is_not_float32():
    """``float32_norms``: the model's own modules where every one is float32 (none copied); float32
    copies of all of them where any is in 16 bits, the model's own left in theirs."""
    from compscope.data.runner.base import float32_norms

    f32 = [(torch.nn.LayerNorm(4), torch.nn.LayerNorm(4)) for _ in range(2)]
    assert float32_norms(f32) is f32 and float32_norms(None) is None
    mixed = [(torch.nn.LayerNorm(4), torch.nn.LayerNorm(4).to(torch.bfloat16)), (torch.nn.LayerNorm(4),) * 2]
    mixed[0][1].weight.data[:] = 1.5
    got = float32_norms(mixed)
    assert got is not mixed and all(n.weight.dtype == torch.float32 for pair in got for n in pair)
    assert all(a is not b for pair, own in zip(got, mixed) for a, b in zip(pair, own))  # copies, the model's kept
    assert mixed[0][1].weight.dtype == torch.bfloat16 and torch.equal(got[0][1].weight, torch.full((4,), 1.5))


@pytest.mark.parametrize("returned, seen", [
    (torch.zeros(2, dtype=torch.float16), ("tensor", torch.float16)),
    ((torch.zeros(2), None), (2, torch.float32, tuple)),
    ([torch.zeros(2, dtype=torch.bfloat16)], (1, torch.bfloat16, list)),
    ((), False), ((None, torch.zeros(2)), False), ({"hidden_states": torch.zeros(2)}, False)])
def test_what_the_first_layer_returns_is_recorded_or_marked_unknown(returned, seen):
    """``_seeing_returns`` records the form of the first layer module's output (a tensor, or a tuple
    or list led by one: its length, dtype and type), and False for anything else (an empty tuple,
    one led by something else, a dict), which no layer is then left out or stopped for."""
    from types import SimpleNamespace

    from compscope.data.runner.base import Runner

    class Layer(torch.nn.Module):
        def forward(self, x):
            return returned

    runner = SimpleNamespace(layer_modules=[Layer()], _returns=None)
    with Runner._seeing_returns(runner):
        runner.layer_modules[0](torch.zeros(1))
    assert runner._returns == seen
    assert not runner.layer_modules[0]._forward_hooks  # the hook removed
