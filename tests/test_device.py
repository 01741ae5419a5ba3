"""Where the engine computes: device choice, its errors, and CUDA against the CPU."""

import copy

import pytest
import torch

from compscope import OptionError
from compscope.engine import composition
from compscope.api import scores
from compscope.engine.composition import resolve_device
from compscope.core.metrics import activations

from test_composition import ALL, model

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


@pytest.mark.parametrize("name,match", [("tpu", "not a device name"), ("cuda:x", "not a device name"),
                                        ("meta", "runs on 'cpu' or 'cuda'"), ("mps", "runs on 'cpu' or 'cuda'")])
def test_bad_device_names_are_refused(name, match):
    with pytest.raises(OptionError, match=match):
        scores(model(), "K", ["frobenius"], device=name, progress=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cuda_without_a_gpu_is_a_clear_error_and_the_default_is_the_cpu():
    with pytest.raises(OptionError, match="no CUDA device"):
        scores(model(), "K", ["frobenius"], device="cuda", progress=False)
    assert resolve_device(None) == torch.device("cpu")
    hw = model()
    a = scores(hw, "QKV", ALL, pairs="all", progress=False)
    b = scores(hw, "QKV", ALL, pairs="all", device="cpu", progress=False)
    assert a.to_pandas()["value"].equals(b.to_pandas()["value"])


@pytest.mark.parametrize("precision,matmul", [(None, "highest"), ("float32", "highest"), ("float64", "highest"),
                                              ("tf32", "high"), ("bfloat16", "highest")])
def test_each_precision_sets_its_float32_matmul_precision_for_the_call_only(monkeypatch, precision, matmul):
    """A reduced float32 matmul precision (TF32 on CUDA, bfloat16 on some CPUs) would void the
    engine's error bounds: it is set to 'highest' for the call unless asked ('tf32'), and put back
    afterwards."""
    seen = []
    inner = composition.gram_products

    def spy(*args, **kwargs):
        seen.append((torch.get_float32_matmul_precision(), kwargs.get("tile_dtype")))
        return inner(*args, **kwargs)

    monkeypatch.setattr(composition, "gram_products", spy)
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")
        chosen = {} if precision is None else {"precision": precision}  # None: the default
        scores(model(), "QK", ["frobenius"], device="cpu", progress=False, **chosen)
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(previous)
    assert seen == [(matmul, torch.bfloat16 if precision == "bfloat16" else None)]


def test_an_unknown_precision_names_the_ones_there_are_and_the_cli_offers_them_all():
    with pytest.raises(OptionError, match="precision='half': use one of 'float32', 'float64', 'tf32', 'bfloat16'"):
        scores(model(), "K", ["frobenius"], precision="half", progress=False)
    from compscope.cli.common import add_scoring
    import argparse

    p = argparse.ArgumentParser()
    add_scoring(p, "QKV", ("frobenius",))
    choices = next(a.choices for a in p._actions if a.dest == "precision")
    assert list(choices) == list(composition.PRECISIONS)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=cuda)])
def test_reduced_precisions_stay_within_their_rounding_bound_of_float64(device):
    """With unit roundoff u (bfloat16 2⁻⁹; TF32 2⁻¹¹), bases and Gram tiles rounded once each
    and products accumulated in float32 (exact enough), every Gram entry is off by at most
    ``3u (|U| σ² |U|ᵀ)_ij``; summed against the other Gram, ``|Δ‖BA‖_F²| ≤ 6u ‖a‖² ‖b‖²``,
    i.e. ``|Δ frobenius²| ≤ 6u``, and likewise ``|Δ ‖X‖_F²| ≤ 6u (r_A r_B)^½``, i.e.
    ``|Δ overlap| ≤ 6u`` for equal ranks (all heads here have full rank 3). On a CPU, tf32 may be
    plain float32."""
    hw = model(L=4, seed=3)
    ms = ["frobenius", "overlap"]
    ref = scores(hw, "QKV", ms, offset=2, precision="float64", device="cpu", progress=False)
    for precision, u in (("tf32", 2.0**-11), ("bfloat16", 2.0**-9)):
        got = scores(hw, "QKV", ms, offset=2, precision=precision, device=device, progress=False)
        for k in "QKV":
            for m, power in (("frobenius", 2), ("overlap", 1)):
                x, y = got.dense(m, k), ref.dense(m, k)
                keep = torch.isfinite(y)
                assert torch.isfinite(x).eq(keep).all()
                err = float((x[keep] ** power - y[keep] ** power).abs().max())
                assert err <= 6 * u, (precision, m, k, err)
        if precision == "bfloat16":  # and the rounding is really there: not float32 in disguise
            assert float((got.dense("frobenius", "K") - ref.dense("frobenius", "K")).abs().nan_to_num().max()) > 1e-5


