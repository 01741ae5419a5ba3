"""``compscope.engine.threads``: small LAPACK problems over torch's threads, same answers as in turn."""

from __future__ import annotations

import threading

import pytest
import torch

from compscope.engine.threads import thread_map, threaded


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_thread_map_keeps_the_order_and_uses_the_threads(two_threads):
    names = []

    def f(i: int) -> int:
        names.append(threading.current_thread().name)
        return i * i

    assert thread_map(f, range(20)) == [i * i for i in range(20)]
    assert all(n.startswith("compscope") for n in names)


def test_pool_threads_run_torch_on_one_core_and_leave_the_callers_count(two_threads):
    """The pool is the parallelism: inside it torch runs on one thread (a threaded LAPACK in each
    of n pool threads would put n² threads on n cores); the caller keeps its own count."""
    counts = thread_map(lambda i: (threading.current_thread().name, torch.get_num_threads()), range(8))
    assert all(name.startswith("compscope") and n == 1 for name, n in counts), counts
    seen = []
    threaded(lambda x: (seen.append(torch.get_num_threads()), x)[1], torch.zeros(8, 2))
    assert seen == [1, 1]
    assert torch.get_num_threads() == 2
    fresh = []  # torch's default for a thread not yet started is the caller's again
    t = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert fresh == [2]


def test_only_a_map_that_starts_pool_threads_puts_the_default_back(two_threads, monkeypatch):
    """Once every pool thread runs, a map sets no thread count (``set_num_threads`` also resets
    torch's own thread pool); the default for new threads stays the caller's."""
    both = threading.Barrier(2, timeout=30)  # two items that wait for each other: two threads running
    thread_map(lambda i: both.wait(), range(2))
    calls = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (calls.append(n), real(n))[1])
    assert thread_map(lambda i: i * 2, range(6)) == [0, 2, 4, 6, 8, 10]
    threaded(lambda x: x + 1, torch.zeros(4, 2))
    assert calls == []
    fresh = []
    t = threading.Thread(target=lambda: fresh.append(torch.get_num_threads()))
    t.start()
    t.join()
    assert fresh == [2]


def test_a_call_from_a_pool_thread_runs_in_turn(two_threads):
    """Nested maps do not wait on the pool they run in (two outer calls fill both threads)."""
    inner_names = []

    def inner(i: int) -> int:
        inner_names.append(threading.current_thread().name)
        return i + 1

    def outer(j: int) -> list[int]:
        me = threading.current_thread().name
        got = thread_map(inner, range(5))
        assert inner_names.count(me) >= 5  # ran here, in turn
        return got

    assert thread_map(outer, range(2)) == [[1, 2, 3, 4, 5]] * 2


def test_one_thread_runs_in_turn():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert thread_map(lambda i: threading.current_thread().name, range(3)) == [threading.current_thread().name] * 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("batch", [1, 7, 33])
def test_threaded_equals_the_call_on_the_whole_batch(two_threads, batch):
    g = torch.Generator().manual_seed(batch)
    M = torch.randn(batch, 12, 12, generator=g, dtype=torch.float64)
    assert torch.equal(threaded(torch.linalg.eigvals, M), torch.linalg.eigvals(M))
    S = M @ M.mT
    w, v = threaded(torch.linalg.eigh, S)
    w0, v0 = torch.linalg.eigh(S)
    assert torch.equal(w, w0) and torch.equal(v.abs(), v0.abs())


def test_induction_scores_are_the_same_on_one_thread_and_on_two():
    """The readers searched in parallel give, to the bit, what one thread gives."""
    from compscope import load
    from compscope.analysis.circuits import head_circuits

    hw = load("induction-2l")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = head_circuits(hw)
        torch.set_num_threads(2)
        two = head_circuits(hw)
    finally:
        torch.set_num_threads(before)
    for name in ("copying", "matching", "previous", "induction_qk", "induction"):
        assert torch.equal(getattr(one, name), getattr(two, name)), name
