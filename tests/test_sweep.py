"""Sweeps: the default model's training checkpoints, on the local executor and on a local Ray
instance with a worker killed mid-run; the dataset is complete, without duplicates, and a
second run does nothing."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch

import compscope
from compscope import OptionError
from compscope.cli.main import main
from compscope.sweep import Task, expand_sources, read_dataset, sweep
from compscope.sweep.executors import work

KINDS = "QK"
OPTIONS = {"kinds": KINDS, "measures": ["frobenius", "overlap"], "metric": "identity"}


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory) -> Path:
    """A short training run of the default preset, with 4 checkpoints."""
    from compscope.toy import PRESETS, train

    p = PRESETS["induction-2l"]
    out = tmp_path_factory.mktemp("run") / "induction-2l"
    cfg = dataclasses.replace(p.train, steps=24, n_checkpoints=4, eval_sequences=8, batch_size=8)
    train(p.model, p.data, cfg, out, name="induction-2l", progress=False)
    return out


def tasks_of(run_folder) -> list[Task]:
    return [Task(src, model, step, "scores", OPTIONS) for src, model, step in expand_sources([str(run_folder)])]


def check_complete(out: Path, tasks: list[Task]) -> None:
    df = read_dataset(out)
    H = 4  # heads per layer of the default model (2 layers)
    pairs = H * H  # writers of layer 0 × readers of layer 1
    assert len(df) == len(tasks) * 2 * len(KINDS) * pairs  # 2 measures
    key = ["model", "step", "measure", "kind", "src_layer", "src_head", "dst_layer", "dst_head"]
    assert not df.duplicated(key).any()
    assert sorted(df.step.unique().tolist()) == sorted(t.step for t in tasks)
    assert set(df.content_hash.groupby(df.step).nunique()) == {1}  # one model per step
    assert df.content_hash.nunique() == len(tasks)  # and a different one at each step
    assert (df.options.unique() == [compscope.sweep.tasks.json.dumps(OPTIONS, sort_keys=True)]).all()
    # the values are the engine's for that checkpoint
    last = max(tasks, key=lambda t: t.step)
    t = compscope.scores(last.source, kinds="K", measures=("frobenius",), progress=False)
    row = df[(df.step == last.step) & (df.kind == "K") & (df.measure == "frobenius")].iloc[0]
    assert row.value == pytest.approx(float(t.dense("frobenius", "K")[row.src_layer, row.src_head, row.dst_layer, row.dst_head]))


def test_local_sweep_over_checkpoints_then_nothing_to_do(run_folder, tmp_path):
    tasks = tasks_of(run_folder)
    assert len(tasks) >= 4
    r = sweep(tasks, tmp_path / "ds", progress=False)
    assert (r.done, r.skipped, r.failed) == (len(tasks), 0, {})
    check_complete(tmp_path / "ds", tasks)
    again = sweep(tasks, tmp_path / "ds", progress=False)
    assert (again.done, again.skipped) == (0, len(tasks))


def test_a_task_that_fails_is_reported_and_rerun_later(run_folder, tmp_path):
    tasks = tasks_of(run_folder)
    bad = Task(str(tmp_path / "missing"), "missing", 0, "scores", OPTIONS)
    r = sweep(tasks + [bad], tmp_path / "ds", progress=False)
    assert list(r.failed) == [bad.key()] and "missing" in r.failed[bad.key()]
    check_complete(tmp_path / "ds", tasks)


def crash_once(task: Task, out: str, device: str | None = None) -> str:
    """Kill this worker process the first time the second checkpoint's task runs."""
    marker = Path(out) / ".crashed"
    if task.step == int(os.environ["COMPSCOPE_CRASH_STEP"]) and not marker.exists():
        marker.write_text("x")
        os._exit(1)
    assert device == "cpu", device  # the sweep's device reaches the worker
    return work(task, out, device)


def test_ray_sweep_survives_a_killed_worker_without_duplicates(run_folder, tmp_path):
    pytest.importorskip("ray")
    tasks = tasks_of(run_folder)
    out = tmp_path / "ds"
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
                        "COMPSCOPE_CRASH_STEP": str(tasks[1].step)}}
    r = sweep(tasks, out, executor="ray", workers=2, fn=crash_once, runtime_env=env, device="cpu", progress=False)
    assert (out / ".crashed").exists(), "the worker was not killed"
    assert r.failed == {} and r.done == len(tasks)
    check_complete(out, tasks)
    again = sweep(tasks, out, executor="ray", workers=2, progress=False)
    assert (again.done, again.skipped) == (0, len(tasks))


