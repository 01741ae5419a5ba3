"""The suite's other installs: its second and third environments (``.venv-tl4``, ``.venv-oldest``;
Makefile), and the modules run again in subprocesses, at the oldest versions and without the
optional packages."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: modules not run again in another install, and why
NOT_RUN_AGAIN = {
    "test_oldest_versions.py": "runs the others again",
    "test_bare_install.py": "runs the others again",
    "test_bench.py": "the benchmarks measure what is installed today",
    "test_docs.py": "the docs show what today's versions print",
    "test_transformer_bridge.py": "runs in its own environment (.venv-tl4)",
    "test_transformer_lens.py": "TransformerLens 3.9 is tested in .venv only (it pins its own transformers)",
    "test_composition_tl.py": "TransformerLens 3.9 is tested in .venv only (it pins its own transformers)",
    "test_device.py": "needs a GPU",
    "test_sweep.py": "Ray: run again only where its floor is pinned (EVERY_FLOOR_MODULES)",
    "test_report_browser.py": "Playwright: run again only where its floor is pinned (EVERY_FLOOR_MODULES)",
}
#: the modules run again only in an oldest environment built with ``make .venv-oldest EVERY_FLOOR=1``
EVERY_FLOOR_MODULES = ["test_sweep.py", "test_report_browser.py"]
#: the modules run again
MODULES = sorted(p.name for p in (ROOT / "tests").glob("test_*.py") if p.name not in NOT_RUN_AGAIN)


def python_of(folder: str, variable: str, what: str) -> Path:
    """The Python named by the environment variable ``variable``, else ``ROOT/folder``'s; without
    either the test is skipped, saying how to build ``what``."""
    named = os.environ.get(variable)
    for candidate in ([Path(named)] if named else []) + [ROOT / folder / "bin" / "python"]:
        if candidate.is_file():
            return candidate
    pytest.skip(f"no {what}: `make {folder}` builds one (or set {variable})")


def pyproject() -> dict:
    """pyproject.toml's ``[project]`` table."""
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def offline_env(drop: tuple[str, ...] = (), **values: str) -> dict[str, str]:
    """This process's environment for a program a test starts: offline (``HF_HUB_OFFLINE``,
    ``TRANSFORMERS_OFFLINE``: no hub download), without the variables ``drop`` names (a name ending in
    ``*``: every variable beginning with the rest), ``values`` set."""
    exact = {d for d in drop if not d.endswith("*")}
    prefixes = tuple(d[:-1] for d in drop if d.endswith("*"))
    environ = {k: v for k, v in os.environ.items() if k not in exact and not (prefixes and k.startswith(prefixes))}
    environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", **values)
    return environ


def subprocess_env(**env: str) -> dict[str, str]:
    """This process's environment for a Python started from a test: ``compscope`` from this tree's
    ``src`` (after ``env``'s ``PYTHONPATH``), offline, ``env`` added, none of this run's worker's
    ``PYTEST_*`` variables."""
    environ = offline_env(drop=("PYTEST_*",), **env)
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(ROOT / "src")]))
    return environ


def run_modules(python: Path | str, modules: list[str | Path], where: str, deselect: tuple[str, ...] = (),
                **env: str) -> str:
    """``pytest`` on ``modules`` (names in ``tests/``, or paths) by ``python`` (:func:`subprocess_env`
    with ``env``), but the tests ``deselect`` names (``tests/module.py::test``); asserts that it ends
    well, showing its output's end and naming ``where``. Returns the summary line."""
    environ = subprocess_env(**env)
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *(str(ROOT / "tests" / m) for m in modules), *(f"--deselect={t}" for t in deselect)],
                          cwd=ROOT, env=environ, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(map(str, modules))} {where}:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    return done.stdout.splitlines()[-1]
