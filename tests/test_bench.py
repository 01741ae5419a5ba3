"""The benchmarks in ``bench/`` still run: each on the built-in default model (or a trial shape),
as a user would call it, checked on what its output must say. Nothing is timed here; the
benchmarks' own numbers are in bench/RESULTS.md. One of them (``measures_vs_interventions``)
once broke unseen when the ``Effects`` it reads changed shape; these tests are why it cannot again."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import forked
from environments import offline_env

ROOT = Path(__file__).resolve().parents[1]


#: scripts run in this process (:func:`run_here`) rather than in a new Python: they score weights (and read a
#: saved verdict), set no threads, start no process and measure no memory; starting Python and importing torch
#: (about 3 s on 2 cores) was most of what each of their runs took
IN_PROCESS = re.compile(r"verdict_\w+\.py|metric_data_spread\.py|metric_shrinkage\.py|(composition|product)_precision\.py")


#: scripts run by a new Python every time: Ray starts its own processes and stops them at exit
NEW_PYTHON = re.compile(r"sweep_executors\.py")


def run_bench(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``bench/script`` run with ``args``, offline: :data:`IN_PROCESS`'s in this process (no timeout),
    :data:`NEW_PYTHON`'s by a new Python, the others by a Python forked from one that has imported
    torch and transformers (``tests/forked.py``)."""
    if IN_PROCESS.fullmatch(script):
        return run_here(script, *args)
    return (run_new if NEW_PYTHON.fullmatch(script) else run_forked)(script, *args, timeout=timeout)


def run_new(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``bench/script`` run with ``args`` by a new Python, from the repository's root, offline."""
    return subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=offline_env())