def test_cli_sweep(run_folder, tmp_path, capsys):
    out = tmp_path / "ds"
    args = ["sweep", str(run_folder), "--out", str(out), "--kinds", KINDS, "--measure", "frobenius", "--measure", "overlap"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "computed" in first
    assert len(read_dataset(out)) > 0
    assert main(args) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_a_folder_of_checkpoints_with_other_files_sweeps_its_models_and_names_the_rest(run_folder, tmp_path, capsys):
    import shutil

    folder = tmp_path / "revs"
    for c in sorted((run_folder / "checkpoints").iterdir())[:2]:
        shutil.copytree(c, folder / c.name)
    (folder / "notes-step9.txt").write_text("a README beside the checkpoints\n")
    (folder / "plots").mkdir()
    assert [(Path(src).name, step) for src, _, step in expand_sources([str(folder)])] == \
        [(c.name, int(c.name.split("_")[-1])) for c in sorted((run_folder / "checkpoints").iterdir())[:2]]
    args = ["sweep", str(folder), "--out", str(tmp_path / "ds"), "--kinds", "K", "--measure", "frobenius", "--quiet"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "computed 2 tasks" in out and "\n  passed over (not models): notes-step9.txt, plots\n" in out
    assert main(["sweep", str(run_folder), "--out", str(tmp_path / "ds2"), "--kinds", "K", "--measure", "frobenius",
                 "--quiet"]) == 0
    assert "passed over" not in capsys.readouterr().out


def test_a_gram_matrix_file_is_part_of_its_tasks(run_folder, tmp_path, capsys):
    """``--metric cov.npy``: the rows say which G (the file and its values' SHA-256); the same file
    again is done, an edited one gives new tasks (as an edited corpus does)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.normal(size=(64, 64))
    np.save(tmp_path / "cov.npy", a @ a.T / 64 + np.eye(64))
    args = ["sweep", str(run_folder), "--metric", str(tmp_path / "cov.npy"), "--kinds", "K", "--measure", "frobenius",
            "--out", str(tmp_path / "ds"), "--quiet"]
    assert main(args) == 0 and "computed 4 tasks" in capsys.readouterr().out
    assert main(args) == 0 and "nothing to do (4 tasks already done)" in capsys.readouterr().out
    np.save(tmp_path / "cov.npy", a @ a.T / 64 + 2 * np.eye(64))
    assert main(args) == 0 and "computed 4 tasks, skipped 0" in capsys.readouterr().out
    df = read_dataset(tmp_path / "ds")
    assert set(df.metric) == {"cov"} and df.metric_data.nunique() == 2
    assert all(d.startswith("G given as the file cov.npy (SHA-256 ") for d in df.metric_data)
    first = df[df.metric_data == sorted(df.metric_data.unique())[0]]
    assert len(first) == len(df) // 2


def test_a_ridge_given_is_part_of_the_tasks_of_each_metric_with_a_g(run_folder, tmp_path, capsys):
    """``--ridge R``: the embed tasks hold R (their rows equal ``compscope.scores`` under R) and are new tasks; the
    identity's tasks are those of a sweep without it (already done); a validate task holds R and its verdict's rows
    are ``validate``'s under R; where every metric is the identity it is refused before any task."""
    import json

    common = [str(run_folder), "--kinds", "K", "--measure", "tight", "--out", str(tmp_path / "ds"), "--quiet"]
    assert main(["sweep", *common, "--metric", "identity"]) == 0 and "computed 4 tasks" in capsys.readouterr().out
    assert main(["sweep", *common, "--metric", "identity", "--metric", "embed", "--ridge", "0.1"]) == 0
    assert "computed 4 tasks, skipped 4 already done" in capsys.readouterr().out
    df = read_dataset(tmp_path / "ds")
    ridges = {m: {json.loads(o).get("ridge") for o in df[df.metric == m].options} for m in ("identity", "embed")}
    assert ridges == {"identity": {None}, "embed": {0.1}}
    last = max(expand_sources([str(run_folder)]), key=lambda t: t[2])
    want = compscope.scores(last[0], "K", ["tight"], "embed", ridge=0.1, progress=False).dense("tight", "K")
    rows = df[(df.metric == "embed") & (df.step == last[2])]
    assert len(rows) == 16
    for r in rows.itertuples():
        assert r.value == pytest.approx(float(want[r.src_layer, r.src_head, r.dst_layer, r.dst_head]), rel=1e-6)
    out = tmp_path / "dv"
    assert main(["sweep", str(last[0]), "--job", "validate", "--metric", "identity", "--metric", "embed",
                 "--kinds", "K", "--sequences", "8", "--ridge", "0.1", "--out", str(out), "--quiet"]) == 0
    v = read_dataset(out)
    assert {json.loads(o)["ridge"] for o in v.options} == {0.1}
    verdict = compscope.validate(last[0], sequences=8, half=16, metrics=("identity", "embed"), kinds="K", ridge=0.1,
                                 progress=False)
    got = v[(v.metric == "embed") & (v.kind == "K")].set_index("measure").spearman.to_dict()
    assert got == pytest.approx({r["measure"]: r["spearman"] for r in verdict.rows
                                 if r["metric"] == "embed" and r["kind"] == "K"}, abs=1e-9)
    assert main(["sweep", *common, "--metric", "identity", "--ridge", "0.1"]) == 2
    assert "--ridge 0.1: the identity metric has no G to regularise" in capsys.readouterr().err


def test_bad_sweep_options(tmp_path):
    with pytest.raises(OptionError, match="executor"):
        sweep([], tmp_path, executor="slurm")
    t = Task("induction-2l", "m", -1, "scores", OPTIONS)
    with pytest.raises(OptionError, match="twice"):
        sweep([t, t], tmp_path)
    with pytest.raises(OptionError, match="job"):
        from compscope.sweep.tasks import run_task

        run_task(Task("induction-2l", "m", -1, "bake", {}))


def test_revisions_expand_hub_ids():
    got = expand_sources(["Org/model"], ["step1000", "step2000"])
    assert got == [("Org/model@step1000", "Org/model", 1000), ("Org/model@step2000", "Org/model", 2000)]
    assert torch is not None


def test_track_job_gives_compscope_track_rows_with_each_checkpoints_labels(run_folder, tmp_path):
    """``--job track``: per checkpoint, the rows ``compscope track`` gives for it, with the writer's
    previous-token and the reader's induction label at that step (the labels ``track`` reads)."""
    assert main(["sweep", str(run_folder), "--job", "track", "--kinds", "K", "--out", str(tmp_path / "tr"), "--quiet"]) == 0
    df = read_dataset(tmp_path / "tr")
    tr = compscope.track(str(run_folder), "K", ["frobenius"], ["identity"], progress=False)
    assert sorted(df.step.unique().tolist()) == tr.steps
    labels = tr.labels_frame().set_index(["step", "layer", "head"])
    want = tr.to_pandas()
    for step in tr.steps:
        got = df[df.step == step].sort_values(["src_layer", "src_head", "dst_layer", "dst_head"])
        ref = want[want.step == step].sort_values(["src_layer", "src_head", "dst_layer", "dst_head"])
        assert len(got) == len(ref) == 16
        assert got.value.to_numpy() == pytest.approx(ref.value.to_numpy())
        for row in got.itertuples():
            assert row.src_previous == pytest.approx(labels.loc[(step, row.src_layer, row.src_head), "previous"])
            assert row.dst_induction == pytest.approx(labels.loc[(step, row.dst_layer, row.dst_head), "induction"])


def test_track_job_reads_each_checkpoint_once_and_records_its_hash(run_folder, tmp_path, monkeypatch):
    """The track task hashes the weights it scored (``Track.hashes``) instead of loading the
    checkpoint a second time; the hash is that of the checkpoint's weights."""
    import compscope.toy.storage as storage
    from compscope.sweep.tasks import content_hash, run_task

    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    want = content_hash(compscope.load(last[0]))
    reads = []
    real = storage.load_toy
    monkeypatch.setattr(storage, "load_toy", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    df = run_task(Task(last[0], last[1], last[2], "track", {"kinds": "K"}))
    assert len(reads) == 1 and set(df.content_hash) == {want}
    assert "metric_data" not in df  # identity: nothing estimated on data
    on_data = run_task(Task(last[0], last[1], last[2], "track", {"kinds": "K", "metric": "covariance",
                                                                 "metric_data": {"sequences": 12}}))
    (words,) = set(on_data.metric_data)
    assert words.startswith("12 held-out repeated random sequences [t, t], |t| = 32 (seed 12346); Ledoit-Wolf shrinkage")
    other = min(expand_sources([str(run_folder)]), key=lambda s: s[2])
    assert compscope.track([other[0]], "K", ["frobenius"], ["identity"], labels=False, progress=False).hashes != [want]


def test_validate_job_writes_the_verdict_of_each_checkpoint(run_folder, tmp_path):
    """``--job validate``: one task per checkpoint (not per metric), the verdict frame of that
    checkpoint, with the hash of the weights the verdict ran on."""
    from compscope.sweep.tasks import content_hash

    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    task = Task(last[0], last[1], last[2], "validate", {})
    r = sweep([task], tmp_path / "v", progress=False)
    assert (r.done, r.failed) == (1, {})
    df = read_dataset(tmp_path / "v")
    assert set(df.kind) == set("QKV") and {"measure", "metric", "spearman", "auroc"} <= set(df.columns)
    assert set(df.compscope) == {compscope.__version__}  # what computed the rows
    v = compscope.validate(last[0], sequences=16, half=16, progress=False)  # the job's options
    want = v.verdict_frame()
    key = ["measure", "metric", "kind"]
    got = df.sort_values(key)[key + ["spearman"]].reset_index(drop=True)
    want = want.sort_values(key)[key + ["spearman"]].reset_index(drop=True)
    assert got[key].equals(want[key]) and got.spearman.notna().all()
    assert got.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy())
    assert set(df.content_hash) == {content_hash(compscope.load(last[0]))}
    assert set(df.half) == {16} and all("|t| = 16 (seed 12345)" in d and "cut" not in d for d in df.data)
    # the default metrics estimated on data (activations, covariance) name their data on every row
    assert set(df.metric_data) == {v.options["activations_metric_data"]}
    assert v.options["activations_metric_data"].startswith("200 held-out repeated random sequences [t, t]")


def test_every_job_computes_on_the_device_of_the_sweep(run_folder, tmp_path, monkeypatch):
    """``sweep(..., device=D)``: each job's scores and model runs are given ``D`` (spied where the
    engine and the runner take it), the rows are those of a sweep without it, and the device is
    not part of a task's identity (a rerun elsewhere skips what is done)."""
    from compscope.data import runner as runner_module
    from compscope.engine import composition

    told = {"engine": [], "runner": []}
    engine, runner = composition.scores, runner_module.runner_for
    monkeypatch.setattr(composition, "scores", lambda *a, **k: told["engine"].append(str(k.get("device"))) or engine(*a, **k))
    monkeypatch.setattr(runner_module, "runner_for", lambda *a, **k: told["runner"].append(
        "given a runner" if isinstance(a[0], runner_module.Runner) else str(k.get("device"))) or runner(*a, **k))
    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    tasks = [Task(last[0], last[1], last[2], job, OPTIONS if job != "validate" else {}) for job in ("scores", "track", "validate")]
    r = sweep(tasks, tmp_path / "cpu", device="cpu", progress=False)
    assert (r.done, r.failed) == (3, {})
    assert len(told["engine"]) >= 3 and set(told["engine"]) == {"cpu"} and set(told["runner"]) == {"cpu", "given a runner"}
    assert sweep(tasks, tmp_path / "cpu", progress=False).skipped == 3
    sweep(tasks[:1], tmp_path / "default", progress=False)
    a, b = (read_dataset(tmp_path / d) for d in ("cpu", "default"))
    key = ["measure", "kind", "src_layer", "src_head", "dst_layer", "dst_head"]
    a = a[a.task == tasks[0].key()].sort_values(key)
    # the default device is CUDA where there is one: float32 rounding differs from the CPU's (values cross zero)
    assert a.value.to_numpy() == pytest.approx(b.sort_values(key).value.to_numpy(), rel=1e-5, abs=1e-6)


def test_sweep_devices_that_cannot_be_used_are_refused_before_any_task(tmp_path, capsys):
    from compscope.sweep.executors import _on_device

    if not torch.cuda.is_available():
        assert main(["sweep", "induction-2l", "--out", str(tmp_path / "d"), "--device", "cuda"]) == 2
        assert capsys.readouterr().err.splitlines() == [
            f"compscope: error: device='cuda': torch sees no CUDA device here (torch {torch.__version__}); use 'cpu'"]
        assert not (tmp_path / "d" / "model=induction-2l").exists()
    assert _on_device("cuda", "ray", {"workers": 2}) == ({"device": "cuda"}, {"gpus": 1, "workers": 2})  # checked on the workers
    assert _on_device("cpu", "ray", {}) == ({"device": "cpu"}, {})
    for bad, match in (("cuda:1", "Ray gives each task one GPU"), ("tpu", "not a device name"), ("meta", "'cpu' or 'cuda'")):
        with pytest.raises(OptionError, match=match):
            _on_device(bad, "ray", {})


def test_the_activations_metric_runs_each_checkpoint_on_data(run_folder, tmp_path):
    """``--metric activations``: each task estimates the metric by running its own checkpoint (not
    refused for lack of a model to run), and its rows are ``compscope.scores`` of that checkpoint."""
    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    task = Task(last[0], last[1], last[2], "scores", {**OPTIONS, "metric": "activations"})
    r = sweep([task], tmp_path / "a", progress=False)
    assert (r.done, r.failed) == (1, {})
    df = read_dataset(tmp_path / "a")
    want = compscope.scores(last[0], kinds=KINDS, measures=OPTIONS["measures"], metric="activations", progress=False)
    assert set(df.metric) == {"activations"}
    for row in df.itertuples():
        v = float(want.dense(row.measure, row.kind)[row.src_layer, row.src_head, row.dst_layer, row.dst_head])
        assert row.value == pytest.approx(v, rel=1e-6), row


def test_cli_validate_job_takes_its_sequences_half_and_metrics(run_folder, tmp_path, capsys):
    """``sweep --job validate --sequences N --half M --metric X``: one task per checkpoint whose
    verdict uses them (recorded in the options), equal to ``compscope.validate`` with them; the
    options that belong to validation are refused with another job."""
    import json

    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    out = tmp_path / "v"
    assert main(["sweep", last[0], "--job", "validate", "--sequences", "8", "--half", "6", "--metric", "identity",
                 "--metric", "embed", "--out", str(out), "--quiet"]) == 0
    df = read_dataset(out)
    assert set(df.metric) == {"identity", "embed"} and df.task.nunique() == 1
    assert json.loads(df.options.iloc[0]) == {"half": 6, "metrics": ["identity", "embed"], "sequences": 8}
    want = compscope.validate(last[0], sequences=8, half=6, metrics=("identity", "embed"), progress=False).verdict_frame()
    key = ["measure", "metric", "kind"]
    got = df.sort_values(key).reset_index(drop=True)
    want = want.sort_values(key).reset_index(drop=True)
    assert got[key].equals(want[key]) and got.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy())
    capsys.readouterr()
    for option in (["--sequences", "8"], ["--model-dtype", "bfloat16"], ["--writers", "0"], ["--seed", "3"]):
        assert main(["sweep", last[0], *option, "--out", str(tmp_path / "s")]) == 2
        assert "--sequences, --half, --seed, --writers and --model-dtype apply to --job validate" in capsys.readouterr().err
    assert main(["sweep", last[0], "--job", "validate", "--measure", "tight", "--out", str(tmp_path / "s")]) == 2
    assert "--job validate judges every measure" in capsys.readouterr().err


def test_cli_validate_job_takes_its_seed(run_folder, tmp_path, capsys):
    """``sweep --job validate --seed S``: each seed its own task in one dataset (recorded in the options
    and the rows' ``data``), equal to ``compscope.validate(seed=S)``; the default seed given is the
    default's task, already done."""
    import json

    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    out = tmp_path / "v"
    args = ["sweep", last[0], "--job", "validate", "--sequences", "8", "--half", "6", "--metric", "identity",
            "--kinds", "K", "--out", str(out), "--quiet"]
    assert main(args) == 0 and main([*args, "--seed", "3"]) == 0
    capsys.readouterr()
    assert main([*args, "--seed", "12345"]) == 0
    assert "nothing to do (1 tasks already done)" in capsys.readouterr().out  # the default seed's task
    df = read_dataset(out)
    assert df.task.nunique() == 2
    got = {}
    for seed in (12345, 3):
        rows = df[df.data.str.contains(f"(seed {seed})", regex=False)].sort_values("measure").reset_index(drop=True)
        opts = {"half": 6, "kinds": "K", "metrics": ["identity"], "sequences": 8} | ({"seed": 3} if seed == 3 else {})
        assert len(rows) and {o for o in rows.options} == {json.dumps(opts, sort_keys=True)}
        want = compscope.validate(last[0], sequences=8, half=6, metrics=("identity",), kinds="K", seed=seed,
                                  progress=False).verdict_frame().sort_values("measure").reset_index(drop=True)
        assert rows.measure.tolist() == want.measure.tolist()
        assert rows.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy(), abs=1e-12, nan_ok=True)
        got[seed] = rows.spearman.to_numpy()
    assert got[3] != pytest.approx(got[12345], abs=1e-6, nan_ok=True)  # other sequences, other effects


