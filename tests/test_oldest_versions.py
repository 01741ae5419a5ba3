"""The suite again at the oldest version compscope takes of each package it uses.

The suite runs on what pip resolves today (transformers 5, numpy 2, ...); pyproject's floors are
older, and what compscope meets of them differs (transformers 4's configs spell rotary settings
``rope_theta`` and carry generation defaults, its GGUF reader takes the dropped rotary settings flat;
huggingface_hub 0.x raises ``requests`` errors; pandas before 2.1 drops a frame's info in parquet;
gguf before 0.16.2 does not know Gemma 3). So the suite's modules run again, in eight subprocesses,
in a third environment, ``.venv-oldest`` (``make test`` builds it: every floor pinned, Makefile's
``OLDEST``), or the Python named by ``COMPSCOPE_OLDEST_PYTHON``; without one they are skipped, saying
how to build it. ``environments.NOT_RUN_AGAIN`` names the modules left out, and why; :data:`LEFT_OUT`
the tests left out of the modules run, and why; :data:`UNTESTED_FLOORS` the floors never pinned there, and why.

Three floors are pinned only when asked, :data:`EVERY_FLOOR_ONLY` (``make .venv-oldest EVERY_FLOOR=1``,
Makefile's ``EVERY_FLOOR_TORCH`` and ``EVERY_FLOOR_MORE``): torch's needs PyPI's CUDA build (3 GB), and Ray's
and Playwright's modules take a few minutes more. In an environment that holds all three at their floors,
``environments.EVERY_FLOOR_MODULES`` (Ray's and the browser's) run there too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from environments import EVERY_FLOOR_MODULES, MODULES, NOT_RUN_AGAIN, ROOT, pyproject, python_of, run_modules

#: pyproject floors never pinned in the oldest environment, and why
UNTESTED_FLOORS = {"pytest": "a test tool", "pytest-xdist": "a test tool", "hypothesis": "a test tool"}

#: floors pinned there only with ``EVERY_FLOOR=1``, and why not always
EVERY_FLOOR_ONLY = {
    "torch": "the 2.13.0 CPU build is the one installable without CUDA packages; the floor is PyPI's CUDA build",
    "ray": "Ray's module takes minutes more",
    "playwright": "the browser's module takes minutes more",
}


#: tests of the modules run again that are not run again here, and why (each runs in .venv)
LEFT_OUT = {
    f"tests/test_real_models.py::test_{model}_previous_token_heads_from_the_weights_and_sampled_content":
        "a minute of float64 work in torch (head_circuits); the module's other tests read the model files and "
        "run the models at these versions"
    for model in ("smollm2", "gemma3")
}


def _name(package: str) -> str:
    return package.lower().replace("_", "-")


def makefile_pins(variable: str = "OLDEST") -> dict[str, str]:
    """The Makefile's ``variable := ...`` (``OLDEST``, ``EVERY_FLOOR_TORCH``, ...): package → pinned version."""
    block = re.search(rf"^{variable} := ((?:.*\\\n)*.*)$", (ROOT / "Makefile").read_text(), re.M)
    assert block, f"Makefile: no {variable} := ..."
    return {_name(p): v for p, v in re.findall(r"([\w.-]+)==([\w.]+)", block.group(1))}


def every_floor_pins() -> dict[str, str]:
    """What ``EVERY_FLOOR=1`` pins besides ``OLDEST``: package → version."""
    return {**makefile_pins("EVERY_FLOOR_TORCH"), **makefile_pins("EVERY_FLOOR_MORE")}


def pyproject_floors() -> dict[str, str]:
    """Every ``package>=version`` in pyproject's dependencies and extras (one floor a package)."""
    project = pyproject()
    floors: dict[str, set[str]] = {}
    for req in project["dependencies"] + [r for rs in project["optional-dependencies"].values() for r in rs]:
        m = re.fullmatch(r"([\w.-]+)>=([\w.]+)", req)
        if m:
            floors.setdefault(_name(m.group(1)), set()).add(m.group(2))
    assert all(len(v) == 1 for v in floors.values()), {k: v for k, v in floors.items() if len(v) > 1}
    return {k: v.pop() for k, v in floors.items()}


