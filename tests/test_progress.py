"""The progress bar: silent for short work, and for long work it names each step of the engine."""

import pytest

from compscope import progress
from compscope.engine import composition
from compscope.api import scores

from test_composition import model


def test_short_calls_print_nothing(capsys):
    scores(model(), "QKV", ["frobenius"])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("pairs,steps", [(256, ["head SVDs", "Gram tiles"]), ("all", ["head SVDs", "X blocks"])])
def test_long_calls_show_every_step(monkeypatch, capsys, pairs, steps):
    pytest.importorskip("tqdm")
    bars, planned = [], []
    monkeypatch.setattr(composition, "progress_bar",
                        lambda total, desc, enabled=True: planned.append(total) or bars.append(progress._Bar(total, desc, enabled, delay=0.0))
                        or bars[-1])
    scores(model(L=4), "QKV", ["frobenius", "bandwidth"], pairs=pairs)
    err = capsys.readouterr().err
    assert "composition" in err
    for step in steps:
        assert f"step={step}" in err
    assert bars[0].n == bars[0].total > 0  # the planned total is reached, not overrun
    assert planned == [bars[0].total]  # and known from the start: the bar never jumps back


@pytest.mark.parametrize("shown", [True, False])
def test_the_metrics_pass_over_data_follows_the_runners_progress(monkeypatch, capsys, shown):
    """The residual moments of the metrics estimated on data (one pass of the model over the text)
    show a bar that reaches the number of sequences, unless the runner was made with progress=False."""
    pytest.importorskip("tqdm")
    import torch

    from compscope.data import residual_moments
    from compscope.data.runner import runner_for
    from hf_tiny import BY_ID, build, random_ids

    monkeypatch.setattr(progress, "_is_terminal", lambda: False)  # the log form: a line per tenth, one at the end
    monkeypatch.setattr(progress, "_Bar", lambda total, desc, enabled, delay=0.0, _B=progress._Bar: _B(total, desc, enabled, delay=0.0))
    model = build(BY_ID["llama-gqa-bias"])
    runner = runner_for(model, progress=shown)
    assert runner.progress is shown and runner_for(runner) is runner
    tokens = torch.cat([random_ids(seed) for seed in range(3)])  # 6 sequences, 2 a batch
    residual_moments.runner_second_moments(runner, tokens, batch_size=2)
    err = capsys.readouterr().err
    assert ("residual moments: 6/6 done in" in err) is shown and ("residual moments" in err) is shown


@pytest.mark.parametrize("argv", [["scores", "induction-2l", "--measure", "frobenius"],
                                  ["validate", "induction-2l", "--kinds", "K", "--sequences", "8", "--half", "8",
                                   "--intervention-sequences", "4", "--metric", "identity"]])
def test_quiet_leaves_out_the_bars_and_nothing_else(monkeypatch, capsys, argv):
    """``--quiet`` on any command: the same stdout, and stderr without the bars it has without it."""
    from compscope.cli.main import main

    monkeypatch.setattr(progress, "_is_terminal", lambda: False)  # the log form: a line per tenth, one at the end
    monkeypatch.setattr(progress, "_Bar", lambda total, desc, enabled, delay=0.0, _B=progress._Bar: _B(total, desc, enabled, delay=0.0))
    assert main(argv) == 0
    loud = capsys.readouterr()
    assert " done in " in loud.err  # a bar ran to its end
    assert main([*argv, "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert quiet.err == "" and quiet.out == loud.out
    assert progress._SILENCED == 0  # and the silence ends with the command
    assert main(argv) == 0 and " done in " in capsys.readouterr().err


def test_every_command_takes_quiet():
    from compscope.cli.main import COMMANDS, build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in COMMANDS.names():
        assert "--quiet" in sub.choices[name]._option_string_actions, name


def test_silenced_nests():
    with progress.silenced():
        with progress.silenced():
            assert not progress.progress_bar(10, "x").enabled
        assert not progress.progress_bar(10, "x").enabled
    assert progress.progress_bar(10, "x").enabled


def test_a_tick_is_about_one_head_svds_work():
    """The bar's unit is one head SVD's multiply-adds, ``2 r² d H``: an X block of reader layer ``l`` (``l H`` writer
    heads against ``H`` readers, ``r² d`` each, ``l H² r² d``) weighs ``round(l H / 2)`` ticks, at least one."""
    import torch

    from compscope.engine.plan import plan_groups

    for H, want in ((4, [2, 4, 6]), (6, [3, 6, 9]), (1, [1, 1, 2])):  # (round(0.5) = 0 and round(1.5) = 2: one, two)
        hw = model(L=4, H=H, G=H)
        plan = plan_groups(hw, [[1], [2], [3]], "QKV", (), True, None, torch.float32, 1 << 30)
        assert [g.x_ticks for g in plan] == [[w] for w in want]
        assert all(g.rg is g.blk is g.ticks is None for g in plan)  # no Gram asked: no Gram route planned
        # the rest of a group's units are its head SVD jobs, two ticks each
        assert all(g.units > 3 * g.x_ticks[0] and (g.units - 3 * g.x_ticks[0]) % 2 == 0 for g in plan)