def _close(a, b, tol):
    va, vb = a.to_pandas()["value"].to_numpy(), b.to_pandas()["value"].to_numpy()
    assert (a.to_pandas()[["measure", "kind", "src_layer", "src_head", "dst_layer", "dst_head"]]
            .equals(b.to_pandas()[["measure", "kind", "src_layer", "src_head", "dst_layer", "dst_head"]]))
    assert abs(va - vb).max() < tol


@cuda
@pytest.mark.parametrize("precision,tol", [("float64", 1e-10), ("float32", 1e-5)])
@pytest.mark.parametrize("metric", ["identity", "embed"])
def test_cuda_matches_the_cpu_on_every_route(precision, tol, metric):
    """GQA, rotary offset 2, the Gram route, the X route for all pairs, the top-pairs route
    (in float64 only: in float32 a near-tie at the 20th pair could swap which pairs are kept)."""
    hw = model(L=4, seed=3)
    routes = [{"measures": ["frobenius", "frobenius_baselined", "tight", "overlap"]}, {"measures": ALL, "pairs": "all"}]
    for kw in routes + ([{"measures": ALL, "pairs": 20}] if precision == "float64" else []):
        c = scores(hw, "QKV", metric=metric, offset=2, precision=precision, device="cpu", progress=False, **kw)
        g = scores(hw, "QKV", metric=metric, offset=2, precision=precision, device="cuda", progress=False, **kw)
        _close(c, g, tol)


@cuda
def test_cuda_per_layer_metric_and_qr_route_match_the_cpu():
    hw = model(L=3, seed=5, rotary=False)
    g = torch.Generator().manual_seed(1)
    Gs = {l: (lambda M: M @ M.T / hw.d_model + torch.eye(hw.d_model, dtype=torch.float64))(
        torch.randn(hw.d_model, hw.d_model, generator=g, dtype=torch.float64)) for l in range(3)}
    met = activations(Gs)
    c = scores(hw, "QKV", ALL, metric=met, pairs=10, precision="float64", device="cpu", progress=False)
    gpu = scores(hw, "QKV", ALL, metric=met, pairs=10, precision="float64", device="cuda", progress=False)
    _close(c, gpu, 1e-10)
    W_O = hw.W_O.clone()
    W_O[1, 0, :, 1] = W_O[1, 0, :, 0]  # a rank-deficient writer: QR route
    W_O[0, 2, :, 0] *= 1e-6  # condition number ~1e6: QR route
    bad = hw.replace(W_O=W_O)
    c = scores(bad, "QKV", ALL, pairs="all", precision="float64", device="cpu", progress=False)
    gpu = scores(bad, "QKV", ALL, pairs="all", precision="float64", device="cuda", progress=False)
    _close(c, gpu, 1e-10)


# ---------------------------------------------------------------------------------------------
# The data-based side (runner, labels, interventions, residual statistics, the verdict)


def _tensors(hw):
    """Every tensor a HeadWeights holds: its fields, its norms' gains and biases, the rotary
    frequencies and the extra embeddings, by name."""
    import dataclasses

    from compscope.core.heads import Norm, Rotary

    out = {}
    for f in dataclasses.fields(hw):
        v = getattr(hw, f.name)
        parts = v if isinstance(v, tuple) else (v,)
        for i, p in enumerate(parts):
            if isinstance(p, torch.Tensor):
                out[f.name] = p
            elif isinstance(p, Norm):
                out.update({f"{f.name}[{i}].{k}": getattr(p, k) for k in ("weight", "bias") if getattr(p, k) is not None})
            elif isinstance(p, Rotary):
                out[f"{f.name}.inv_freq"] = p.inv_freq
            elif isinstance(p, dict):
                out.update({f"{f.name}.{k}": t for k, t in p.items()})
    return out


