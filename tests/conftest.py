import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("USE_HUB_KERNELS", "NO")  # (the tests' own from_pretrained: transformers 5.25 turns hub kernels
# on by default; compscope's runner asks for none itself)

# Under pytest-xdist (`make test` runs one worker per core, see Makefile) each worker takes
# its share of the cores, and so do the commands and benchmarks the tests start as subprocesses:
# torch's default, one thread per core in every worker, oversubscribes the CPU.
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
if _workers > 1:
    _share = str(max(1, (os.cpu_count() or 1) // _workers))
    os.environ.setdefault("OMP_NUM_THREADS", _share)
    os.environ.setdefault("MKL_NUM_THREADS", _share)


@pytest.fixture
def bars(monkeypatch):
    """Every progress bar opened while the test runs, in order (``compscope.progress._Bar`` objects, their delay
    as asked)."""
    from compscope import progress

    opened = []
    real = progress._Bar
    monkeypatch.setattr(progress, "_Bar", lambda total, desc, enabled, delay=2.0:
                        opened.append(real(total, desc, enabled, delay)) or opened[-1])
    return opened


#: Modules whose tests share no module-scoped fixture and each take long (benchmarks, shown commands,
#: modules run again at the oldest versions and without the extras): spread over the workers one test
#: at a time.
SPREAD = ("tests/test_bench.py", "tests/test_docs.py", "tests/test_oldest_versions.py", "tests/test_bare_install.py")


#: SPREAD's longest tests, each a subprocess running whole modules again (1-2 minutes each): collected
#: first, so that xdist, which hands out single tests in collection order after the modules, starts them
#: before the shorter ones, which then fill the workers evenly at the end instead of leaving one idle.
FIRST = ("tests/test_oldest_versions.py", "tests/test_bare_install.py")


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))  # stable: the rest keep their order


@pytest.hookimpl(optionalhook=True)  # without pytest-xdist: not called
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist: every module runs whole on one worker (its module-scoped fixtures,
    a real model loaded, a toy trained, a report rendered, are made once) but ``SPREAD``'s, whose
    tests go to whichever worker is free. xdist hands out the modules with the most tests first and
    the single tests last, which fill the workers evenly at the end."""
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPREAD else module

    return ByModule(config, log)