def installed(python: Path, packages) -> dict[str, str | None]:
    """The versions of ``packages`` installed where ``python`` runs (None: not installed; a local
    label such as torch's ``+cu121`` dropped)."""
    code = ("import importlib.metadata as m, sys\n"
            "def v(p):\n    try: return m.version(p).split('+')[0]\n    except m.PackageNotFoundError: return '-'\n"
            "print(*(f'{p}=={v(p)}' for p in sys.argv[1:]))")
    got = subprocess.run([str(python), "-c", code, *packages], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    return {p: None if v == "-" else v for p, v in (item.split("==") for item in got.stdout.split())}


@pytest.fixture(scope="module")
def python() -> Path:
    """The oldest environment's Python, checked to hold the pinned versions (an environment built
    from an older Makefile is named, not used)."""
    python = python_of(".venv-oldest", "COMPSCOPE_OLDEST_PYTHON", "environment of the oldest versions")
    pins = makefile_pins()
    held = installed(python, pins)
    assert held == pins, f"{python} holds {held}, the Makefile pins {pins}: `make .venv-oldest` rebuilds it"
    return python


@pytest.fixture(scope="module")
def every_floor(python) -> bool:
    """Whether the oldest environment also holds :data:`EVERY_FLOOR_ONLY` at their floors (all of them,
    or none: an environment that holds some is named, not used)."""
    pins = every_floor_pins()
    held = installed(python, pins)
    at_floor = {p for p in pins if held[p] == pins[p]}
    assert at_floor in (set(), set(pins)), (f"{python} holds {held}; `make .venv-oldest EVERY_FLOOR=1` pins {pins}: "
                                            "rebuild it with or without EVERY_FLOOR")
    return bool(at_floor)


#: the modules in eight runs (each starts Python, torch and transformers once; the runs spread over the
#: workers), dealt round in name order, which parts the longest (real_models, report, batch_eig, ...)
GROUPS = [MODULES[i::8] for i in range(8)]


def numba_cache(python: Path) -> dict[str, str]:
    """``NUMBA_CACHE_DIR`` inside the environment of ``python`` where it is a virtual environment
    (none otherwise). numba keeps its compiled kernels beside the source by default, and an index
    written by another numba version reads as empty: ``.venv`` and this environment would each
    overwrite the other's and compile the kernels again on every run."""
    venv = python.parent.parent
    return {"NUMBA_CACHE_DIR": str(venv / "numba-cache")} if (venv / "pyvenv.cfg").exists() else {}


@pytest.mark.parametrize("modules", GROUPS, ids=["+".join(m[5:-3] for m in g) for g in GROUPS])
def test_the_modules_pass_at_the_oldest_versions(python, modules):
    assert " passed" in run_modules(python, modules, "at the oldest versions", tuple(LEFT_OUT), **numba_cache(python))


def test_the_ray_and_browser_modules_pass_at_every_floor(python, every_floor):
    """``EVERY_FLOOR_MODULES`` at every floor, torch's, Ray's and Playwright's too (an environment built
    with ``EVERY_FLOOR=1``; skipped otherwise, saying how to build one)."""
    if not every_floor:
        pytest.skip("the oldest environment holds today's torch, Ray and Playwright: `rm -rf .venv-oldest && "
                    "make .venv-oldest EVERY_FLOOR=1` pins them at their floors too (about 3 GB more)")
    assert " passed" in run_modules(python, EVERY_FLOOR_MODULES, "at every floor", **numba_cache(python))


def test_the_floors_are_the_versions_tested():
    """Every floor in pyproject but :data:`UNTESTED_FLOORS` is the version the oldest environment
    pins (:data:`EVERY_FLOOR_ONLY`: with ``EVERY_FLOOR=1``), to the floor's last digit (``numpy>=1.24``:
    1.24.x); nothing is pinned there that has no floor; transformers' floor is also the runner's
    :data:`OLDEST_TRANSFORMERS`. The modules left out exist, and those run only at
    every floor are among them."""
    from compscope.data.runner import OLDEST_TRANSFORMERS

    floors, pins, more = pyproject_floors(), makefile_pins(), every_floor_pins()
    assert set(UNTESTED_FLOORS) <= set(floors), set(UNTESTED_FLOORS) - set(floors)
    assert set(more) == set(EVERY_FLOOR_ONLY) and not set(more) & set(pins), (sorted(more), sorted(pins))
    pins |= more
    assert set(pins) == set(floors) - set(UNTESTED_FLOORS), (sorted(pins), sorted(floors))
    for package, floor in floors.items():
        if package in pins:
            assert pins[package].split(".")[: floor.count(".") + 1] == floor.split("."), (package, floor, pins[package])
    assert floors["transformers"] == ".".join(map(str, OLDEST_TRANSFORMERS))
    assert all((ROOT / "tests" / m).is_file() for m in NOT_RUN_AGAIN), NOT_RUN_AGAIN
    assert set(EVERY_FLOOR_MODULES) <= set(NOT_RUN_AGAIN), EVERY_FLOOR_MODULES
    for test in LEFT_OUT:  # each names a test that exists, in a module run again
        module, name = test.split("::")
        assert module[len("tests/"):] in MODULES and f"\ndef {name}(" in (ROOT / module).read_text(), test
