"""Running sweep tasks: ``local`` (this process, one task after another) or ``ray`` (independent
remote tasks on a local Ray instance, or an existing cluster with ``address``; a task whose worker
dies is retried by Ray, ``max_retries`` times). Both skip tasks whose part is already written
and call the same ``work(task, out)``, which computes the task and writes its part."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CompscopeError, OptionError
from ..progress import progress_bar
from ..results.files import check_folder
from .dataset import is_done, write_part
from .tasks import Task, run_task


def work(task: Task, out: str, device: str | None = None) -> str:
    """Compute ``task`` (on ``device``) and write its part under ``out``; the part's path."""
    return str(write_part(Path(out), task, run_task(task, device)))


@dataclass
class SweepResult:
    out: Path
    done: int  # tasks computed in this run
    skipped: int  # tasks whose part was already there
    failed: dict[str, str]  # task key -> error


def _local(todo: list[Task], out: Path, fn: Callable, bar, told: dict, **_) -> dict[str, str]:
    failed = {}
    for t in todo:
        try:
            fn(t, str(out), **told)
        except CompscopeError as e:
            failed[t.key()] = str(e)  # compscope's errors name the source
        bar.update(1)
    return failed


def _ray(todo: list[Task], out: Path, fn: Callable, bar, told: dict, address: str | None = None, workers: int | None = None,
         max_retries: int = 3, runtime_env: dict | None = None, gpus: float = 0) -> dict[str, str]:
    try:
        import ray
    except ImportError as e:
        raise OptionError("executor 'ray' needs Ray: pip install 'compscope[ray]' (or use the local executor)") from e
    started = not ray.is_initialized()
    if started:
        kw = {"address": address} if address else {"num_cpus": workers} if workers else {}
        ray.init(**kw, runtime_env=runtime_env, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=max_retries, retry_exceptions=False)(fn)
    pending = {remote.remote(t, str(out), **told): t for t in todo}
    failed = {}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            t = pending.pop(ready[0])
            try:
                ray.get(ready[0])
            except Exception as e:  # a task's own error, or a worker lost more often than max_retries
                cause = getattr(e, "cause", None) or e
                failed[t.key()] = f"{t.source}: {type(cause).__name__}: {cause}"
            bar.update(1)
    finally:
        if started:
            ray.shutdown()
    return failed


EXECUTORS: dict[str, Callable] = {"local": _local, "ray": _ray}


def _on_device(device: str, executor: str, options: dict) -> tuple[dict, dict]:
    """What each task's ``fn`` is told (``device=``), and the executor's options for it (Ray: one
    GPU per CUDA task)."""
    from ..engine.plan import parse_device, resolve_device

    if executor == "local":
        return {"device": str(resolve_device(device))}, options  # not there: one line now, not one failure per task
    dev = parse_device(device)  # present on the workers, perhaps not here
    if dev.type == "cuda" and dev.index is not None:
        raise OptionError(f"device={device!r}: on Ray give 'cuda'; Ray gives each task one GPU of its own")
    if dev.type == "cuda":
        options = {"gpus": 1, **options}
    return {"device": dev.type}, options


def sweep(tasks: list[Task], out: str | Path, *, executor: str = "local", progress: bool = True,
          fn: Callable[[Task, str], str] = work, device: str | None = None, **options) -> SweepResult:
    """Run every task of ``tasks`` whose part is not yet in ``out`` on ``executor`` (``'local'`` or
    ``'ray'``; Ray options: ``address``, ``workers``, ``max_retries``, ``runtime_env``).
    ``device``: where each task computes (``fn`` is called with ``device=``; default CUDA when
    present). Locally a device that is not there is refused before any task; on Ray, ``'cuda'``
    asks one GPU per task and means the worker's own (``cuda:N`` is refused: Ray picks the GPU)."""
    if executor not in EXECUTORS:
        raise OptionError(f"executor {executor!r}: use one of {', '.join(EXECUTORS)}")
    told = {}
    if device is not None:
        told, options = _on_device(device, executor, options)
    out = check_folder(out)
    out.mkdir(exist_ok=True)
    keys = [t.key() for t in tasks]
    if len(set(keys)) != len(keys):
        raise OptionError("the sweep lists the same task twice")
    todo = [t for t in tasks if not is_done(out, t)]
    bar = progress_bar(len(todo), f"sweep ({executor})", enabled=progress)
    try:
        failed = EXECUTORS[executor](todo, out, fn, bar, told, **options)
    finally:
        bar.close()
    return SweepResult(out, len(todo) - len(failed), len(tasks) - len(todo), failed)