def test_cli_validate_job_takes_its_kinds_and_writers(run_folder, tmp_path):
    """``sweep --job validate --kinds K --writers 0.1``: the task's verdict is ``compscope.validate``'s
    with them (K rows only; rho over 0.1's pairs), and both are in the task's options."""
    import json

    last = max(expand_sources([str(run_folder)]), key=lambda s: s[2])
    out = tmp_path / "v"
    assert main(["sweep", last[0], "--job", "validate", "--sequences", "8", "--half", "6", "--metric", "identity",
                 "--kinds", "K", "--writers", "0.1", "--out", str(out), "--quiet"]) == 0
    df = read_dataset(out)
    assert set(df.kind) == {"K"}
    assert json.loads(df.options.iloc[0]) == {"half": 6, "kinds": "K", "metrics": ["identity"], "sequences": 8,
                                              "writers": [[0, 1]]}
    want = compscope.validate(last[0], sequences=8, half=6, metrics=("identity",), kinds="K", writers=[(0, 1)],
                              progress=False).verdict_frame()
    got = df.sort_values("measure").reset_index(drop=True)
    want = want.sort_values("measure").reset_index(drop=True)
    assert got.measure.tolist() == want.measure.tolist()
    assert got.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy(), abs=1e-12, nan_ok=True)
    assert got.auroc_confirmed.to_numpy() == pytest.approx(want.auroc_confirmed.to_numpy(), abs=1e-12, nan_ok=True)