@pytest.mark.parametrize("variant_id", ["gemma3-text-mqa-bias", "bert", "gpt2"])
def test_head_weights_move_every_tensor_they_hold(variant_id):
    """``HeadWeights.to`` moves each tensor (QK-norm, attention-output norm, rotary frequencies,
    token-type embeddings included; the ``meta`` device stands in for a GPU) and keeps the dtypes;
    on the device it is already on, it is the object itself."""
    import compscope
    from hf_tiny import BY_ID, build

    hw = compscope.load(build(BY_ID[variant_id]))
    assert hw.to("cpu") is hw
    before, after = _tensors(hw), _tensors(hw.to("meta"))
    assert set(before) == set(after) and len(before) >= 8
    assert {k for k, t in after.items() if t.device.type != "meta"} == set()
    assert {k: t.dtype for k, t in after.items()} == {k: t.dtype for k, t in before.items()}
    held = {k.split(".")[0].split("[")[0] for k in before if "." in k}  # norms, rotary, extra embeddings
    assert len(held) >= 2
    for field in held:  # one of them left behind: the weights are not "already there"
        mixed = copy.copy(hw.to("meta"))
        object.__setattr__(mixed, field, getattr(hw, field))
        assert any(t.device.type == "cpu" for t in _tensors(mixed).values()), field
        moved = mixed.to("meta")
        assert moved is not mixed and all(t.device.type == "meta" for t in _tensors(moved).values()), field


