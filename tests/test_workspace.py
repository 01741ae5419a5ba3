"""The engine's scratch buffers kept between calls (compscope.engine.workspace)."""

import threading

import torch

from compscope.engine import workspace
from compscope.api import scores
from test_composition import GRAM, check_dense, model


def test_take_reuses_storage_and_grows():
    ws = workspace.Workspace()
    a = ws.take("x", (3, 4), torch.float32)
    assert a.shape == (3, 4) and a.dtype == torch.float32
    b = ws.take("x", (2, 5), torch.float32)  # smaller: same storage
    assert b.shape == (2, 5) and b.data_ptr() == a.data_ptr()
    c = ws.take("x", (5, 5), torch.float32)  # larger: new storage
    assert c.shape == (5, 5) and ws.nbytes == 25 * 4
    assert ws.take("x", (25,), torch.float32).data_ptr() == c.data_ptr()  # the same size: the same storage
    d = ws.take("x", (2,), torch.float64)  # other dtype: its own buffer
    assert d.dtype == torch.float64 and ws.nbytes == 25 * 4 + 2 * 8
    ws.clear()
    assert ws.nbytes == 0


def test_borrowed_is_shared_once_and_trimmed(monkeypatch):
    workspace.release()
    with workspace.borrowed() as outer:
        assert outer is workspace._SHARED
        with workspace.borrowed() as inner:  # held: a private workspace
            assert inner is not outer
        outer.take("x", (10,), torch.float32)
    assert workspace._SHARED.nbytes == 40  # kept: under KEEP_BYTES
    monkeypatch.setattr(workspace, "KEEP_BYTES", 39)
    with workspace.borrowed() as ws:
        ws.take("x", (10,), torch.float32)
    assert workspace._SHARED.nbytes == 0  # over the limit: freed at the end
    assert workspace.release() == 0


def test_repeated_calls_reuse_buffers_and_results_do_not_alias_them():
    workspace.release()
    hw1, hw2 = model(L=4, seed=11), model(L=4, seed=12)
    t1 = scores(hw1, "QKV", GRAM, offset=1, progress=False)
    kept = workspace._SHARED.nbytes
    assert kept > 0
    first = {k: v.clone() for k, v in t1.values.items()}
    t2 = scores(hw2, "QKV", GRAM, offset=1, progress=False)  # same shapes: the same buffers, new contents
    assert workspace._SHARED.nbytes == kept
    for k, v in t1.values.items():
        assert torch.equal(v.nan_to_num(), first[k].nan_to_num())
    assert check_dense(hw2, t2, offset=1, measures=GRAM) == 3 * 4 * (4 * 4 * 6)
    again = scores(hw1, "QKV", GRAM, offset=1, progress=False)
    for k, v in again.values.items():
        assert torch.equal(v.nan_to_num(), first[k].nan_to_num())
    assert workspace.release() == kept and workspace._SHARED.nbytes == 0


def test_a_call_frees_same_named_buffers_of_another_dtype_before_allocating_and_what_it_did_not_take_at_its_end():
    ws = workspace.Workspace()
    ws.begin()
    ws.take("x", (10,), torch.float32)
    ws.take("y", (6,), torch.float32)
    ws.end()
    assert ws.nbytes == 40 + 24  # both kept
    ws.begin()
    ws.take("x", (10,), torch.float64)  # another dtype under "x": the float32 "x" goes first, not "y"
    assert ws.nbytes == 24 + 80  # "y" float32 and "x" float64
    ws.take("x", (5,), torch.float64)
    ws.end()  # "y" was not taken in this call: freed
    assert ws.nbytes == 80
    ws.begin()
    ws.take("x", (3,), torch.float64)  # reused: no allocation
    ws.take("x", (3,), torch.float32)  # allocated; the float64 "x", taken in this call, stays
    ws.end()
    assert ws.nbytes == 80 + 12


def test_after_a_call_in_the_other_precision_only_its_own_buffers_are_kept():
    hw = model(L=4, seed=13)
    workspace.release()
    scores(hw, "QKV", GRAM, precision="float64", progress=False)
    alone = workspace._SHARED.nbytes
    workspace.release()
    scores(hw, "QKV", GRAM, progress=False)  # float32 buffers
    assert workspace._SHARED.nbytes != alone
    t = scores(hw, "QKV", GRAM, precision="float64", progress=False)
    assert workspace._SHARED.nbytes == alone
    assert check_dense(hw, t, measures=GRAM) == 3 * 4 * (4 * 4 * 6)
    workspace.release()


def test_concurrent_calls_use_separate_buffers():
    hws = [model(L=4, seed=s) for s in (21, 22, 23, 24)]
    alone = [scores(hw, "QKV", GRAM, offset=1, progress=False).values for hw in hws]
    got = [None] * len(hws)

    def run(i):
        got[i] = scores(hws[i], "QKV", GRAM, offset=1, progress=False).values

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(hws))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(alone, got):
        for k in a:
            torch.testing.assert_close(a[k], b[k], equal_nan=True, rtol=0, atol=0)