def test_validate_job_cuts_its_default_half_to_a_short_context_and_refuses_one_given(tmp_path):
    """A tiny GPT-2 that takes 24 tokens: the job's default |t| = 16 would not fit, so it runs on
    the longest repeats that do, as ``compscope.validate`` with that |t|; a |t| given that does not
    fit fails the task with validate's message."""
    from hf_tiny import BY_ID, build

    from compscope.data.runner import runner_for

    folder = tmp_path / "gpt2"
    build(BY_ID["gpt2"], n_positions=24).save_pretrained(folder)
    runner = runner_for(str(folder), progress=False)
    first = runner.bos is not None
    assert runner.n_ctx == 24
    want_half = (24 - first) // 2
    opts = {"sequences": 4, "metrics": ["identity"], "kinds": "K"}
    r = sweep([Task(str(folder), "gpt2", -1, "validate", opts)], tmp_path / "v", progress=False)
    assert (r.done, r.failed) == (1, {})
    got = read_dataset(tmp_path / "v")
    want = compscope.validate(str(folder), sequences=4, half=want_half, metrics=("identity",), kinds="K",
                              progress=False).verdict_frame()
    key = ["measure", "metric", "kind"]
    got, want = got.sort_values(key).reset_index(drop=True), want.sort_values(key).reset_index(drop=True)
    assert got[key].equals(want[key])
    assert got.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy(), nan_ok=True)
    assert set(got.half) == {want_half}  # the |t| the rows ran on, and why it is not the default
    assert set(got.data) == {f"gpt2: 4 repeated random sequences [t, t], |t| = {want_half} (seed 12345); interventions "
                             f"(mean-ablation) on 4 of them; |t| cut from 16 to {want_half} so that [t, t] fits the 24 "
                             "tokens gpt2 takes"}
    r = sweep([Task(str(folder), "gpt2", -1, "validate", {**opts, "half": 16})], tmp_path / "w", progress=False)
    assert r.done == 0 and len(r.failed) == 1
    assert f"half=16: sequences [t, t] of {first + 32} tokens are longer than" in "".join(r.failed.values())


