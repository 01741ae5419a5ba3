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