def test_a_factor_crosses_devices_in_its_narrower_dtype():
    """Between devices torch casts on the CPU and sends the cast copy: ``moved`` sends bfloat16
    weights as stored and widens them where they arrive, and narrows float64 before sending
    (``meta`` stands in for another device)."""
    from torch.overrides import TorchFunctionMode

    from compscope.core.factors import moved

    class Log(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.steps = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.Tensor.to:
                self.steps.append((args[0].device.type, args[0].dtype, out.device.type, out.dtype))
            return out

    w = torch.ones(2, 3, dtype=torch.bfloat16)
    with Log() as log:
        out = moved(w, "meta", torch.float64)
    assert (out.device.type, out.dtype) == ("meta", torch.float64)
    assert log.steps == [("cpu", torch.bfloat16, "meta", torch.bfloat16), ("meta", torch.bfloat16, "meta", torch.float64)]
    with Log() as log:
        out = moved(torch.ones(2, dtype=torch.float64), "meta", torch.float32)
    assert (out.device.type, out.dtype) == ("meta", torch.float32)
    assert log.steps == [("cpu", torch.float64, "cpu", torch.float32), ("cpu", torch.float32, "meta", torch.float32)]
    assert moved(w, None, None) is w and moved(w, "cpu", torch.bfloat16) is w


def test_a_model_object_runs_where_it_is_and_is_never_moved():
    """A ``transformers`` model given runs on its own device (here ``meta``, standing in for a
    GPU); asking for another is refused by name, not done behind the user's back."""
    import compscope
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build

    model = build(BY_ID["llama-gqa-bias"])
    hw = compscope.load(model)
    assert runner_for(model, hw).device == torch.device("cpu")
    assert runner_for(model, hw, device="cpu").device == torch.device("cpu")
    model.to("meta")
    runner = runner_for(model, hw)
    assert runner.device == torch.device("meta") and runner.weights_here().W_Q.device.type == "meta"
    with pytest.raises(OptionError, match="runs on meta; move it there yourself"):
        runner_for(model, hw, device="cpu")
    assert next(model.parameters()).device.type == "meta"  # not moved
    from compscope import LoadError
    from compscope.toy.storage import load_toy
    from compscope.loading.builtin import find_toy

    toy, _ = load_toy(find_toy("induction-2l"))
    for obj, name in ((model, "LlamaForCausalLM"), (toy.to("meta"), "ToyTransformer")):  # shapes without values
        with pytest.raises(LoadError, match=f"^{name}: its parameters are on the meta device"):
            compscope.load(obj)
        with pytest.raises(LoadError, match=f"^{name}: its parameters are on the meta device"):
            runner_for(obj)


def devices_told(monkeypatch, module, name: str) -> list:
    """The ``device=`` of every call to ``module.name`` from now on (the function still runs)."""
    told, inner = [], getattr(module, name)

    def spy(*args, **kwargs):
        told.append(kwargs.get("device"))
        return inner(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return told


def test_the_verdict_computes_where_it_runs_and_records_it(tmp_path, monkeypatch):
    """Every engine call of the verdict (the measures under each metric, the K scores of the
    induction circuit) is told the runner's device, not left to the engine's default."""
    import json

    from compscope.data.validate import validate

    told = devices_told(monkeypatch, composition, "scores")
    v = validate("induction-2l", sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity", "embed"),
                 device="cpu", progress=False)
    assert told == [torch.device("cpu")] * 3
    v.save(tmp_path / "v")
    run = json.loads((tmp_path / "v" / "run.json").read_text())
    assert (run["device"], run["model_dtype"]) == ("cpu", "float32")


def test_the_activations_metric_runs_the_model_on_the_device_asked(monkeypatch):
    """``compscope.scores(..., metric='activations', device=D)``: the run that estimates the
    metric is given ``D`` too (toy model and a ``transformers`` model), not the runner's default;
    a model object on another device is refused, not moved."""
    import compscope
    from compscope.core.metrics import get_metric
    from compscope.data import runner as runner_module
    from hf_tiny import BY_ID, build

    told = devices_told(monkeypatch, runner_module, "runner_for")
    scores("induction-2l", "K", ["frobenius"], metric="activations", device="cpu", progress=False)
    model = build(BY_ID["llama-gqa-bias"])
    scores(model, "K", ["frobenius"], metric="activations", device="cpu", progress=False)
    assert told == ["cpu", "cpu"]
    hw = compscope.load(model)
    model.to("meta")
    with pytest.raises(OptionError, match="runs on meta; move it there yourself"):
        get_metric("activations", hw, model=model, device="cpu")
    assert next(model.parameters()).device.type == "meta"
    # a runner runs where it is: its own device is taken, another refused (here, or where CUDA is not)
    from compscope.data.runner import runner_for

    runner = runner_for("induction-2l", progress=False)
    assert get_metric("activations", runner.hw, model=runner, device="cpu").name == "activations"
    with pytest.raises(OptionError, match="device='cuda'"):
        get_metric("activations", runner.hw, model=runner, device="cuda")


def test_one_pair_under_the_activations_metric_runs_the_model_on_the_device_asked(monkeypatch, capsys):
    """``compscope.compose_pair(..., metric='activations', device=D)`` and ``compscope pair
    --metric activations --device D`` tell the metric's run ``D``; the pair is the same as
    under the metric estimated with the runner's default device."""
    import compscope
    from compscope.cli.main import main
    from compscope.data import runner as runner_module

    default = compscope.compose_pair("induction-2l", "0.0", "1.1", "K", "activations")
    told = devices_told(monkeypatch, runner_module, "runner_for")
    rep = compscope.compose_pair("induction-2l", "0.0", "1.1", "K", "activations", device="cpu")
    assert main(["pair", "0.0", "1.1", "--metric", "activations", "--device", "cpu"]) == 0
    assert told == ["cpu", "cpu"]
    assert rep.measures == pytest.approx(default.measures, rel=1e-6)
    assert "metric activations" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_the_activations_metric_on_cuda_without_a_gpu_is_a_one_line_error(capsys):
    """The metric's own run is refused as the engine is: before any model is run."""
    from compscope.cli.main import main

    assert main(["scores", "--metric", "activations", "--device", "cuda"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"compscope: error: device='cuda': torch sees no CUDA device here (torch {torch.__version__}); use 'cpu'"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
@pytest.mark.parametrize("command", ["validate", "intervene"])
def test_data_commands_on_cuda_without_a_gpu_is_a_one_line_error(command, capsys):
    from compscope.cli.main import main

    assert main([command, "--device", "cuda"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"compscope: error: device='cuda': torch sees no CUDA device here (torch {torch.__version__}); use 'cpu'"]


@cuda
@pytest.mark.parametrize("variant_id", ["llama-gqa-bias", "gemma3-text-mqa-bias", "bert"])
def test_data_based_measures_on_cuda_equal_the_cpu(variant_id):
    """Labels, every pair's interventional effect (the direct path, and every path) and the residual
    second moments (plain, and centred and shrunk by Ledoit-Wolf) of a tiny random model, run on CUDA
    (a writer layer's heads batched) and on the CPU (one writer at a time; float32 both): equal to
    float32 rounding, and returned on the CPU."""
    import compscope
    from compscope.data.head_labels import activation_labels
    from compscope.data.intervene import intervention_effects
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.runner import runner_for
    from compscope.data.sequences import repeats
    from hf_tiny import BY_ID, build

    got = {}
    for dev in ("cpu", "cuda"):
        model = build(BY_ID[variant_id]).to(dev)
        hw = compscope.load(build(BY_ID[variant_id]))
        runner = runner_for(model, hw)
        assert runner.device.type == dev
        reps = repeats(6, 4, hw.n_vocab, 3, runner.bos)
        labels = activation_labels(runner, reps, batch_size=3, progress=False)
        fx = intervention_effects(runner, reps.tokens, "QKV", batch_size=3, progress=False)
        every = intervention_effects(runner, reps.tokens, "QKV", batch_size=3, progress=False, paths="all")
        moments = runner_second_moments(runner, reps.tokens)
        shrunk = runner_second_moments(runner, reps.tokens, centred=True, shrinkage="ledoit-wolf")
        got[dev] = (labels.mean, fx.by_kind, moments, shrunk, every.by_kind)
    for part in range(5):
        for key, a in got["cpu"][part].items():
            b = got["cuda"][part][key]
            assert b.device.type == "cpu"
            torch.testing.assert_close(b, a, atol=2e-5 * max(1.0, float(a.nan_to_num().abs().max())), rtol=0,
                                       equal_nan=True)


@cuda
def test_the_default_model_is_judged_alike_on_cuda_and_the_cpu():
    from compscope.data.validate import validate

    kw = dict(sequences=8, half=8, intervention_sequences=4, kinds="QK", metrics=("identity", "activations"), progress=False)
    a, b = validate("induction-2l", device="cpu", **kw), validate("induction-2l", device="cuda", **kw)
    assert b.options["device"].startswith("cuda")
    for ra, rb in zip(a.rows, b.rows):
        assert (ra["measure"], ra["metric"], ra["kind"]) == (rb["measure"], rb["metric"], rb["kind"])
        for key in ("spearman", "auroc"):
            assert ra[key] == pytest.approx(rb[key], abs=1e-3, nan_ok=True)


@cuda
def test_toy_labels_on_cuda_take_tokens_from_the_cpu_and_equal_the_cpu():
    """``label_heads`` runs where the toy's parameters are (tokens moved there) and returns its
    scores on the CPU, equal to the CPU's."""
    from compscope.data.head_labels import label_heads
    from compscope.loading.builtin import find_toy
    from compscope.toy import repeated_random
    from compscope.toy.storage import load_toy

    toy, _ = load_toy(find_toy("induction-2l"))
    tokens = repeated_random(16, 12, toy.cfg.d_vocab, seed=4)
    a = label_heads(toy, tokens)
    b = label_heads(copy.deepcopy(toy).cuda(), tokens)
    for got, want in ((b.induction, a.induction), (b.previous, a.previous)):
        assert got.device.type == "cpu"
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    assert b.loss_second == pytest.approx(a.loss_second, abs=1e-4)


@cuda
def test_writers_per_batch_on_a_gpu_take_at_most_2_gib_or_a_quarter_of_its_free_memory():
    from types import SimpleNamespace

    from compscope.core.memory import free_memory
    from compscope.data import intervene

    hw = SimpleNamespace(n_heads=9, d_model=576, d_head=64)
    dev = torch.device("cuda")
    budget = min(2**31, free_memory(dev) // 4)  # the device's free memory and torch's cache
    for shape in ((16, 65), (16, 257), (64, 2049)):
        n = intervene.writers_per_batch(hw, shape, dev)
        assert n == max(1, budget // intervene.writer_bytes(hw, shape))
    assert intervene.writers_per_batch(hw, (16, 65), dev) > intervene.writers_per_batch(hw, (16, 65), torch.device("cpu"))


def _judged_at_the_texts_point(folder, device: str):
    """A tiny Gemma 3's verdict with QK-norm linearised at the text's moment, run on ``device``, and
    the linearised weights (the runner's pass, on the same device)."""
    import compscope
    from compscope.data.norm_linearisation import qk_norm_on_text
    from compscope.data.residual_moments import MetricData
    from compscope.data.runner import runner_for
    from compscope.data.validate import validate

    data = MetricData(sequences=6, length=12)
    v = validate(str(folder), sequences=6, half=4, intervention_sequences=3, kinds="K", metrics=("identity", "covariance"),
                 linearise_qk_norm="text", metric_data=data, progress=False, device=device)
    runner = runner_for(str(folder), device=device)
    return v, qk_norm_on_text(runner, compscope.load(folder), data)


@cuda
def test_qk_norm_at_the_texts_moment_on_cuda_equals_the_cpu(tmp_path):
    """``linearise_qk_norm='text'`` on a GPU: the moment, the linearised ``W_Q``, ``W_K``, and the scores,
    labels and effects the verdict judges equal the CPU's to float32 rounding. (Not the Spearman
    correlations themselves: over this tiny model's 16 K-pairs a near-tie swapped by rounding moves one
    by 0.006, seen on an H200.)"""
    from hf_tiny import BY_ID, build

    folder = tmp_path / "gemma3"
    build(BY_ID["gemma3-text"]).save_pretrained(folder)
    (va, wa), (vb, wb) = _judged_at_the_texts_point(folder, "cpu"), _judged_at_the_texts_point(folder, "cuda")
    assert vb.options["device"].startswith("cuda")
    for name in ("W_Q", "W_K"):
        a, b = getattr(wa, name), getattr(wb, name).cpu()
        torch.testing.assert_close(b, a, atol=1e-5 * float(a.abs().max()), rtol=0)
    assert [(r["measure"], r["metric"], r["kind"]) for r in va.rows] == [(r["measure"], r["metric"], r["kind"]) for r in vb.rows]
    close = lambda b, a: torch.testing.assert_close(  # noqa: E731
        b.cpu(), a, atol=1e-5 * max(1.0, float(a.nan_to_num().abs().max())), rtol=1e-4, equal_nan=True)
    for metric, table in va.tables.items():
        for (measure, kind), a in table.values.items():
            close(vb.tables[metric].values[measure, kind], a)
    for kind, a in va.effects.by_kind.items():
        close(vb.effects.by_kind[kind], a)
    close(vb.labels.induction, va.labels.induction)
    close(vb.labels.previous_token, va.labels.previous_token)


@cuda
def test_scores_of_weights_and_metrics_far_from_float32s_range_on_cuda_equal_the_cpu():
    """A ``G`` whose largest entry is 1e-60 or 1e60, with weights scaled by 1e-30 or 1e30: the whitened
    weights leave float32's range, and the bases are taken in float64 scaled by a power of two. On CUDA
    the scale-free measures equal the CPU's, and those of the unscaled ``G`` and weights."""
    import compscope

    G = torch.ones(64, 64, dtype=torch.float64) + torch.eye(64, dtype=torch.float64)
    hw = compscope.load("induction-2l")
    want = compscope.scores(hw, "K", ["frobenius", "tight"], G, progress=False)
    for c, w in ((1e-60 / 2, 1e-30), (1e-60 / 2, 1e30), (1e60 / 2, 1e-30), (1e60 / 2, 1e30)):
        scaled = hw.replace(W_Q=hw.W_Q * w, W_K=hw.W_K * w, W_V=hw.W_V * w, W_O=hw.W_O * w)
        cpu = compscope.scores(scaled, "K", ["frobenius", "tight"], G * c, progress=False, device="cpu")
        gpu = compscope.scores(scaled, "K", ["frobenius", "tight"], G * c, progress=False, device="cuda")
        for m in ("frobenius", "tight"):
            torch.testing.assert_close(gpu.dense(m, "K"), cpu.dense(m, "K"), rtol=1e-5, atol=1e-7, equal_nan=True)
            torch.testing.assert_close(gpu.dense(m, "K"), want.dense(m, "K"), rtol=1e-5, atol=1e-7, equal_nan=True)


@cuda
def test_free_memory_on_cuda_counts_what_torch_holds_cached_as_free():
    """Memory torch freed but keeps cached is free to the next allocation: ``free_memory`` counts it,
    where the device's own free count (``mem_get_info``) does not."""
    from compscope.core.memory import free_memory

    dev = torch.device("cuda")
    torch.cuda.empty_cache()
    before, total = free_memory(dev), torch.cuda.mem_get_info(dev)[1]
    x = torch.empty(2**30, dtype=torch.uint8, device=dev)
    held = free_memory(dev)
    del x  # cached, not returned to the device
    after = free_memory(dev)
    assert torch.cuda.mem_get_info(dev)[0] <= before - 2**30 + 2**26  # the device still counts the GiB as used
    assert held <= before - 2**30 + 2**26
    assert abs(after - before) <= 2**26 and after <= total


@cuda
def test_sequences_too_long_for_the_gpu_are_refused_before_the_model_runs(tmp_path):
    """A rotary model takes any length; on CUDA, sequences whose patterns exceed the GPU's free memory
    are refused by their length, naming the device, and nothing is allocated for them."""
    import re

    import compscope
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build

    runner = runner_for(build(BY_ID["llama-gqa-bias"]).cuda())
    assert runner.device.type == "cuda"
    t = 300_000  # 4 heads x t^2 float32 x 4 copies: about 5,400 GiB
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    with pytest.raises(compscope.OptionError, match=re.escape(f"sequences of {t} tokens, 1 at a time") + r".* free on cuda"):
        runner.trace(torch.zeros(1, t, dtype=torch.long))
    assert torch.cuda.max_memory_allocated() - start < 2**20
    runner.trace(torch.zeros(2, 64, dtype=torch.long))  # a length that fits runs


@cuda
def test_a_model_object_on_the_gpu_is_read_onto_the_cpu_and_its_runner_stays_there(tmp_path):
    """``compscope.load`` of a ``transformers`` model on CUDA (every tiny variant), or of a toy, gives the
    CPU's weights (every tensor on the CPU, equal to the same model's read on the CPU); its runner computes
    on CUDA, and a report of it (whose weight-only circuits mixed CUDA's embeddings with the CPU's
    unembedding before) runs."""
    import compscope
    from compscope.data.runner import runner_for
    from compscope.report.collect import collect
    from hf_tiny import BY_ID, build

    for variant in BY_ID:  # every family's reader, its own tensors made beside the model's
        want = _tensors(compscope.load(build(BY_ID[variant])))
        got = _tensors(compscope.load(build(BY_ID[variant]).cuda()))
        assert got.keys() == want.keys(), variant
        for k, t in got.items():
            assert t.device.type == "cpu", (variant, k)
            torch.testing.assert_close(t, want[k], atol=1e-6, rtol=0)
    from compscope.loading.builtin import find_toy
    from compscope.toy.storage import load_toy

    toy, _ = load_toy(find_toy("induction-2l"))
    want = _tensors(compscope.load(toy))
    got = _tensors(compscope.load(copy.deepcopy(toy).cuda()))
    assert got.keys() == want.keys() and all(t.device.type == "cpu" for t in got.values())
    for k, t in got.items():
        torch.testing.assert_close(t, want[k], atol=0, rtol=0)
    model = build(BY_ID["llama-mha"]).cuda()
    runner = runner_for(model)
    assert runner.device.type == "cuda" and runner.hw.W_E.device.type == "cpu"
    rep = collect(runner, kinds="K", metrics=["identity"], data="none", progress=False)
    assert rep.options["model"] is None


def test_a_cuda_index_past_the_devices_there_is_refused(monkeypatch):
    """With two CUDA devices (stubbed: no GPU is touched), ``cuda:0``, ``cuda:1`` and ``cuda`` are taken and
    ``cuda:2`` is refused, saying how many there are."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    for name in ("cuda:0", "cuda:1", "cuda"):
        assert resolve_device(name) == torch.device(name)
    with pytest.raises(OptionError, match=r"device='cuda:2': there are 2 CUDA devices"):
        resolve_device("cuda:2")