def test_cli_validate_job_runs_a_folder_model_in_16_bit(tmp_path):
    """``sweep --job validate --model-dtype bfloat16`` on a tiny random Llama folder: the verdict
    is ``compscope.validate(folder, model_dtype='bfloat16')``'s and the dtype is in the task's
    options (a new task: its rows differ from float32's by 16-bit rounding); float32, the
    default, keeps the options of a task given none."""
    import json

    from hf_tiny import BY_ID, build

    folder = tmp_path / "llama"
    build(BY_ID["llama-gqa-bias"]).save_pretrained(folder)
    args = ["--job", "validate", "--sequences", "4", "--half", "4", "--metric", "identity", "--quiet"]
    assert main(["sweep", str(folder), *args, "--model-dtype", "bfloat16", "--out", str(tmp_path / "b")]) == 0
    assert main(["sweep", str(folder), *args, "--model-dtype", "float32", "--out", str(tmp_path / "f")]) == 0
    got, f32 = read_dataset(tmp_path / "b"), read_dataset(tmp_path / "f")
    assert json.loads(got.options.iloc[0]) == {"half": 4, "metrics": ["identity"], "model_dtype": "bfloat16", "sequences": 4}
    assert json.loads(f32.options.iloc[0]) == {"half": 4, "metrics": ["identity"], "sequences": 4}
    assert got.task.iloc[0] != f32.task.iloc[0]
    want = compscope.validate(str(folder), sequences=4, half=4, metrics=("identity",), model_dtype="bfloat16",
                              progress=False).verdict_frame()
    key = ["measure", "metric", "kind"]
    got = got.sort_values(key).reset_index(drop=True)
    want = want.sort_values(key).reset_index(drop=True)
    assert got[key].equals(want[key])
    assert got.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy(), nan_ok=True)


