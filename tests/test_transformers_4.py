"""The transformers-facing tests again under transformers 4, the oldest compscope takes (4.57).

The suite runs under transformers 5; transformers 4 differs in what compscope meets of it (configs
that spell rotary settings ``rope_theta``/``rope_scaling`` and carry generation defaults,
huggingface_hub 0.x and its ``requests`` errors, a GGUF reader that takes the dropped rotary settings
flat), so the modules that build, load or run ``transformers`` models run again, each in a
subprocess, in a second environment: ``.venv-hf4`` (``make test`` builds it: torch 2.13.0 CPU,
transformers 4.57.6), or the Python named by ``COMPSCOPE_HF4_PYTHON``. Without one this module is
skipped, saying how to build it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = ["test_runner.py", "test_family_consistency.py", "test_gguf_format.py", "test_hub.py", "test_intervene.py",
           "test_labels.py", "test_validate.py", "test_real_models.py"]


def _python() -> Path | None:
    named = os.environ.get("COMPSCOPE_HF4_PYTHON")
    for candidate in ([Path(named)] if named else []) + [ROOT / ".venv-hf4" / "bin" / "python"]:
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture(scope="module")
def python() -> Path:
    python = _python()
    if python is None:
        pytest.skip("no transformers 4 environment: `make .venv-hf4` builds one (or set COMPSCOPE_HF4_PYTHON)")
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


def test_the_floor_is_the_version_tested():
    """pyproject's floor, the runner's :data:`OLDEST_TRANSFORMERS` and the version ``.venv-hf4`` installs
    (Makefile) are one major.minor."""
    import re

    from compscope.data.runner import OLDEST_TRANSFORMERS

    floors = set(re.findall(r'"transformers>=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text()))
    tested = re.findall(r"transformers==(\d+)\.(\d+)\.\d+", (ROOT / "Makefile").read_text())
    want = tuple(map(str, OLDEST_TRANSFORMERS))
    assert floors == {want} and tested == [want], (floors, tested, want)
