"""The suite again without the optional packages, as ``pip install compscope`` installs it.

``make demo`` and a plain install have torch, numpy, pandas, pyarrow, numba and safetensors, and none of
the extras (``transformers``, ``gguf``, ``tqdm``, ``plotly``, ...). What needs an extra must say so
and stop, and nothing else may need one. So the suite's modules run again, in a subprocess of
this Python, where the extras cannot be imported (``tests/bare/sitecustomize.py`` hides them): a
test that needs one is skipped by ``pytest.importorskip``, and every other passes.
"""

from __future__ import annotations

import re
import sys

from environments import MODULES, ROOT, pyproject, run_modules

#: what the extras bring that compscope imports beside the extras themselves
BROUGHT = ("tokenizers", "sentencepiece")


def hidden() -> list[str]:
    """The import names of every package of pyproject's extras, but the test tools' and the model
    packages', and what they bring (:data:`BROUGHT`)."""
    extras = pyproject()["optional-dependencies"]
    names = {re.match(r"[\w.-]+", r).group().lower().replace("-", "_")
             for extra, reqs in extras.items() if extra not in ("test", "models") for r in reqs}
    return sorted(names | set(BROUGHT))


def hiding(names: list[str]) -> dict[str, str]:
    """The environment of a run that cannot import ``names`` (``tests/bare/sitecustomize.py``)."""
    return dict(PYTHONPATH=str(ROOT / "tests" / "bare"), COMPSCOPE_TEST_HIDE=",".join(names))


def test_the_suite_passes_without_the_extras():
    """Every module run again (``environments.MODULES``), in one run (what takes long needs an extra)."""
    summary = run_modules(sys.executable, MODULES, "without the extras", **hiding(hidden()))
    assert " passed" in summary, summary


def test_the_extras_are_hidden_from_the_runs(tmp_path):
    """In a run where they are hidden, importing an extra fails and ``find_spec`` finds none; the
    core packages import."""
    names = hidden()
    (tmp_path / "test_hidden.py").write_text(
        "import importlib, importlib.util, pytest\n"
        f"@pytest.mark.parametrize('name', {names!r})\n"
        "def test_hidden(name):\n"
        "    assert importlib.util.find_spec(name) is None\n"
        "    with pytest.raises(ImportError):\n"
        "        importlib.import_module(name)\n"
        "def test_core():\n"
        "    import numba, numpy, pandas, pyarrow, safetensors, torch, compscope  # noqa: F401\n")
    summary = run_modules(sys.executable, [tmp_path / "test_hidden.py"], "hiding the extras", **hiding(names))
    assert summary.startswith(f"{len(names) + 1} passed"), summary