def run_forked(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """:func:`run_new`'s run by a forked Python (``tests/forked.py``)."""
    return forked.run([str(ROOT / "bench" / script), *args], cwd=ROOT, env=offline_env(), timeout=timeout)


def run_here(script: str, *args: str) -> subprocess.CompletedProcess:
    """``bench/script`` run as ``python bench/script args`` runs it from the repository's root, but in this
    process: ``sys.argv``, the script's folder first on ``sys.path`` and the working folder as Python sets
    them (all restored after), its output captured, the status of
    its ``SystemExit`` its exit status (a message: printed, status 1), an uncaught exception its
    traceback on stderr and status 1."""
    path, out, err = str(ROOT / "bench" / script), io.StringIO(), io.StringIO()
    argv, syspath, cwd = sys.argv[:], sys.path[:], os.getcwd()
    sys.argv, sys.path[:0] = [path, *args], [str(ROOT / "bench")]
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = forked.run_as_main(path)
    finally:
        sys.argv, sys.path[:] = argv, syspath
        os.chdir(cwd)
    return subprocess.CompletedProcess([sys.executable, path, *args], status, out.getvalue(), err.getvalue())


def bench(script: str, *args: str, timeout: float = 300) -> str:
    """Run ``bench/script`` with ``args``; its stdout, or a failure showing its stderr."""
    p = run_bench(script, *args, timeout=timeout)
    assert p.returncode == 0, f"bench/{script} {' '.join(args)} exited {p.returncode}:\n{p.stderr[-3000:]}"
    return p.stdout


def test_measures_vs_interventions_on_the_shipped_model():
    out = bench("measures_vs_interventions.py", "--seeds", "")
    # the default model's K effects are its previous-token -> induction pairs; frobenius ranks them so
    k = re.search(r"^  K: frobenius ([+-][0-9.]+)", out, re.M)
    assert k and float(k.group(1)) > 0.9, out
    assert "median over 1 models" in out


def test_interventions_real_on_the_default_model(tmp_path):
    """The toy's strongest K effect is a layer-0 writer into a layer-1 reader; ``--save`` keeps every
    effect and ``--against`` compares a run with them: 0 for the same run, the shift for a file
    whose K effects were moved by 0.25."""
    from safetensors.torch import load_file, save_file

    saved = tmp_path / "fx.safetensors"
    out = bench("interventions_real.py", "--model", "induction-2l", "--save", str(saved))
    strongest = re.search(r"strongest K effects: (\d+)\.\d+->(\d+)\.\d+", out)
    assert strongest and strongest.groups() == ("0", "1"), out  # a layer-0 writer into a layer-1 reader
    assert "peak resident memory" in out and "device cpu, model in float32" in out
    effects = load_file(saved)
    assert set(effects) == {"Q", "K", "V", "V (direction)"} and effects["K"].shape == (2, 4, 2, 4)
    effects["K"] = effects["K"] + 0.25
    save_file(effects, tmp_path / "moved.safetensors")
    for against, k_shift in ((saved, 0.0), (tmp_path / "moved.safetensors", 0.25)):
        out = bench("interventions_real.py", "--model", "induction-2l", "--against", str(against))
        found = dict(re.findall(r"^against .*: (Q|K|V|V \(direction\)) +largest \|difference\| (\S+)", out, re.M))
        assert set(found) == {"Q", "K", "V", "V (direction)"}, out
        assert float(found["K"]) == pytest.approx(k_shift, abs=1e-12), out
        assert all(float(found[k]) == 0.0 for k in ("Q", "V", "V (direction)")), out


def test_interventions_real_on_every_path(tmp_path):
    """``--paths all``: the header says so, and a writer layer's heads in one changed forward pass
    give the effects of one pass per writer (within 1e-5)."""
    pytest.importorskip("transformers")  # a random Llama is built with it
    batched = tmp_path / "batched.safetensors"
    args = ("interventions_real.py", "--random-llama", "64,4,2,3", "--sequences", "2", "--half", "4", "--paths", "all")
    out = bench(*args, "--writer-batch-mib", "256", "--save", str(batched))
    assert "plain (writers in batches of up to 4) route where it applies; every path" in out, out
    out = bench(*args, "--against", str(batched))
    assert "plain (writers in batches of up to 1) route where it applies; every path" in out, out
    assert "(12 writer x later-layer blocks" in out, out  # 4 heads x 3 layer pairs
    found = dict(re.findall(r"^against .*: (Q|K|V|V \(direction\)) +largest \|difference\| (\S+)", out, re.M))
    assert set(found) == {"Q", "K", "V", "V (direction)"} and max(map(float, found.values())) < 1e-5, out


def test_live_bytes_counts_what_operations_make_until_it_is_freed():
    """``bench/interventions_real.py``'s counter: a new tensor's bytes count, a view or an in-place
    operation adds nothing, a freed tensor's bytes leave, and the peak keeps the most held at once."""
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    from interventions_real import LiveBytes

    live = LiveBytes()
    with live.mode:
        a = torch.ones(1000)  # 4000 bytes
        b = a.view(10, 100)
        c = a + 1  # 4000 more
        assert (live.live, live.peak) == (8000, 8000)
        del c
        d = torch.zeros(250, dtype=torch.float64)  # 2000
        a.add_(1)
        assert (live.live, live.peak) == (6000, 8000)
        del a, b
    assert (live.live, live.peak) == (2000, 8000) and d.numel() == 250


def test_interventions_real_counts_the_live_tensors_of_a_writer_group():
    """``--live-memory``: the interventions' peak of live tensors and the estimate the writer groups are
    sized by; a layer's four writers in one changed forward pass hold three writers' more at once than
    one writer does, within a factor 2 of what the estimate says."""
    pytest.importorskip("transformers")  # a random Llama is built with it
    args = ("interventions_real.py", "--random-llama", "256,4,2,3", "--sequences", "16", "--half", "32", "--paths", "all",
            "--plain", "--live-memory")
    peaks = {}
    for mib, group in (("0", 1), ("1024", 4)):
        out = bench(*args, "--writer-batch-mib", mib)
        m = re.search(r"^peak live tensors \(interventions\) +(\d+) MiB   \(plain \(writers in batches of up to (\d)\) "
                      r"route; the writer-group estimate is ([0-9.]+) MiB a writer\)$", out, re.M)
        assert m and int(m.group(2)) == group, out
        peaks[group], estimate = int(m.group(1)), float(m.group(3))
    assert 0.5 < (peaks[4] - peaks[1]) / (3 * estimate) < 2, (peaks, estimate)


def test_interventions_real_on_some_writers(tmp_path):
    """``--writers``: only those heads are intervened on, the header names them, the blocks counted are
    theirs (head 0.1 before two later layers, layer 1's four heads before one), and a bad list is
    refused by argparse."""
    pytest.importorskip("transformers")  # a random Llama is built with it
    args = ("interventions_real.py", "--random-llama", "64,4,2,3", "--sequences", "2", "--half", "4")
    out = bench(*args, "--writers", "0.1,1")
    assert "; writers 0.1 1.0 1.1 1.2 1.3 (5 heads)" in out, out
    assert "(6 writer x later-layer blocks" in out, out
    p = run_bench(*args, "--writers", "x")
    assert p.returncode == 2 and "expected LAYER.HEAD" in p.stderr, p.stderr
    p = run_bench(*args, "--writers", "5")
    assert p.returncode == 2 and "--writers: writer layer 5: random-llama-64-4-2-3 has layers 0-2" in p.stderr, p.stderr


def test_interventions_real_on_a_random_llama_of_a_given_shape(tmp_path):
    """``--random-llama D,H,KV,L`` runs a random Llama of that shape (the header names its layers and
    heads); ``--plain`` runs the route without the writer's coordinates (on the CPU one writer at a
    time, or a writer layer's heads batched with ``--writer-batch-mib``), and the routes' effects agree
    (``--against``: within 1e-5); a shape whose heads do not divide the width is refused by argparse."""
    pytest.importorskip("transformers")  # a random Llama is built with it
    plain = tmp_path / "plain.safetensors"
    args = ("interventions_real.py", "--random-llama", "64,4,2,3", "--sequences", "2", "--half", "4")
    out = bench(*args, "--plain", "--writer-batch-mib", "256", "--save", str(plain))
    assert re.search(r"^random-llama-64-4-2-3: 3 layers x 4 heads, 2 sequences of 9 tokens", out, re.M), out  # [bos] t t
    assert "(12 writer x later-layer blocks" in out, out  # 4 heads x 3 layer pairs
    assert "plain (writers in batches of up to 4) route where it applies" in out, out
    for more, route in ((("--plain",), "plain (writers in batches of up to 1)"), ((), "factored")):
        out = bench(*args, *more, "--against", str(plain))
        assert f"{route} route where it applies" in out, out
        found = dict(re.findall(r"^against .*: (Q|K|V|V \(direction\)) +largest \|difference\| (\S+)", out, re.M))
        assert set(found) == {"Q", "K", "V", "V (direction)"} and max(map(float, found.values())) < 1e-5, out
        assert "other pairs measured" not in out, out
    p = run_bench("interventions_real.py", "--random-llama", "64,5,1,2", timeout=120)
    assert p.returncode == 2 and "'64,5,1,2': positive, with HEADS dividing D_MODEL" in p.stderr, p.stderr


def test_model_dtype_on_a_tiny_model_folder(tmp_path):
    """bench/model_dtype.py on a tiny random Llama folder: one line per 16-bit dtype, every label
    and effect named, each change within the bound tests/test_runner.py holds it to (6.25%)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hf_tiny import BY_ID, build

    build(BY_ID["llama-gqa-bias"]).save_pretrained(tmp_path)
    out = bench("model_dtype.py", "--model", str(tmp_path), "--dtypes", "bfloat16", "--sequences", "4", "--half", "4")
    line = re.search(r"^bfloat16 .*largest change / largest value: (.*)$", out, re.M)
    assert line, out
    changes = dict(re.findall(r"(label \w+|effect [QKV]) ([0-9.]+)%", line.group(1)))
    assert set(changes) == {"label induction", "label previous_token", "label duplicate_token", "label sink",
                            "effect Q", "effect K", "effect V"}, out
    assert all(0 <= float(v) <= 6.25 for v in changes.values()), out


def test_pattern_memory_on_a_tiny_model_folder(tmp_path):
    """bench/pattern_memory.py on a tiny random Llama (4 heads), each length in its own process: the
    estimate by hand (4 copies x 32 sequences x 4 heads x seq² float32, and the residuals kept: 2 x 2
    layers x 32 x seq x width float32), a measured extra, and the fit of the extra to the length and its
    square."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hf_tiny import BY_ID, D, build

    build(BY_ID["llama-gqa-bias"]).save_pretrained(tmp_path)
    out = bench("pattern_memory.py", "--model", str(tmp_path), "--batch", "32", "--lengths", "64,128")
    assert f"{tmp_path} on cpu, 32 sequences, 4 heads; PATTERN_COPIES = 4" in out, out
    rows = re.findall(r"^ +(\d+) +([0-9.]+) +(-?[0-9.]+) +(-?[0-9.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["64", "128"], out
    for length, estimate, *_ in rows:
        n = int(length)  # 4 patterns of 32 x 4 heads x n^2, and 2 residuals of 2 layers x 32 x n x D
        assert float(estimate) == pytest.approx((4 * 32 * 4 * n**2 + 2 * 2 * 32 * n * D) * 4 / 2**20, abs=0.006), out
    assert re.search(r"^fit extra ~ a\*seq \+ b\*seq\^2: a = -?[0-9.]+ MiB per token \(-?[0-9.]+ times the residuals "
                     r"kept\), b = -?[0-9.]+ copies of the patterns \(PATTERN_COPIES = 4\)$", out, re.M), out


def test_trace_speed_on_a_tiny_model_folder(tmp_path):
    """bench/trace_speed.py on a tiny random Llama folder: both timings, and the runner's base-model
    trace bitwise the same as the head model's; a changed run's residuals the same with the last layer
    left out."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hf_tiny import BY_ID, build

    build(BY_ID["llama-gqa-bias"]).save_pretrained(tmp_path)
    out = bench("trace_speed.py", "--model", str(tmp_path), "--sequences", "2", "--half", "4", "--reps", "1",
                "--changed", "0")
    assert re.search(r"^base model \(the runner\) +[0-9.]+ s$", out, re.M), out
    assert "bitwise the same: True" in out, out
    assert re.search(r"^changed at layer 0 +layers 0\.\.1 run +[0-9.]+ s, the last left out +[0-9.]+ s \([0-9.]+x\); "
                     r"residuals bitwise the same: True$", out, re.M), out


def test_validate_real_on_the_default_model():
    """The verdict's truth line; with ``--profile 5``, five compscope functions by cumulative time,
    ``validate`` itself first (it holds all the others), or, where cProfile's accounting fails (seen on
    Python 3.12 on a GPU machine: no validate among the five), a line that says so; never on Python 3.11."""
    out = bench("validate_real.py", "--model", "induction-2l", "--profile", "5")
    assert "true previous-token -> induction K-pairs: 8 " in out, out  # 2 previous-token x 4 induction heads
    profile = out.split("under cProfile: compscope's 5 functions with the largest cumulative time")[1]
    rows = re.findall(r"^ +\d+(?:/\d+)? +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ (\S+)$", profile, re.M)
    assert len(rows) == 5 and all("compscope" in r for r in rows), out
    off = "cProfile's cumulative times do not add up here: validate holds" in profile
    assert rows[0].endswith("(validate)") != off, out
    assert not off or sys.version_info >= (3, 12), out


def test_validate_real_on_some_writers_then_the_whole_verdict():
    """--writers 0.0 --full: the verdict on 0.0 first, then the whole one, with the same label
    truth, and the ratio of their times."""
    out = bench("validate_real.py", "--model", "induction-2l", "--writers", "0.0", "--full")
    first, second = out.split("compscope.validate with its defaults")
    assert "compscope.validate with --writers 0.0" in first and "writers 0.0 (1 head;" in first, out
    assert "writers 0.0" not in second.split("\n\n")[0], out
    truth = "true previous-token -> induction K-pairs: 8 "
    assert truth in first and truth in second, out
    assert re.search(r"^the whole verdict takes [0-9.]+x the time of the one on --writers 0.0$", out, re.M), out


def test_validate_real_with_logits_prints_the_same_verdict(tmp_path):
    """--with-logits runs the head model instead of the base model: the same verdict, line for line."""
    sys.path.insert(0, str(ROOT / "tests"))
    from hf_tiny import BY_ID, build

    build(BY_ID["llama-gqa-bias"]).save_pretrained(tmp_path)
    base, logits = (bench("validate_real.py", "--model", str(tmp_path), *extra) for extra in ((), ("--with-logits",)))
    assert "true previous-token -> induction K-pairs" in base, base
    assert base.splitlines()[3:] == logits.splitlines()[3:], (base, logits)  # after the time and memory lines


def test_verdict_candidates_against_a_saved_verdict(tmp_path):
    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("verdict_candidates.py", "induction-2l", str(tmp_path / "verdict"), "--shrinkage", "none")
    ceiling = re.search(r"^interventions \(K effect\)\s+-\s+([0-9.]+)\s+([0-9.]+)", out, re.M)
    assert ceiling and float(ceiling.group(1)) == 1.0, out
    # every metric on data (shrunk, as by default) and with --shrinkage none the sample moment too, each
    # measure once, as is and layer-standardised
    for metric in ("activations", "covariance", "activations-own", "covariance-own", "activations, sample",
                   "covariance, sample", "activations-own, sample", "covariance-own, sample"):
        for suffix in ("", ", layer-standardised"):
            rows = re.findall(rf"^(\w+) +{metric}{suffix} +([01]\.\d{{3}}) +([01]\.\d{{3}})$", out, re.M)
            assert sorted(r[0] for r in rows) == ["bandwidth", "frobenius", "overlap", "read_gain", "spectral", "tight"], (metric, out)


@pytest.mark.parametrize("variant_id", ["llama-gqa-bias", "neox-partial-rotary-parallel"])
def test_the_offset_averaged_qk_circuit_is_the_mean_logit_over_the_offsets(variant_id):
    """``verdict_candidates.offsets_averaged``: ``x^T W_QK y`` of the averaged model equals the
    model's own rotary logit ``⟨R(i) W_Q x, R(j) W_K y⟩`` averaged over query positions ``i = j + δ``,
    ``δ = 0 … n − 1`` (rotations as the model applies them to each query and key vector; GQA,
    partial rotary)."""
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    import torch
    from hf_tiny import BY_ID, build
    from verdict_candidates import offsets_averaged

    import compscope

    hw = compscope.load(build(BY_ID[variant_id]))
    assert hw.rotary is not None
    n, j = 7, 3
    avg = offsets_averaged(hw, n)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(2, hw.d_model, generator=g, dtype=torch.float64)
    for layer in range(hw.n_layers):
        for h in range(hw.n_heads):
            q = hw.W_Q[layer, h].double() @ x
            k = hw.W_K[layer, hw.kv_map[h]].double() @ y
            rot = lambda v, pos: hw.rotary.rotate(v[None], torch.tensor([float(pos)]), layer)[0]  # noqa: E731
            want = sum(float(rot(q, j + d) @ rot(k, j)) for d in range(n)) / n
            got = float(x @ avg.W_QK(layer, h).dense().double() @ y)
            assert got == pytest.approx(want, rel=1e-4, abs=1e-6)
            assert got != pytest.approx(float(x @ hw.W_QK(layer, h).dense().double() @ y), rel=1e-3)  # it moved


def test_verdict_candidates_reads_qk_norm_at_two_operating_points():
    """``verdict_candidates.qk_operating_points``: the isotropic point (the library's default) and
    the point of the text's second moment, which sits nearer the data's mean Jacobian (measured
    by ``mean_jacobians`` on other text) than the isotropic one; with query biases both (the text's
    mean enters); none without a per-head QK-norm."""
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    import torch
    from hf_tiny import BY_ID, build
    from verdict_candidates import qk_operating_points

    import compscope
    from compscope.core.processing import linearise_qk_norm
    from compscope.data.norm_linearisation import mean_jacobians
    from compscope.data.runner import runner_for

    model = build(BY_ID["gemma3-text"])
    hw = compscope.load(model)
    runner = runner_for(model, hw)
    points = qk_operating_points(hw, runner)
    assert [how for how, _ in points] == ["iso. qk", "G-point qk"]
    torch.testing.assert_close(points[0][1].W_Q, linearise_qk_norm(hw).W_Q, rtol=0, atol=0)
    data = mean_jacobians(runner, "qk", progress=False).apply(hw)
    far = [float((lin.W_Q - data.W_Q).norm() / data.W_Q.norm()) for _, lin in points]
    assert far[1] < far[0], far
    for variant, want in (("gemma3-text-mqa-bias", ["iso. qk", "G-point qk"]), ("llama-mha", []), ("olmo2-layer-qk-norm", [])):
        m = build(BY_ID[variant])
        assert [how for how, _ in qk_operating_points(compscope.load(m), runner_for(m))] == want


def test_verdict_candidates_keeps_rows_tied_as_printed_in_the_order_they_came(capsys):
    sys.path.insert(0, str(ROOT / "bench"))
    from verdict_candidates import _print

    _print([("a", "m", 0.9031, 1.0), ("b", "m", 0.9034, 1.0), ("c", "m", 0.95, 1.0), ("d", "m", 0.9026, 1.0)], "t")
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]] == ["c", "a", "b", "d"]


def test_verdict_thresholds_against_a_saved_verdict(tmp_path):
    """At the verdict's own thresholds, the 8 true pairs of the default model (2 previous-token heads
    before 4 induction heads) and the K interventions' AUROC of 1; a threshold no head reaches: no
    true pair, and dashes rather than a number, as when every pair is true. ``--column`` adds a
    candidate (one on data with ``--on-data``, refused by name without)."""
    import torch

    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("verdict_thresholds.py", "induction-2l", str(tmp_path / "verdict"), "--prev", "0.4", "--induction", "0.3", "0.99")
    assert re.search(r"^ +0\.40 +0\.30 +8 +8 +1\.000  \w+, \w+ +[01]\.\d{3}", out, re.M), out
    assert re.search(r"^ +0\.40 +0\.99 +0 +- +- +- +- +- +-$", out, re.M), out
    # every K-pair true (any writer is a previous-token head at 0.01): nothing to compare, dashes too
    out = bench("verdict_thresholds.py", "induction-2l", str(tmp_path / "verdict"), "--prev", "0.01", "0.05",
                "--induction", "0.3", "0.665", "--on-data", "--column", "read_gain,covariance")
    assert re.search(r"^ +0\.01 +0\.30 +16 +- +- +- +- +- +- +-$", out, re.M), out
    truth = torch.zeros(2, 4, 2, 4, dtype=torch.bool)
    for pair, true in _toy_truth(tmp_path / "verdict").items():
        truth[pair] = bool(true)
    x = compscope.scores("induction-2l", "K", ["read_gain"], "covariance", pairs="all", progress=False).dense("read_gain", "K")
    row = re.search(r"^ +0\.05 +0\.67 +8 +\d+ +[0-9.]+  [\w-]+, [\w-]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +([0-9.]+)$", out, re.M)
    assert row and float(row.group(1)) == pytest.approx(_auroc_by_hand(x, _toy_truth(tmp_path / "verdict")), abs=5.01e-4), out
    p = run_bench("verdict_thresholds.py", "induction-2l", str(tmp_path / "verdict"), "--column", "read_gain,covariance")
    assert p.returncode == 2 and "--column read_gain,covariance: not among the candidates" in p.stderr, p.stderr


def test_verdict_text_labels_against_the_model_itself(tmp_path):
    """The default model has no tokenizer, so its 'text' is held-out repeated sequences (seed
    12346): each head's labels printed must be those of the toy's own cached patterns on those
    sequences, counted here position by position (previous-token: attention to ``i − 1``;
    induction: the attention to every token after an earlier copy of ``x_i``, summed, averaged over
    the positions that have one), the rank correlations pandas' Spearman of the two labellings, and
    the 8 true pairs (2 previous-token heads before 4 induction heads) the same under all three
    truths, the K interventions separating them perfectly."""
    import pandas as pd
    import torch

    import compscope
    from compscope.data.sequences import repeats
    from compscope.loading.builtin import find_toy
    from compscope.toy.storage import load_toy

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("verdict_text_labels.py", "induction-2l", str(tmp_path / "verdict"), "--sequences", "8",
                "--prev", "0.01", "0.4", "--list-induction", "0")
    assert "8 repeated random sequences [t, t], |t| = 32 (seed 12346)" in out, out
    model, _ = load_toy(find_toy("induction-2l"))
    tokens = repeats(8, 32, model.cfg.d_vocab, 12346).tokens
    cache: dict = {}
    with torch.no_grad():
        model.eval()
        model(tokens, cache=cache)
    prev, ind = {}, {}
    for l in range(2):
        p = cache[f"pattern.{l}"].double()
        for h in range(4):
            prev[l, h] = float(torch.stack([p[:, h, i, i - 1] for i in range(1, 64)]).mean())
            got = [float(sum(p[b, h, i, j + 1] for j in range(i - 1) if tokens[b, j] == tokens[b, i]))
                   for b in range(8) for i in range(64) if any(tokens[b, j] == tokens[b, i] for j in range(i - 1))]
            ind[l, h] = sum(got) / len(got)
    printed = {(int(l), int(h)): tuple(map(float, v)) for l, h, *v in
               re.findall(r"^ +(\d+)\.(\d+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)$", out, re.M)}
    assert set(printed) == set(prev), out  # every head, with the listing threshold at 0
    for lh, (_, p_text, _, i_text) in printed.items():
        assert p_text == pytest.approx(prev[lh], abs=0.0051) and i_text == pytest.approx(ind[lh], abs=0.0051), (lh, out)
    labels = pd.read_csv(tmp_path / "verdict" / "head_labels.csv").set_index(["layer", "head"])
    for column, ours in (("previous_token", prev), ("induction", ind)):
        rho = labels[column].rank().corr(pd.Series(ours).rename_axis(["layer", "head"]).rank())  # Spearman, no scipy
        assert f"{column.replace('_', '-')} {rho:.2f}" in out, (column, out)
    rows = re.findall(r"^ +0\.40 +0\.[123]0 +(\d+) +(\d+) +([0-9.]+)  ", out, re.M)
    assert rows == [("8", "8", "1.000")] * 5, out  # text/repeats at 0.3; text/text at 0.1, 0.2, 0.3; the verdict's


def _toy_truth(folder) -> dict:
    """``{(0, h1, 1, h2): true}`` of the default model's verdict in ``folder`` at thresholds that make
    its truth imperfect (previous-token >= 0.05, induction >= 0.665: 4 writers, 2 readers)."""
    import pandas as pd

    labels = pd.read_csv(folder / "head_labels.csv").set_index(["layer", "head"])
    pairs = [(0, h1, 1, h2) for h1 in range(4) for h2 in range(4)]
    return {p: labels.previous_token[p[0], p[1]] >= 0.05 and labels.induction[p[2], p[3]] >= 0.665 for p in pairs}


def _auroc_by_hand(dense, truth: dict) -> float:
    """Every true pair against every other, ties half."""
    pos = [float(dense[p]) for p, t in truth.items() if t]
    neg = [float(dense[p]) for p, t in truth.items() if not t]
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def test_metric_data_spread_against_the_scores_under_the_same_data(tmp_path):
    """Each printed AUROC is the one counted here (every true pair against every other, ties half)
    from ``compscope.scores`` under the metric estimated on the same data; thresholds that make
    the default model's truth imperfect (4 writers, 2 readers), so that the data matter."""
    import itertools

    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("metric_data_spread.py", "induction-2l", str(tmp_path / "verdict"), "--metric", "covariance",
                "--seeds", "12346", "1", "--sequences", "200", "10", "--prev-threshold", "0.05",
                "--induction-threshold", "0.665")
    truth = _toy_truth(tmp_path / "verdict")
    measures = ["frobenius", "tight", "overlap", "spectral", "bandwidth", "read_gain"]
    rows = 0
    for n, seed in itertools.product((200, 10), (12346, 1)):
        t = compscope.scores("induction-2l", "K", measures, "covariance", pairs="all", progress=False,
                             metric_data=compscope.MetricData(sequences=n, seed=seed))
        want = [_auroc_by_hand(t.dense(m, "K"), truth) for m in measures]
        line = re.search(rf"^{n} held-out repeated random sequences .*\(seed {seed}\); Ledoit-Wolf shrinkage +"
                         r"([0-9. ]+)$", out, re.M)  # shrunk, as by default
        assert line, out
        assert [float(x) for x in line.group(1).split()] == pytest.approx(want, abs=5.01e-4), (n, seed, out)
        rows += 1
    assert rows == 4 and "AUROC of 8 true K-pairs" in out, out  # 4 writers x 2 readers
    # on repeated random sequences instead: the moment of the runner's residual on the verdict's kind of
    # sequences (another seed), and the AUROC counted here
    from dataclasses import replace

    from compscope.core.metrics import activations
    from compscope.data.residual_moments import runner_second_moments
    from compscope.data.runner import runner_for
    from compscope.data.sequences import repeats

    out = bench("metric_data_spread.py", "induction-2l", str(tmp_path / "verdict"), "--metric", "covariance-own",
                "--repeats", "16", "--sequences", "20", "--seeds", "7", "--prev-threshold", "0.05",
                "--induction-threshold", "0.665")
    runner = runner_for("induction-2l", progress=False)
    G = runner_second_moments(runner, repeats(20, 16, 64, 7).tokens, centred=True,  # the toy has no special tokens
                              shrinkage="ledoit-wolf")  # the default
    t = compscope.scores("induction-2l", "K", measures, replace(activations(G, name="covariance-own"), own_reads=True),
                         pairs="all", progress=False)
    line = re.search(r"^20 repeated random sequences \[t, t\], \|t\| = 16 \(seed 7\); Ledoit-Wolf shrinkage +([0-9. ]+)$",
                     out, re.M)
    assert line, out
    assert [float(x) for x in line.group(1).split()] == pytest.approx(
        [_auroc_by_hand(t.dense(m, "K"), truth) for m in measures], abs=5.01e-4), out
    # another text reaches the estimate: the toy, which has no tokenizer, refuses one by name
    (tmp_path / "text.txt").write_text("some text " * 100)
    p = run_bench("metric_data_spread.py", "induction-2l", str(tmp_path / "verdict"), "--corpus", str(tmp_path / "text.txt"))
    assert p.returncode != 0 and "one of compscope's toy models, which have no tokenizer" in p.stderr, p.stderr[-2000:]


def test_metric_shrinkage_against_the_scores_under_the_same_regulariser(tmp_path):
    """Each printed AUROC is the one counted here from ``compscope.scores`` under the metric with
    that ridge, or with its Ledoit-Wolf estimate; the thresholds make the toy's truth imperfect."""
    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("metric_shrinkage.py", "induction-2l", str(tmp_path / "verdict"), "--metric", "covariance",
                "--ridges", "1e-06", "10", "--prev-threshold", "0.05", "--induction-threshold", "0.665")
    truth = _toy_truth(tmp_path / "verdict")
    measures = ["frobenius", "tight", "overlap", "spectral", "bandwidth", "read_gain"]
    sample = compscope.MetricData(shrinkage="none")  # the ridges regularise the sample moment
    rows = {"ridge 1e-06": dict(ridge=1e-6, metric_data=sample), "ridge 10": dict(ridge=10.0, metric_data=sample),
            "Ledoit-Wolf": dict(metric_data=compscope.MetricData(shrinkage="ledoit-wolf"))}
    for name, how in rows.items():
        t = compscope.scores("induction-2l", "K", measures, "covariance", pairs="all", progress=False, **how)
        want = [_auroc_by_hand(t.dense(m, "K"), truth) for m in measures]
        line = re.search(rf"^covariance +{re.escape(name)}.*?((?: +[0-9.]+){{6}})$", out, re.M)
        assert line, (name, out)
        assert [float(x) for x in line.group(1).split()] == pytest.approx(want, abs=5e-4), (name, out)
    assert "AUROC of 8 true K-pairs" in out and "Ledoit-Wolf 0.011 in every layer" in out, out


def test_verdict_uncertainty_against_a_saved_verdict(tmp_path):
    """The default model's K interventions separate its 8 true pairs perfectly: AUROC 1, no spread
    under the Hanley–McNeil error, DeLong's or the head bootstrap."""
    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("verdict_uncertainty.py", "induction-2l", str(tmp_path / "verdict"), "--reps", "50")
    assert "8 true K-pairs" in out, out
    assert re.search(r"^interventions \(K effect\) +- +1\.000 +0\.000 +0\.000 +0\.000 +\[1\.000, 1\.000\] +"
                     r"\[\+0\.000, \+0\.000\]$", out, re.M), out  # the best weight-only score is perfect too: no difference


def test_verdict_uncertainty_gives_each_scores_delong_error_as_the_verdict_does(tmp_path):
    """The DeLong column of each measure under ``identity`` and ``embed`` is the ``auroc_se`` the saved verdict's rows
    hold for it (``verdict.csv``, computed by ``validate``): on the default model, bandwidth and spectral under
    ``embed`` leave some true pairs below others, so not every error is 0."""
    import compscope

    v = compscope.validate("induction-2l", progress=False)
    v.save(tmp_path / "verdict")
    out = bench("verdict_uncertainty.py", "induction-2l", str(tmp_path / "verdict"), "--reps", "20")
    sys.path.insert(0, str(ROOT / "bench"))
    from verdict_candidates import MEASURES  # (the measures the script scores)

    rows = v.verdict_frame()
    rows = rows[(rows.kind == "K") & rows.metric.isin(["identity", "embed"]) & rows.measure.isin(list(MEASURES))]
    assert len(rows) >= 10 and (rows.auroc_se > 0.01).sum() >= 2
    for r in rows.itertuples():
        got = re.search(rf"^{r.measure} +{r.metric} +([0-9.]+) +[0-9.]+ +([0-9.]+) +[0-9.]+ +\[", out, re.M)
        assert got, (r.measure, r.metric, out)
        assert float(got.group(1)) == pytest.approx(r.auroc, abs=5e-4) and float(got.group(2)) == pytest.approx(
            r.auroc_se, abs=5e-4), (r.measure, r.metric, out)


def test_total_effects_against_a_saved_verdict(tmp_path):
    """The default model has two attention-only layers: every path from a layer-0 head into layer 1
    is the direct one, so both K effects separate its 8 true pairs perfectly."""
    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("total_effects.py", "induction-2l", str(tmp_path / "verdict"))
    assert "8 true K-pairs" in out, out
    assert re.search(r"direct path \(the verdict's\): 1\.000$", out, re.M), out
    assert re.search(r"every path: +1\.000$", out, re.M), out


def test_verdict_uncertainty_with_the_metrics_on_data(tmp_path):
    """--on-data adds every measure under the four metrics estimated on text, each with its errors;
    --shrinkage none the same four with the sample moment."""
    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("verdict_uncertainty.py", "induction-2l", str(tmp_path / "verdict"), "--reps", "20", "--on-data",
                "--shrinkage", "none")
    for metric in ("identity", "embed", "activations", "covariance", "activations-own", "covariance-own",
                   "activations, sample", "covariance, sample", "activations-own, sample", "covariance-own, sample"):
        rows = re.findall(rf"^(\w+) +{metric} +([01]\.\d{{3}}) +0\.\d{{3}} +0\.\d{{3}} +0\.\d{{3}} +"
                          r"\[[01]\.\d{3}, [01]\.\d{3}\] +"
                          r"(best|\[[+-]\d\.\d{3}, [+-]\d\.\d{3}\])$", out, re.M)
        assert {r[0] for r in rows} == {"frobenius", "tight", "overlap", "spectral", "bandwidth", "read_gain"}, (metric, out)


def test_verdict_scripts_score_the_linearised_weights_as_validate_does(tmp_path):
    """``--linearise-norms`` and ``--linearise-qk-norm [text]`` in verdict_pairs and verdict_uncertainty:
    the AUROC of the linearised weights is the one ``validate(linearise_norms=...)`` finds on the
    same labels (a verdict of its own), and differs from the weights' as they are; verdict_seeds,
    labelling the heads again, gives validate's AUROC on the verdict's seed; a model without such
    norms is refused by name, and thresholds that leave no true pair too."""
    pytest.importorskip("transformers")
    import compscope
    from hf_tiny import BY_ID, build

    folder = tmp_path / "gemma3"
    build(BY_ID["gemma3-text"]).save_pretrained(folder)
    opts = dict(sequences=4, half=4, intervention_sequences=2, kinds="K", metrics=("identity",), progress=False)
    labels = compscope.validate(str(folder), **opts).labels  # a random model: thresholds that leave true pairs
    prev, ind = float(labels.previous_token[:-1].median()), float(labels.induction[1:].median())
    opts.update(prev_threshold=prev, induction_threshold=ind)
    plain = compscope.validate(str(folder), **opts)
    plain.save(tmp_path / "verdict")
    lin = compscope.validate(str(folder), linearise_norms="qk", **opts)
    iso = compscope.validate(str(folder), linearise_qk_norm=True, **opts)
    text = compscope.validate(str(folder), linearise_qk_norm="text", **opts)
    assert plain.options["true_pairs"] > 0

    def want(v):
        return next(r["auroc"] for r in v.rows if (r["measure"], r["metric"], r["kind"]) == ("read_gain", "identity", "K"))

    args = [str(folder), str(tmp_path / "verdict"), "--prev-threshold", str(prev), "--induction-threshold", str(ind)]
    for extra, v, words in (([], plain, ""), (["--linearise-norms", "qk"], lin, "; lin. qk"),
                            (["--linearise-qk-norm"], iso, "; iso. qk"),
                            (["--linearise-qk-norm", "text"], text, "; G-point qk")):
        out = bench("verdict_pairs.py", *args, "--measure", "read_gain", "--metric", "identity", *extra)
        got = re.search(r"^gemma3: read_gain \(identity(.*)\), K-composition; .* AUROC ([0-9.]+),", out, re.M)
        assert got and got.group(1) == words, out
        assert float(got.group(2)) == pytest.approx(want(v), abs=5e-4), (want(v), out)
    assert want(plain) not in (want(lin), want(iso), want(text)) and want(text) != want(iso)
    for point, v, words in (([], iso, "the isotropic point"), (["text"], text, "the text's second moment")):
        out = bench("verdict_uncertainty.py", *args, "--reps", "20", "--linearise-qk-norm", *point)
        assert f"; QK-norm linearised at {words}" in out.splitlines()[0], out
        row = re.search(r"^read_gain +identity +([0-9.]+) ", out, re.M)
        assert row and float(row.group(1)) == pytest.approx(want(v), abs=5e-4), out
    out = bench("verdict_uncertainty.py", *args, "--reps", "20", "--linearise-norms", "qk")
    assert "; the norms qk linearised" in out.splitlines()[0], out
    row = re.search(r"^read_gain +identity +([0-9.]+) ", out, re.M)
    assert row and float(row.group(1)) == pytest.approx(want(lin), abs=5e-4), out
    # verdict_seeds: the verdict's seed gives validate's AUROC (labels read again, weights scored as validate
    # scores them); another seed reads other labels
    thresholds = ["--prev-threshold", str(prev), "--induction-threshold", str(ind)]
    for point, v in (([], plain), (["--linearise-qk-norm", "text"], text)):
        out = bench("verdict_seeds.py", str(folder), "--seeds", "12345,7", "--sequences", "4", "--half", "4",
                    "--metric", "identity", "--measure", "read_gain", "--goal", "0.5", *thresholds, *point)
        rows = dict(re.findall(r"^ +(\d+) +\d+ +\d+ +\d+ +([0-9.]+|nan)(?:  (?:previous-token|induction) .*)?$", out,
                               re.M))
        assert set(rows) == {"12345", "7"}, out
        assert float(rows["12345"]) == pytest.approx(want(v), abs=5e-4), (want(v), out)
        summary = re.search(r"^read_gain, identity +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+|nan)-([0-9.]+|nan)  "
                            r"(\d) of (\d)$", out, re.M)
        low, mid, high = (float(summary.group(i)) for i in (1, 2, 3))
        kept = [float(a) for a in rows.values() if a != "nan"]
        assert (low, high) == pytest.approx((min(kept), max(kept)), abs=5e-4) and low <= mid <= high, out
        assert int(summary.group(6)) == sum(a >= 0.5 for a in kept) and int(summary.group(7)) == len(kept), out
        # the verdict's seed: the span over its near heads is the one validate writes to verdict.csv
        row = next(r for r in v.rows if (r["measure"], r["metric"], r["kind"]) == ("read_gain", "identity", "K"))
        assert (float(summary.group(4)), float(summary.group(5))) == pytest.approx(
            (row["auroc_near_low"], row["auroc_near_high"]), abs=5e-4, nan_ok=True), out
        pooled = re.search(r"^pooled +\d+ +\d+ +\d+ +([0-9.]+|nan)(?:  .*)?$", out, re.M)
        if not point:  # the pooled row: the labels read once on both seeds' sequences together
            import torch
            from compscope.data.head_labels import activation_labels
            from compscope.data.runner import runner_for
            from compscope.data.sequences import Repeats
            from compscope.data.validate import auroc, true_pairs, verdict_sequences

            runner = runner_for(str(folder), progress=False)
            a, b = (verdict_sequences(runner, 4, 4, seed) for seed in (12345, 7))
            both = activation_labels(runner, Repeats(torch.cat([a.tokens, b.tokens]), 4, a.start, 0), 16, False)
            truth = true_pairs(both.previous_token, both.induction, prev, ind)
            x = compscope.scores(str(folder), kinds="K", measures=["read_gain"], metric="identity", pairs="all",
                                 progress=False).dense("read_gain", "K")
            assert pooled and float(pooled.group(1)) == pytest.approx(auroc(x, truth), abs=5e-4, nan_ok=True), out
    p = run_bench("verdict_seeds.py", "induction-2l", "--half", "33")  # [t, t] of 66 tokens: the toy takes 64
    assert p.returncode == 1 and "Traceback" not in p.stderr and p.stderr.startswith("--half: half=33: "), p.stderr
    p = run_bench("verdict_uncertainty.py", *args[:2], "--prev-threshold", "2")  # no label reaches 2: no true pair
    assert p.returncode == 1 and "Traceback" not in p.stderr and "0 true K-pairs (previous-token >= 2.0" in p.stderr, p.stderr
    p = run_bench("verdict_pairs.py", "induction-2l", str(tmp_path / "verdict"))  # another model's verdict
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == f"{tmp_path / 'verdict'}: its labels are of {labels.induction.numel()} heads (gemma3), " \
        "not of induction-2l's 2 layers x 4 heads", p.stderr
    compscope.validate("induction-2l", progress=False, sequences=4, intervention_sequences=2).save(tmp_path / "toy")
    p = run_bench("verdict_pairs.py", "induction-2l", str(tmp_path / "toy"), "--linearise-norms")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip().startswith("--linearise-norms: linearise_norms: ") and "no norm inside" in p.stderr, p.stderr
    p = run_bench("verdict_pairs.py", "induction-2l", str(tmp_path / "toy"), "--linearise-qk-norm")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == "--linearise-qk-norm: linearise_qk_norm: induction-2l has no QK-norm", p.stderr


def test_verdict_within_counts_and_scores_the_comparisons_that_share_a_head(tmp_path):
    """The default model at the imperfect thresholds (4 writers, 2 readers: 8 true pairs, 8 others):
    64 comparisons in all, none within a reader (both readers have only true pairs), 16 within the
    writers (2 true and 2 other readers each); every row's three AUROCs as computed here."""
    import torch

    import compscope
    from compscope.data.validate import auroc_within

    v = compscope.validate("induction-2l", progress=False)
    v.save(tmp_path / "verdict")
    out = bench("verdict_within.py", "induction-2l", str(tmp_path / "verdict"), "--prev-threshold", "0.05",
                "--induction-threshold", "0.665")
    assert out.splitlines()[0] == ("induction-2l: 8 true K-pairs (previous-token >= 0.05, induction >= 0.665); "
                                   "comparisons of a true pair with another: 64 in all, 0 into the same reader, "
                                   "16 from the same writer"), out
    t = _toy_truth(tmp_path / "verdict")
    truth = torch.zeros(2, 4, 2, 4, dtype=torch.bool)
    for pair, true in t.items():
        truth[pair] = bool(true)
    measures = ["frobenius", "tight", "overlap", "spectral", "bandwidth", "read_gain"]
    for metric in ("identity", "embed"):
        table = compscope.scores("induction-2l", "K", measures, metric, pairs="all", progress=False)
        for m in measures:
            x = table.dense(m, "K")
            row = re.search(rf"^{m} +{metric} +([0-9.]+) +nan +([0-9.]+)$", out, re.M)
            assert row, (m, metric, out)
            assert float(row.group(1)) == pytest.approx(_auroc_by_hand(x, t), abs=5.01e-4), (m, metric, out)
            assert float(row.group(2)) == pytest.approx(auroc_within(x, truth, "writer"), abs=5.01e-4), (m, metric, out)
    e = v.effects.by_kind["K"]
    row = re.search(r"^interventions \(K effect\) +- +([0-9.]+) +nan +([0-9.]+)$", out, re.M)
    assert row and float(row.group(1)) == pytest.approx(_auroc_by_hand(e, t), abs=5.01e-4), out
    assert float(row.group(2)) == pytest.approx(auroc_within(e, truth, "writer"), abs=5.01e-4), out


def test_toy_norms_trains_what_is_missing_and_judges_the_toys_asked_for(tmp_path):
    """Two of the four toys (one without norms inside its circuits, one with both of Gemma 3's: the
    other two differ from these only in their training options), then one of them read back."""
    out = bench("toy_norms.py", "--runs", str(tmp_path), "--steps", "20", "--toys", "gemma-like-4l", "rotary-4l")
    lines, spread = out.split("\n\n")[0].splitlines(), out.split("\n\n")[1].splitlines()
    assert lines[0].startswith("K-pairs of rotary-4l, gemma-like-4l (")  # in the script's order
    assert lines[1].split()[:4] == ["toy", "weights", "metric", "true"] and len(lines) == 2 + 6, out
    gains = {l.split()[0]: l for l in spread[1:] if not l.startswith("(")}  # "(gemma3-270m is not installed ...)"
    assert [n for n in gains if n.endswith("-4l")] == ["gemma-like-4l"], out
    assert "QK-norm (q)" in gains["gemma-like-4l"] and "QK-norm (k)" in gains["gemma-like-4l"], out
    assert "output norm" in gains["gemma-like-4l"], out
    for name, n in (("rotary-4l", 2), ("gemma-like-4l", 4)):
        mine = [l for l in lines if l.startswith(name + " ")]
        assert len(mine) == n and (n == 2 or sum("linearised" in l for l in mine) == 2), (name, out)
        assert all(len(re.findall(r"-?\d\.\d\d\b", l)) >= 4 for l in mine), (name, out)  # 4 rank correlations
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemma-like-4l", "rotary-4l"]
    stamp = (tmp_path / "rotary-4l" / "final" / "model.safetensors").stat().st_mtime_ns
    again = bench("toy_norms.py", "--runs", str(tmp_path), "--steps", "20", "--toys", "rotary-4l").splitlines()
    assert again[0].startswith("K-pairs of rotary-4l (")
    assert again[1:] == [l for l in out.splitlines()[1:] if not l.startswith("gemma-like-4l ")], again  # read again, the same
    assert (tmp_path / "rotary-4l" / "final" / "model.safetensors").stat().st_mtime_ns == stamp


def test_toy_norms_names_an_unfinished_run_it_would_train_over(tmp_path):
    (tmp_path / "qknorm-4l").mkdir()
    (tmp_path / "qknorm-4l" / "log.jsonl").write_text("{}\n")  # a training stopped before its final model
    p = run_bench("toy_norms.py", "--runs", str(tmp_path), "--toys", "qknorm-4l", "--steps", "5", timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == f"toy_norms.py: error: {tmp_path / 'qknorm-4l'}: already holds a run (log.jsonl); choose a new folder"


@pytest.mark.parametrize("n1, n0", [(1, 1), (10, 10), (12, 2436), (60, 35175)])
def test_hanley_mcneil_at_chance_is_the_mann_whitney_null_variance(n1, n0):
    """At A = 1/2 (Q₁ = Q₂ = 1/3) the Hanley–McNeil variance is that of the Mann–Whitney statistic
    under the null hypothesis without ties, (n₁ + n₀ + 1) / (12 n₁ n₀)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from verdict_uncertainty import hanley_mcneil

    assert hanley_mcneil(0.5, n1, n0) ** 2 == pytest.approx((n1 + n0 + 1) / (12 * n1 * n0), rel=1e-12)


def test_circuits_real_pruned_maximum_equals_the_reference():
    out = bench("circuits_real.py", "--models", "induction-2l", "--steps")
    diff = re.search(r"max \|induction_qk - reference\| = ([0-9.e+-]+)", out)
    assert diff and float(diff.group(1)) < 1e-12, out
    # the pruned search timed alone solves the eigenproblems head_circuits does
    alone = re.search(r"steps: copying [0-9.]+ s, matching [0-9.]+ s, previous-token [0-9.]+ s, K [0-9.]+ s, "
                      r"pruned search [0-9.]+ s \((\d+) eigenproblems\)", out)
    whole = re.search(r"head_circuits \(pruned maximum\) +[0-9.]+ s +(\d+) eigenproblems", out)
    assert alone and whole and alone.group(1) == whole.group(1) and int(alone.group(1)) > 0, out


def test_report_real_on_the_default_model():
    pytest.importorskip("plotly")
    out = bench("report_real.py", "--model", "induction-2l")
    assert re.search(r"page [0-9.]+ MB", out), out


def test_composition_speed_without_transformer_lens():
    out = bench("composition_speed.py", "--no-tl", "--shapes", "trial", "--repeats", "1", "--wait", "0", "--retries", "0")
    diffs = [float(x) for x in re.findall(r"(?:frobenius|frobenius_baselined|tight|overlap|shared_dims|bandwidth|spectral) ([0-9.]+e[+-]\d+) \(rel", out)]
    assert len(diffs) == 12, out  # 5 measures on the Gram route, 7 on the X route
    assert max(diffs) < 1e-4, out  # float32 against float64 on scores of order 0.1 (shared_dims: of order 64)


@pytest.mark.parametrize("script, args, named", [
    ("composition_speed.py", ("--shapes", "small,bogus"), "unknown bogus; shapes: small, medium, trial"),
    ("composition_speed.py", ("--retries", "-1"), "--retries -1"),
    ("cpu_limits.py", ("--batch", "0"), "--batch 0"),
    ("cpu_limits.py", ("--cores", "100"), "--cores 100"),
    ("composition_7b.py", ("--rate-size", "0"), "--rate-size 0"),
])
def test_bench_options_refuse_what_would_time_nothing(script, args, named):
    p = run_bench(script, *args, timeout=120)
    assert p.returncode == 2 and named in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_composition_7b_on_a_trial_shape():
    out = bench("composition_7b.py", "--shape", "2,4,128,32", "--wait", "0", "--dtype", "float32", "--rate-size", "512")
    assert re.search(r"frobenius: 16 pairs, mean 0\.0[0-9]+ \(1/sqrt\(d\) = 0\.0884\)", out), out


def test_composition_7b_gqa_trial_in_a_reduced_precision():
    out = bench("composition_7b.py", "--shape", "3,8,128,32,2", "--wait", "0", "--dtype", "float32", "--precision", "bfloat16",
                "--rate-size", "512")
    assert "3 layers x 8 heads (2 K/V heads)" in out and "precision bfloat16" in out, out
    assert re.search(r"frobenius: 192 pairs, mean 0\.0[0-9]+ \(1/sqrt\(d\) = 0\.0884\)", out), out


def test_composition_7b_with_qk_norm_linearised_first():
    """``--qk-norm``: the linearisation's time is printed, the weights keep their dtype, and the
    linearised heads are scored."""
    out = bench("composition_7b.py", "--shape", "2,4,128,32,2", "--wait", "0", "--rate-size", "512", "--qk-norm")
    assert re.search(r"^linearise_qk_norm \(isotropic point\): [0-9.]+ s; W_Q, W_K stay torch\.bfloat16$", out, re.M), out
    assert re.search(r"frobenius: 16 pairs, mean 0\.0[0-9]+ \(1/sqrt\(d\) = 0\.0884\)", out), out


def test_product_precision_on_a_trial_shape():
    out = bench("product_precision.py", "--shape", "3,4,128,32")
    rows = re.findall(r"^\s*(float64|float32|tf32|bfloat16)?\s+(?:[0-9.]+)?\s+frobenius\s+(\S+)\s+(\S+)", out, re.M)
    assert [r[0] for r in rows] == ["float64", "float32", "tf32", "bfloat16"], out
    err = {p: float(a) for p, a, _ in rows}
    assert err["float64"] == 0 and err["float32"] < 1e-6 and 0 < err["bfloat16"] < 6 * 2.0**-9, out


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a CUDA device is present")
@pytest.mark.parametrize("script", ["composition_7b.py", "product_precision.py", "composition_speed.py",
                                    "interventions_real.py"])
def test_a_device_that_is_not_there_is_a_one_line_error(script):
    extra = ["--no-tl"] if script == "composition_speed.py" else []
    p = run_bench(script, "--device", "cuda", *extra, timeout=120)
    assert p.returncode == 1 and p.stderr.strip() == f"{script}: error: --device: device='cuda': torch sees no CUDA device here " \
        f"(torch {__import__('torch').__version__}); use 'cpu'", p.stderr


def test_composition_precision():
    out = bench("composition_precision.py")
    assert "overlap" in out and "frobenius" in out


def test_refine_estimate_on_one_random_shape():
    """On near-zero random scores every truly spoiled float32 value is flagged (none missed), and
    after the repair float32 is within 1e-3 of float64."""
    out = bench("refine_estimate.py", "--models", "", "--random", "768")
    rows = [line.split() for line in out.splitlines() if line.startswith("random d=768")]
    assert len(rows) == 2, out
    for row in rows:
        missed, after = int(row[-2]), float(row[-1])
        assert missed == 0 and after < 1e-3, out


def test_metric_precision_on_the_default_model():
    out = bench("metric_precision.py", "--models", "induction-2l", "--metrics", "identity,embed", "--repeats", "1")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [r[1] for r in rows] == ["identity", "embed"], out
    assert all(float(r[-1]) < 1e-4 for r in rows), out  # float32 against float64
    assert all(re.fullmatch(r"\d+/48", r[-2]) for r in rows), out  # 3 kinds x 16 pairs of 2 layers x 4 heads


def test_train_default_on_a_short_run(tmp_path):
    from compscope.cli.main import main

    assert main(["train", "--out", str(tmp_path / "run"), "--steps", "40", "--checkpoints", "2"]) in (0, None)
    out = bench("train_default.py", "--run", str(tmp_path / "run"))
    assert re.search(r"equals the shipped model\s+NO", out), out  # 40 steps are not the shipped model
    assert "step 40: prev->induction" in out


def test_sweep_executors_gives_the_same_rows():
    pytest.importorskip("ray")
    out = bench("sweep_executors.py", "--checkpoints", "2", "--steps", "20")
    rows = re.findall(r"^  (local|ray, 2 workers)\s+[0-9.]+ s\s+(\d+) rows", out, re.M)
    assert len(rows) == 2 and rows[0][1] == rows[1][1], out


def test_cpu_limits_first_sections():
    out = bench("cpu_limits.py", "--sections", "1,1c,2,3", "--repeats", "1", "--wait", "0", "--batch", "512", "--cores", "128")
    errs = dict(re.findall(r"^  (compscope batch_eig float(?:32|64))\s+([0-9.]+e-\d+)$", out, re.M))
    assert len(errs) == 2, out  # batch_eig's error against LAPACK float64, relative to the largest eigenvalue
    assert float(errs["compscope batch_eig float32"]) < 1e-5 and float(errs["compscope batch_eig float64"]) < 1e-12, out
    assert "first call of batch_eig in a new process" in out
    assert "3. bmm writing" in out
    cores = re.findall(r"^\s+(64|128) per call, (.+?)\s+([0-9.]+)$", out, re.M)
    assert len(cores) == 7 and all(float(t) > 0 for _, _, t in cores), out  # three ways at two sizes, and the whole core


def test_gauge_real_on_the_default_model():
    """The toy model has no norms: every change but the gain trade applies, and the check makes a
    scoring per change and metric plus one per metric for each base (as loaded, folded)."""
    out = bench("gauge_real.py", "--models", "induction-2l")
    line = re.search(r"gauge_check: (\d) changes \(([a-z_, ]+)\), (\d+) scorings", out)
    assert line and line.group(2) == "permutation, rotation, linear", out
    assert int(line.group(3)) == 2 * 3 + 2 * 1, out  # the toy's weights need no folding: one base
    assert "after the check" in out


def test_verdict_pairs_rows_average_to_the_auroc(tmp_path):
    """Each head's share, weighted by its true pairs, averages to the AUROC printed above the rows
    (computed apart, by :func:`compscope.data.validate.auroc`), for the writers and for the
    readers; the default model's K interventions separate every true pair (share 1)."""
    import compscope

    compscope.validate("induction-2l", progress=False).save(tmp_path / "verdict")
    out = bench("verdict_pairs.py", "induction-2l", str(tmp_path / "verdict"), "--measure", "bandwidth", "--metric", "embed")
    head = re.search(r"8 true pairs .* against 8 false; AUROC ([0-9.]+), the K interventions' ([0-9.]+)", out)
    assert head and float(head.group(2)) == 1.0, out
    assert float(head.group(1)) < 1.0, out  # bandwidth under embed misses some: the rows have something to share
    blocks = out.split("\n\n")[1:]
    assert len(blocks) == 2, out
    for block in blocks:
        rows = [line.split() for line in block.strip().splitlines()[1:]]
        n = [int(r[2]) for r in rows]
        assert sum(n) == 8, block
        mean = sum(k * float(r[3]) for k, r in zip(n, rows)) / sum(n)
        assert abs(mean - float(head.group(1))) < 2e-3, (mean, out)
        assert all(float(r[5]) == 1.0 for r in rows), block
    # --shrinkage: how a metric on data is estimated (said in the header; shrunk by default), and refused, by
    # name, for one that is not
    for given, words in (((), "Ledoit-Wolf"), (("--shrinkage", "ledoit-wolf"), "Ledoit-Wolf"),
                         (("--shrinkage", "none"), "sample moment")):
        said = bench("verdict_pairs.py", "induction-2l", str(tmp_path / "verdict"), "--measure", "frobenius", "--metric",
                     "covariance", *given)
        assert f"frobenius (covariance, {words}), K-composition; 8 true pairs" in said, said
    p = run_bench("verdict_pairs.py", "induction-2l", str(tmp_path / "verdict"), "--metric", "embed", "--shrinkage", "ledoit-wolf")
    assert p.returncode == 2 and "--shrinkage: embed is not estimated on data" in p.stderr
    p = run_bench("verdict_pairs.py", "induction-2l", str(tmp_path))  # a folder with no verdict in it
    assert p.returncode == 1 and "not a folder written by `compscope validate --out` (missing head_labels.csv" in p.stderr
    assert "Traceback" not in p.stderr


def test_verdict_uncertainty_within_readers_and_writers(tmp_path):
    """``--within``: a draw of every head in order, or in any order, is the model itself, so its
    AUROC is :func:`auroc_within`'s; the script's estimate for each score is too, and it gives no
    Hanley–McNeil error."""
    import torch

    import compscope
    from compscope.data.validate import auroc_within, true_pairs

    sys.path.insert(0, str(ROOT / "bench"))
    from verdict_uncertainty import head_bootstrap

    g = torch.Generator().manual_seed(3)
    L, H = 3, 3
    n = L * H
    x = torch.randint(0, 5, (L, H, L, H), generator=g).double()  # ties
    later = torch.arange(L)[:, None, None, None] < torch.arange(L)[None, None, :, None]
    x = torch.where(later.expand_as(x), x, torch.nan)
    truth = (torch.rand(x.shape, generator=g) < 0.4) & later
    layer = torch.arange(L).repeat_interleave(H)
    draws = [torch.arange(n), torch.randperm(n, generator=g), torch.zeros(n, dtype=torch.long)]
    for side in ("reader", "writer"):
        got = head_bootstrap([x.reshape(n, n)], truth.reshape(n, n), layer, draws, side)[0]
        assert got[0] == pytest.approx(auroc_within(x, truth, side), abs=1e-12)
        assert got[1] == pytest.approx(auroc_within(x, truth, side), abs=1e-12)
        assert got[2].isnan()  # one head drawn n times: no pair in order of layers
    v = compscope.validate("induction-2l", progress=False)
    v.save(tmp_path / "verdict")
    out = bench("verdict_uncertainty.py", "induction-2l", str(tmp_path / "verdict"), "--reps", "20", "--within", "reader")
    assert "AUROC within readers" in out.splitlines()[0], out
    truth = true_pairs(v.labels.previous_token, v.labels.induction, 0.4, 0.3)
    table = compscope.scores("induction-2l", "K", ["frobenius", "read_gain"], "embed", pairs="all", progress=False)
    for m in ("frobenius", "read_gain"):
        row = re.search(rf"^{m} +embed +([0-9.]+) +- +- +[0-9.]+ +\[", out, re.M)
        assert row and float(row.group(1)) == pytest.approx(auroc_within(table.dense(m, "K"), truth, "reader"),
                                                            abs=5e-4), out
    p = run_bench("verdict_uncertainty.py", "induction-2l", str(tmp_path / "verdict"), "--within", "writer")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr  # its 2 writers read into every induction head
    assert "no writer has both a true K-pair" in p.stderr, p.stderr


def test_verdict_scripts_take_the_metrics_on_data_shrunk_or_not(tmp_path):
    """``--on-data`` adds each metric on data shrunk by Ledoit-Wolf, as by default, and
    ``--shrinkage none`` each again with the sample moment (rows ``NAME, sample``): in
    verdict_within their AUROCs are those of ``compscope.scores`` with the same data, in
    verdict_thresholds each can have a column; ``--shrinkage`` without ``--on-data`` is refused,
    not ignored."""
    import torch

    import compscope
    from compscope.data.validate import auroc_within

    v = compscope.validate("induction-2l", progress=False)
    v.save(tmp_path / "verdict")
    args = ["induction-2l", str(tmp_path / "verdict"), "--prev-threshold", "0.05", "--induction-threshold", "0.665"]
    out = bench("verdict_within.py", *args, "--on-data", "--shrinkage", "none")
    t = _toy_truth(tmp_path / "verdict")
    truth = torch.zeros(2, 4, 2, 4, dtype=torch.bool)
    for pair, true in t.items():
        truth[pair] = bool(true)
    tables = {}
    for suffix, data in (("", None), (", sample", compscope.MetricData(shrinkage="none"))):
        tables[suffix] = table = compscope.scores("induction-2l", "K", ["frobenius", "read_gain"], "covariance-own",
                                                  pairs="all", progress=False, metric_data=data)
        for m in ("frobenius", "read_gain"):
            x = table.dense(m, "K")
            row = re.search(rf"^{m} +covariance-own{suffix} +([0-9.]+) +nan +([0-9.]+)$", out, re.M)
            assert row, (m, suffix, out)
            assert float(row.group(1)) == pytest.approx(_auroc_by_hand(x, t), abs=5.01e-4), (m, suffix, out)
            assert float(row.group(2)) == pytest.approx(auroc_within(x, truth, "writer"), abs=5.01e-4), (m, suffix, out)
    assert (tables[""].dense("frobenius", "K") - tables[", sample"].dense("frobenius", "K")).nan_to_num().abs().max() > 1e-6
    for suffix, table in tables.items():
        out = bench("verdict_thresholds.py", "induction-2l", str(tmp_path / "verdict"), "--prev", "0.05", "--induction",
                    "0.665", "--on-data", "--shrinkage", "none", "--column", f"read_gain,covariance-own{suffix}")
        row = re.search(r"^ +0\.05 +0\.67 +8 .* ([0-9.]+)$", out, re.M)
        assert row and float(row.group(1)) == pytest.approx(_auroc_by_hand(table.dense("read_gain", "K"), t),
                                                            abs=5.01e-4), out
    for script in ("verdict_within.py", "verdict_uncertainty.py"):
        p = run_bench(script, *args, "--shrinkage", "none")
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert "--shrinkage says how the metrics estimated on data are estimated: give --on-data with it" in p.stderr
        p = run_bench(script, *args, "--on-data", "--shrinkage", "ledoit-wolf")  # the default: no second row of it
        assert p.returncode == 2 and "invalid choice: 'ledoit-wolf'" in p.stderr, p.stderr


def test_verdict_seeds_names_the_heads_a_truth_gains_and_loses():
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    from verdict_seeds import changes, heads, near

    assert heads(torch.tensor([[False, True], [True, False]])) == {(0, 1), (1, 0)}
    first = ({(1, 2), (2, 0)}, {(3, 0)})
    prev, ind = torch.arange(24.0).reshape(4, 6) / 100, torch.arange(24.0).reshape(4, 6) / 50  # head (l, h): 0.0lh
    assert changes(first, first, (prev, ind)) == ""
    assert changes(({(1, 2)}, {(3, 0), (3, 1)}), first, (prev, ind)) == "previous-token -2.0 (0.120); induction +3.1 (0.380)"
    assert (changes(({(0, 5), (1, 2), (2, 0)}, set()), first, (prev, ind))
            == "previous-token +0.5 (0.050); induction -3.0 (0.360)")
    assert (changes(({(1, 2)}, {(3, 0), (3, 1)}), first, (prev, ind), (prev / 10, ind / 100))
            == "previous-token -2.0 (0.120 ± 0.012); induction +3.1 (0.380 ± 0.004)")
    # within two errors of the threshold: |0.0lh - 0.1| <= 0.022 for previous-token (0.08 ... 0.12), none for induction
    err = torch.full((4, 6), 0.011, dtype=torch.float64)
    assert near((prev, ind), (err, err), (0.1, 1.0)) == \
        "near: previous-token 1.2 (0.080 ± 0.011) 1.3 (0.090 ± 0.011) 1.4 (0.100 ± 0.011) 1.5 (0.110 ± 0.011) 2.0 (0.120 ± 0.011)"
    assert near((prev, ind), (err, err), (1.0, 1.0)) == ""


def test_a_script_run_here_gives_what_a_new_python_gives(tmp_path):
    """:func:`run_here` against :func:`run_new` (``python bench/script``): the same exit status, output and errors for a
    run that ends well, one that argparse refuses (status 2) and one that stops with a message (status 1);
    and ``sys.argv``, ``sys.path`` and the working folder are this process's again after each."""
    import compscope

    compscope.validate("induction-2l", progress=False, sequences=8, intervention_sequences=4).save(tmp_path / "v")
    before = (sys.argv[:], sys.path[:], os.getcwd())
    for args in ([str(tmp_path / "v"), "--measure", "frobenius", "--metric", "embed"], ["--measure", "bogus"],
                 [str(tmp_path / "missing")]):
        args = ["induction-2l", *args] if args[0] != "--measure" else ["induction-2l", str(tmp_path / "v"), *args]
        here = run_here("verdict_pairs.py", *args)
        new = run_new("verdict_pairs.py", *args)
        assert (here.returncode, here.stdout, here.stderr) == (new.returncode, new.stdout, new.stderr), args
        assert (sys.argv, sys.path, os.getcwd()) == before
    assert here.returncode == 1 and here.stderr.strip(), here.stderr  # the last: a folder that is not there


def test_a_forked_run_gives_what_a_new_python_gives(tmp_path):
    """``tests/forked.py`` against ``python script``: the same status, output and errors for a script that
    ends with a status, with a message, with an uncaught exception (its traceback from the script on), and
    ends well after joining its thread and running its ``atexit`` function; the same ``sys.argv``,
    ``sys.path[0]``, working folder and environment. A run past its timeout is killed, with what it printed
    so far, and the server serves the next; another environment starts another server."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import atexit, os, sys, threading, time\n"
        "print(sys.argv[1:], sys.path[0], os.getcwd(), os.environ.get('PROBE'))\n"
        "atexit.register(lambda: print('atexit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\n"
        "how = sys.argv[1]\n"
        "if how == 'raise':\n    raise ValueError('boom')\n"
        "if how == 'sleep':\n    sys.stdout.flush(); time.sleep(60)\n"
        "sys.exit({'status': 3, 'message': 'a message', 'well': None}[how])\n")
    env = {**os.environ, "PROBE": "1"}
    for how, status in (("status", 3), ("message", 1), ("raise", 1), ("well", 0)):
        new = subprocess.run([sys.executable, str(script), how], capture_output=True, text=True, cwd=tmp_path, env=env)
        fork = forked.run([str(script), how], cwd=tmp_path, env=env, timeout=60)
        assert (fork.returncode, fork.stdout, fork.stderr) == (new.returncode, new.stdout, new.stderr) and new.returncode == status
    server = forked.server_for(env)
    assert server is not None and server.alive  # they were forked, not run by a new Python
    assert "atexit" in fork.stdout and "thread" in fork.stdout and "ValueError: boom" not in fork.stderr
    with pytest.raises(subprocess.TimeoutExpired) as late:
        forked.run([str(script), "sleep"], cwd=tmp_path, env=env, timeout=2)
    assert late.value.output.startswith("['sleep']")
    assert forked.run([str(script), "status"], cwd=tmp_path, env=env, timeout=60).returncode == 3
    assert forked.server_for(env) is server
    other = {**env, "PROBE": "2"}
    assert forked.run([str(script), "well"], cwd=tmp_path, env=other, timeout=60).stdout.split("\n")[0].endswith("2")
    assert forked.server_for(other) not in (None, server) and forked.server_for(env) is server


def test_a_forked_runs_two_replies_read_together_are_both_seen():
    """The server's replies (a run's pid, then its status) may reach the pipe together: each is read."""
    from types import SimpleNamespace

    r, w = os.pipe()
    os.write(w, b'{"pid": 1}\n{"status": 0}\n')
    server = forked._Server.__new__(forked._Server)
    server.pending, server.proc = b"", SimpleNamespace(stdout=os.fdopen(r, "rb"))
    assert server._reply(5) == {"pid": 1} and server._reply(5) == {"status": 0} and server._reply(0.1) is None
    os.close(w)
    assert server._reply(5) is None  # the server gone: no reply, at once


def test_cli_start_times_commands_against_importing_torch(tmp_path):
    """``bench/cli_start.py``: a row per command after the floor (importing torch, ratio 1), each
    ratio its time over the floor's as printed; another checkout's src, and one that is none."""
    out = bench("cli_start.py", "--commands", "info;--help", "--repeats", "1", "--src", str(ROOT / "src"))
    rows = {line[:32].strip(): line[32:].split() for line in out.splitlines()[2:]}
    assert list(rows) == ["python -c 'import torch'", "compscope info", "compscope --help"]
    for cells in rows.values():
        assert len(cells) == 4  # seconds and ratio, for this src and the other
    for col in (0, 2):
        floor = float(rows["python -c 'import torch'"][col])
        assert rows["python -c 'import torch'"][col + 1] == "1.00" and floor > 0
        for label in ("compscope info", "compscope --help"):
            took, ratio = float(rows[label][col]), float(rows[label][col + 1])
            assert ratio == pytest.approx(took / floor, abs=0.011 + 0.006 * took / floor)  # both rounded to 2 places
    p = run_bench("cli_start.py", "--commands", "info", "--src", str(tmp_path))
    assert p.returncode == 2 and f"--src {tmp_path}: no compscope package" in p.stderr
    p = run_bench("cli_start.py", "--commands", "info;", "--repeats", "1")
    assert p.returncode == 2 and "an empty command" in p.stderr