def test_an_empty_dataset_still_has_its_partition_columns(tmp_path):
    (tmp_path / "empty").mkdir()
    df = read_dataset(tmp_path / "empty")
    assert len(df) == 0 and list(df.columns) == ["model", "step"] and str(df.step.dtype) == "int64"
    with pytest.raises(compscope.LoadError, match="no sweep dataset"):
        read_dataset(tmp_path / "missing")


def test_a_dataset_of_several_jobs_keeps_every_column_whatever_part_is_read_first(tmp_path):
    """Parts with different columns (here a validate part and a scores part): every column of
    both is in the frame, whichever part the reader meets first (pyarrow takes the first file's
    schema unless told otherwise, which silently dropped the other job's columns)."""
    import pandas as pd

    from compscope.sweep.dataset import write_part

    a = Task("x", "m", 1, "scores", {})
    b = Task("y", "m", 1, "validate", {})
    write_part(tmp_path, a, pd.DataFrame({"src_layer": [0, 1], "value": [0.5, 0.25]}))
    write_part(tmp_path, b, pd.DataFrame({"auroc": [0.75], "value": [1.0]}))
    parts = {t.key(): next(tmp_path.glob(f"model=*/step=*/part-*{t.key()}*.parquet")) for t in (a, b)}
    for first in (a, b):  # rename the parts so that each sorts first once
        for key, p in list(parts.items()):
            parts[key] = p.rename(p.with_name(f"part-{'0' if key == first.key() else '1'}-{key}.parquet"))
        assert sorted(tmp_path.glob("model=*/step=*/part-*.parquet"))[0] == parts[first.key()]
        df = read_dataset(tmp_path).sort_values("value").reset_index(drop=True)
        assert {"src_layer", "auroc", "value", "model", "step"} <= set(df.columns)
        assert df.value.tolist() == [0.25, 0.5, 1.0]
        assert df.src_layer.tolist()[:2] == [1, 0] and pd.isna(df.src_layer[2]) and df.auroc[2] == 0.75


def test_bad_counts_are_refused_naming_what_the_option_takes(tmp_path, capsys):
    """``--workers`` takes a positive integer only; ``scores --pairs`` also takes 'all'."""
    for bad in ("0", "two", "-1"):
        assert main(["sweep", "induction-2l", "--executor", "ray", "--workers", bad, "--out", str(tmp_path / "w")]) == 2
        assert f"--workers {bad!r}: expected a positive integer" in capsys.readouterr().err
    assert main(["scores", "--pairs", "some"]) == 2
    assert "--pairs 'some': expected 'all' or a positive integer" in capsys.readouterr().err


