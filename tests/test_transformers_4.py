"""The transformers-facing tests again under transformers 4 and huggingface_hub 0.x, the oldest
compscope takes (4.57, 0.34).

The suite runs under transformers 5 and huggingface_hub 2; the older ones differ in what compscope
meets of them (configs that spell rotary settings ``rope_theta``/``rope_scaling`` and carry
generation defaults, a GGUF reader that takes the dropped rotary settings flat, the hub's
``requests`` errors), so the modules that build, load or run ``transformers`` models, and the hub's,
run again, each in a subprocess, in a third environment: ``.venv-hf4`` (``make test`` builds it:
torch 2.13.0 CPU, transformers 4.57.6, huggingface_hub 0.34.0), or the Python named by
``COMPSCOPE_HF4_PYTHON``. Without one the module's runs are skipped, saying how to build it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from environments import python_of

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["test_runner.py", "test_family_consistency.py", "test_gguf_format.py", "test_hub.py", "test_intervene.py",
           "test_labels.py", "test_validate.py", "test_real_models.py"]


@pytest.fixture(scope="module")
def python() -> Path:
    python = python_of(".venv-hf4", "COMPSCOPE_HF4_PYTHON", "transformers 4 environment")
    version = subprocess.run([str(python), "-c", "import transformers; print(transformers.__version__)"],
                             capture_output=True, text=True, timeout=300)
    assert version.returncode == 0 and version.stdout.startswith("4."), version.stdout + version.stderr[-2000:]
    return python


@pytest.mark.parametrize("module", MODULES)
def test_the_module_passes_under_transformers_4(python, module):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}  # not this run's worker
    env.update(PYTHONPATH=str(ROOT / "src"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    done = subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           str(ROOT / "tests" / module)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{module} under transformers 4:\n{done.stdout[-6000:]}\n{done.stderr[-2000:]}"
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]


def test_the_floors_are_the_versions_tested():
    """pyproject's floors of transformers and huggingface_hub are the versions ``.venv-hf4`` installs
    (Makefile), major.minor; transformers' is also the runner's :data:`OLDEST_TRANSFORMERS`."""
    import re

    from compscope.data.runner import OLDEST_TRANSFORMERS

    pyproject, makefile = (ROOT / "pyproject.toml").read_text(), (ROOT / "Makefile").read_text()
    for package, want in (("transformers", tuple(map(str, OLDEST_TRANSFORMERS))), ("huggingface_hub", None)):
        floors = set(re.findall(rf'"{package}>=(\d+)\.(\d+)"', pyproject))
        tested = re.findall(rf"\b{package}==(\d+)\.(\d+)\.\d+", makefile)
        assert len(floors) == 1 and tested == list(floors), (package, floors, tested)
        assert want is None or floors == {want}, (package, floors, want)