def test_a_sweep_linearises_qk_norm_where_a_model_has_one(tmp_path, capsys):
    """One sweep over a tiny Gemma 3 folder (QK-norm) and a tiny Llama folder (none) with
    ``--linearise-qk-norm``: the Gemma task's rows are those of its weights linearised, the Llama
    task's those of its weights as read, and each row's ``processing`` says which; ``--job validate``
    takes ``text`` (the verdict of ``validate(linearise_qk_norm='text')`` on the same ``--metric-*``
    text for Gemma 3, the plain verdict for Llama), a scores job refuses it by name."""
    import json

    from compscope.core.processing import QK_NORM_AT_MOMENTS, QK_NORM_LINEARISED
    from compscope.data.residual_moments import MetricData
    from hf_tiny import BY_ID, build

    gemma, llama = tmp_path / "gemma3", tmp_path / "llama"
    build(BY_ID["gemma3-text"]).save_pretrained(gemma)
    build(BY_ID["llama-mha"]).save_pretrained(llama)
    assert compscope.load(llama).qk_norm is None and compscope.load(gemma).qk_norm is not None
    args = ["--kinds", "K", "--measure", "read_gain", "--quiet", "--linearise-qk-norm"]
    assert main(["sweep", str(gemma), str(llama), *args, "--out", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "  --linearise-qk-norm left out where a model has no QK-norm: llama"
    df = read_dataset(tmp_path / "s")
    assert dict(df.groupby("model").processing.first()) == {"gemma3": QK_NORM_LINEARISED, "llama": "none"}
    for folder, steps in ((gemma, {"linearise_qk_norm": True}), (llama, {})):
        want = compscope.scores(compscope.load(folder, **steps), "K", ["read_gain"], progress=False).dense("read_gain", "K")
        rows = df[df.model == folder.name]
        assert len(rows) == int(torch.isfinite(want).sum()) > 0
        for row in rows.itertuples():
            assert row.value == pytest.approx(float(want[row.src_layer, row.src_head, row.dst_layer, row.dst_head]), rel=1e-5)
    data = ["--metric-sequences", "6", "--metric-length", "12"]
    small = ["--job", "validate", "--sequences", "4", "--half", "4", "--metric", "identity", "--kinds", "K", "--quiet"]
    assert main(["sweep", str(gemma), str(llama), *small, *data, "--linearise-qk-norm", "text", "--out", str(tmp_path / "v")]) == 0
    assert main(["sweep", str(gemma), *small, *data, "--linearise-qk-norm", "text", "--out", str(tmp_path / "v")]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == [  # the first sweep's last line; the second, of Gemma 3 alone, has none
        "  --linearise-qk-norm left out where a model has no QK-norm: llama", f"{tmp_path / 'v'}: nothing to do (1 tasks already done)"]
    got = read_dataset(tmp_path / "v")
    assert {json.loads(o)["qk_norm_point"] for o in got.options} == {"text"}
    assert dict(got.groupby("model").processing.first()) == {"gemma3": QK_NORM_AT_MOMENTS, "llama": "none"}
    key = ["measure", "metric", "kind"]
    for folder, point in ((gemma, "text"), (llama, False)):
        want = compscope.validate(str(folder), sequences=4, half=4, metrics=("identity",), kinds="K", progress=False,
                                  linearise_qk_norm=point,  # the text data read where QK-norm is linearised on them
                                  metric_data=MetricData(sequences=6, length=12) if point else None).verdict_frame()
        mine = got[got.model == folder.name].sort_values(key).reset_index(drop=True)
        want = want.sort_values(key).reset_index(drop=True)
        assert mine[key].equals(want[key])
        assert mine.auroc.to_numpy() == pytest.approx(want.auroc.to_numpy(), nan_ok=True)
        assert mine.spearman.to_numpy() == pytest.approx(want.spearman.to_numpy(), nan_ok=True)
    assert (got[got.model == "gemma3"].data.str.startswith(f"gemma3 (weights: {QK_NORM_AT_MOMENTS}):")).all()
    capsys.readouterr()
    assert main(["sweep", str(gemma), "--linearise-qk-norm", "text", "--out", str(tmp_path / "x")]) == 2
    assert "--linearise-qk-norm text: --job validate takes it" in capsys.readouterr().err


def test_a_sweep_linearises_the_norms_in_the_circuits_where_a_model_has_them(tmp_path, capsys):
    """``--linearise-norms`` over a tiny Gemma 3 folder (QK-norm, attention-output norm) and a tiny Llama folder (none)
    on a small ``--sample-*`` text: the Gemma task's rows are ``compscope.scores(..., linearise_norms=True)`` on the
    same text, the Llama task's its weights as read, and each row's ``processing`` says which; ``--job validate``
    judges the weights as ``compscope.validate(..., linearise_norms=True)`` does; with ``--linearise-qk-norm`` the
    QK-norm is left to that step; refused by name: ``--job track``, ``qk`` beside ``--linearise-qk-norm``, the
    ``--sample-*`` options without it."""
    import json

    from compscope.core.processing import QK_NORM_LINEARISED
    from compscope.data.residual_moments import SampleData
    from hf_tiny import BY_ID, build

    gemma, llama = tmp_path / "gemma3", tmp_path / "llama"
    build(BY_ID["gemma3-text"]).save_pretrained(gemma)
    build(BY_ID["llama-mha"]).save_pretrained(llama)
    sample, text = ["--sample-sequences", "4", "--sample-length", "12"], SampleData(sequences=4, length=12)
    args = ["--kinds", "K", "--measure", "read_gain", "--quiet", "--linearise-norms", *sample]
    assert main(["sweep", str(gemma), str(llama), *args, "--out", str(tmp_path / "s")]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == ("  --linearise-norms left out where a model has none of "
                                                        "those norms: llama")
    df = read_dataset(tmp_path / "s")
    assert dict(df.groupby("model").processing.first()) == {"gemma3": "linearise_norms(qk, output)", "llama": "none"}
    assert {json.loads(o)["sample_data"]["length"] for o in df.options} == {12}
    for folder, norms in ((gemma, True), (llama, False)):
        want = compscope.scores(str(folder), "K", ["read_gain"], linearise_norms=norms,
                                sample_data=text if norms else None, progress=False).dense("read_gain", "K")
        rows = df[df.model == folder.name]
        assert len(rows) == int(torch.isfinite(want).sum()) > 0
        for r in rows.itertuples():
            assert r.value == pytest.approx(float(want[r.src_layer, r.src_head, r.dst_layer, r.dst_head]), rel=1e-5)
    both = ["--kinds", "K", "--measure", "read_gain", "--quiet", "--linearise-qk-norm", "--linearise-norms", *sample]
    assert main(["sweep", str(gemma), *both, "--out", str(tmp_path / "q")]) == 0
    assert set(read_dataset(tmp_path / "q").processing) == {f"{QK_NORM_LINEARISED},linearise_norms(output)"}
    small = ["--job", "validate", "--sequences", "4", "--half", "4", "--metric", "identity", "--kinds", "K", "--quiet"]
    assert main(["sweep", str(gemma), *small, "--linearise-norms", "output", *sample, "--out",
                 str(tmp_path / "v")]) == 0
    got = read_dataset(tmp_path / "v")
    want = compscope.validate(str(gemma), sequences=4, half=4, metrics=("identity",), kinds="K", progress=False,
                              linearise_norms="output", sample_data=text).verdict_frame()
    key = ["measure", "metric", "kind"]
    got, want = (f.sort_values(key).reset_index(drop=True) for f in (got, want))
    assert got[key].equals(want[key]) and got.auroc.to_numpy() == pytest.approx(want.auroc.to_numpy(), nan_ok=True)
    assert set(got.processing) == {"linearise_norms(output)"}
    capsys.readouterr()
    for bad, needle in ((["--job", "track", "--linearise-norms"], "--linearise-norms: --job track reads each"),
                        (["--linearise-qk-norm", "--linearise-norms", "qk"], "two ways to replace QK-norm"),
                        (sample, "--sample-sequences, --sample-length: for --linearise-norms only")):
        assert main(["sweep", str(gemma), *bad, "--out", str(tmp_path / "x")]) == 2
        assert needle in capsys.readouterr().err


def test_processing_steps_are_part_of_a_task(tmp_path, capsys):
    """``--linearise-qk-norm`` (and ``--fold-norm``) on a tiny Gemma 3 folder: a scores task's rows
    are ``compscope.scores`` of the weights loaded with those steps, the steps are in the task's
    options (another task than without them), and a validate task judges the weights so processed;
    steps a job cannot apply are refused by name before any task runs."""
    import json

    from compscope.core.processing import QK_NORM_LINEARISED
    from hf_tiny import BY_ID, build

    folder = tmp_path / "gemma3"
    build(BY_ID["gemma3-text"]).save_pretrained(folder)
    args = ["--kinds", "K", "--measure", "read_gain", "--quiet"]
    assert main(["sweep", str(folder), *args, "--fold-norm", "--linearise-qk-norm", "--out", str(tmp_path / "s")]) == 0
    assert main(["sweep", str(folder), *args, "--out", str(tmp_path / "s")]) == 0  # another task: computed
    assert "computed 1 tasks" in capsys.readouterr().out.splitlines()[-1]
    df = read_dataset(tmp_path / "s")
    assert df.task.nunique() == 2
    done = df[df.options.str.contains("processing")]
    assert json.loads(done.options.iloc[0])["processing"] == ["fold_norm", "linearise_qk_norm"]
    assert set(done.processing) == {f"fold_norm,{QK_NORM_LINEARISED}"}  # the table's column, as recorded
    want = compscope.scores(compscope.load(folder, fold_norm=True, linearise_qk_norm=True), "K", ["read_gain"],
                            progress=False).dense("read_gain", "K")
    for row in done.itertuples():
        assert row.value == pytest.approx(float(want[row.src_layer, row.src_head, row.dst_layer, row.dst_head]), rel=1e-5)
    small = ["--job", "validate", "--sequences", "4", "--half", "4", "--metric", "identity", "--kinds", "K", "--quiet"]
    assert main(["sweep", str(folder), *small, "--linearise-qk-norm", "--out", str(tmp_path / "v")]) == 0
    got = read_dataset(tmp_path / "v")
    assert json.loads(got.options.iloc[0])["processing"] == ["linearise_qk_norm"]
    want = compscope.validate(str(folder), sequences=4, half=4, metrics=("identity",), kinds="K", linearise_qk_norm=True,
                              progress=False).verdict_frame()
    key = ["measure", "metric", "kind"]
    got, want = (f.sort_values(key).reset_index(drop=True) for f in (got, want))
    assert got[key].equals(want[key]) and got.auroc.to_numpy() == pytest.approx(want.auroc.to_numpy(), nan_ok=True)
    capsys.readouterr()
    assert main(["sweep", str(folder), *small, "--fold-value-bias", "--out", str(tmp_path / "x")]) == 2
    assert ("--fold-value-bias: --job validate takes --fold-norm, --linearise-qk-norm and --center-writing"
            in capsys.readouterr().err)
    assert main(["sweep", str(folder), "--job", "track", "--fold-norm", "--out", str(tmp_path / "x")]) == 2
    assert "--fold-norm: --job track reads each checkpoint as it is" in capsys.readouterr().err
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_models_left_as_read_are_named_from_rows_that_say_so():
    """``read_as_they_are``: a model whose rows' ``processing`` lacks ``linearise_qk_norm`` is named, once;
    rows of other tasks, rows without the column (parts written before validate rows had it) or
    with no value in it are not."""
    import pandas as pd

    from compscope.cli.sweep import read_as_they_are

    a, b, c = (Task(f"m{i}", f"m{i}", job="validate", options={"processing": ["linearise_qk_norm"]}) for i in range(3))
    rows = pd.DataFrame({"task": [a.key(), a.key(), b.key(), c.key(), "other"],
                         "processing": ["none", "none", "linearise_qk_norm (isotropic input)", float("nan"), "none"]})
    assert read_as_they_are(rows, [a, b, c]) == ["m0"]
    assert read_as_they_are(rows.drop(columns="processing"), [a, b, c]) == []
    assert read_as_they_are(pd.DataFrame({"model": [], "step": []}), [a]) == []


def test_the_ray_executor_without_ray_says_how_to_get_it(tmp_path, monkeypatch):
    """Without Ray installed, ``executor='ray'`` is refused with the install command, worded for
    Python and the command line alike (it said ``--executor ray`` to a Python caller)."""
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray: ImportError
    with pytest.raises(OptionError, match=r"^executor 'ray' needs Ray: pip install 'compscope\[ray\]' \(or use the local"):
        sweep([Task("induction-2l", "m", -1, "scores", OPTIONS)], tmp_path / "o", executor="ray", progress=False)
    assert main(["sweep", "induction-2l", "--out", str(tmp_path / "o2"), "--executor", "ray"]) == 2
