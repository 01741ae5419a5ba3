"""One-pair detail (principal angles, composed spectrum) against dense float64 numpy."""

import numpy as np
import pytest

from compscope.errors import OptionError
from compscope.api import compose_pair
from test_composition import dense_measures, model, rot_matrix, sqrtm


def _dense_pair(hw, l1, h1, l2, h2, kind, metric, offset):
    n = lambda x: x.double().numpy()  # noqa: E731
    d = hw.d_model
    if metric == "identity":
        S = Si = np.eye(d)
    else:
        S, Si = sqrtm(n(hw.W_E) @ n(hw.W_E).T / hw.n_vocab)
    A = Si @ n(hw.W_O[l1, h1]) @ n(hw.W_V[l1, hw.kv_map[h1]]) @ S
    R = rot_matrix(float(hw.rotary.inv_freq[l2, 0]), offset, hw.d_head)
    g2 = hw.kv_map[h2]
    QK = (n(hw.W_Q[l2, h2]) @ S).T @ R.T @ (n(hw.W_K[l2, g2]) @ S)
    B = {"Q": QK.T, "K": QK, "V": Si @ n(hw.W_O[l2, h2]) @ n(hw.W_V[l2, g2]) @ S}[kind]
    return A, B


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
@pytest.mark.parametrize("metric", ["identity", "embed"])
def test_angles_and_composed_spectrum_match_dense(kind, metric):
    hw = model()
    for (l1, h1, l2, h2), offset in (((0, 1, 2, 3), 0), ((1, 0, 2, 2), 3)):
        A, B = _dense_pair(hw, l1, h1, l2, h2, kind, metric, offset)
        rep = compose_pair(hw, (l1, h1), (l2, h2), kind, metric, offset=offset)
        # principal angles between col(A) and row(B), from dense SVDs of the d x d matrices
        U, sa, _ = np.linalg.svd(A)
        _, sb, Vt = np.linalg.svd(B)
        ra, rb = int((sa > sa[0] * 1e-10).sum()), int((sb > sb[0] * 1e-10).sum())
        cos = np.linalg.svd(Vt[:rb] @ U[:, :ra], compute_uv=False)
        np.testing.assert_allclose(rep.cosines.numpy(), cos[: min(ra, rb)], atol=1e-5)  # metric ridge 1e-6
        assert bool((rep.principal_angles[1:] >= rep.principal_angles[:-1] - 1e-12).all())
        composed = np.linalg.svd(B @ A, compute_uv=False)[: min(ra, rb)]
        np.testing.assert_allclose(rep.composed_singular_values.numpy(), composed, rtol=1e-5, atol=1e-8 * composed[0])
        np.testing.assert_allclose(rep.writer_singular_values.numpy(), sa[:ra], rtol=1e-5)
        ref = dense_measures(A, B)
        for m, v in ref.items():
            assert rep.measures[m] == pytest.approx(v, rel=1e-5, abs=1e-6), m


def test_baselined_frobenius_of_a_pair_equals_the_engines():
    """The same seeded Haar expectation as compscope.scores, on the same spectra."""
    from compscope.api import scores

    hw = model()
    t = scores(hw, "QKV", ["frobenius_baselined"], offset=2, precision="float64", progress=False)
    for kind in "QKV":
        rep = compose_pair(hw, (0, 1), (2, 3), kind, offset=2)
        assert rep.measures["frobenius_baselined"] == pytest.approx(float(t.dense("frobenius_baselined", kind)[0, 1, 2, 3]), abs=1e-6)
        assert rep.measures["frobenius_baselined"] < rep.measures["frobenius"]


def test_pair_errors():
    hw = model()
    with pytest.raises(OptionError, match="before"):
        compose_pair(hw, (2, 0), (1, 0))
    with pytest.raises(OptionError, match="heads 0..3"):
        compose_pair(hw, (0, 9), (1, 0))
    with pytest.raises(OptionError, match="kind"):
        compose_pair(hw, (0, 0), (1, 0), "O")
    for bad in ("0", "a.b", (0.5, 1), (True, 0), None, (0, 1, 2)):
        with pytest.raises(OptionError, match="writer .*expected \\(layer, head\\) integers or 'LAYER.HEAD'"):
            compose_pair(hw, bad, (1, 0))


def test_heads_as_text_or_numpy_integers_are_the_same_pair():
    hw = model()
    ref = compose_pair(hw, (0, 1), (1, 0))
    for w, r in (("0.1", "1.0"), ((np.int64(0), np.int32(1)), "1.0")):
        rep = compose_pair(hw, w, r)
        assert (rep.writer, rep.reader) == ((0, 1), (1, 0)) and rep.measures == ref.measures


def test_pair_on_data_is_what_the_verdict_measured(capsys, tmp_path):
    """``pair --on-data`` prints the pair's K effect and both heads' labels as ``validate`` (run
    here in full, every writer) measures them on the same sequences; and its rank among the
    writer's later heads, counted here from the verdict's effects. With ``--out`` the JSON holds the
    same values unrounded."""
    import json
    import re

    from compscope.cli.main import main
    from compscope.data.validate import validate

    v = validate("induction-2l", progress=False)
    assert main(["pair", "0.0", "1.1", "--kind", "K", "--on-data", "--out", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    k = v.effects.by_kind["K"]
    got = re.search(r"K effect of 0.0 on 1.1: (\S+), rank (\d+) of the 4 later heads", out)
    assert got is not None, out
    assert float(got.group(1)) == pytest.approx(float(k[0, 0, 1, 1]), abs=1e-4)
    assert int(got.group(2)) == 1 + int((k[0, 0, 1] > k[0, 0, 1, 1]).sum())
    for who, (l, h) in (("writer", (0, 0)), ("reader", (1, 1))):
        line = next(x for x in out.splitlines() if x.startswith(f"{who} {l}.{h} labels:"))
        found = re.findall(r"(\w+) (-?\d\.\d\d) ± (\S+)", line)  # each label ± its standard error
        shown = {name: x for name, x, _ in found}
        assert {name: float(x) for name, x in shown.items()} == pytest.approx(
            {name: float(v.labels.mean[name][l, h]) for name in shown}, abs=0.006)
        assert set(shown) == {"induction", "previous_token", "duplicate_token", "sink"}
        for name, _, err in found:  # the verdict's error, to the two significant digits shown
            assert float(err) == pytest.approx(float(v.labels.error[name][l, h]), rel=0.06, abs=1e-12), (name, line)
    d = json.loads((tmp_path / "p.json").read_text())["on_data"]
    assert d["effect"] == pytest.approx(float(k[0, 0, 1, 1]), rel=1e-9, abs=1e-12) and d["kind"] == "K"
    assert (d["rank"], d["later_heads"]) == (1 + int((k[0, 0, 1] > k[0, 0, 1, 1]).sum()), 4)
    assert d["largest"]["effect"] == pytest.approx(float(k[0, 0, 1].max()), rel=1e-9, abs=1e-12)
    for who, (l, h) in (("writer", (0, 0)), ("reader", (1, 1))):
        got = d[f"{who}_labels"]
        assert set(got) == {"induction", "previous_token", "duplicate_token", "sink"}
        for name, x in got.items():
            assert x["mean"] == pytest.approx(float(v.labels.mean[name][l, h]), rel=1e-9, abs=1e-12), (who, name)
            assert x["error"] == pytest.approx(float(v.labels.error[name][l, h]), rel=1e-9, abs=1e-12), (who, name)


def _per_layer_metric(hw, own_reads: bool):
    """A metric with its own random G for every layer (``own_reads``: the -own rule of which G a factor takes)."""
    import torch

    from compscope.core.metrics import Metric, from_gram

    g = torch.Generator().manual_seed(3)
    roots = {}
    for layer in range(hw.n_layers):
        M = torch.randn(hw.d_model, 2 * hw.d_model, generator=g, dtype=torch.float64)
        roots[layer] = from_gram("g", M @ M.T / (2 * hw.d_model))
    return Metric("per-layer", {k: m.sqrt[None] for k, m in roots.items()}, {k: m.inv_sqrt[None] for k, m in roots.items()},
                  own_reads=own_reads)


@pytest.mark.parametrize("metric", ["identity", "embed", "per-layer", "per-layer-own"])
def test_pairs_composed_together_are_each_pair_composed_alone(metric, monkeypatch):
    """compose_pairs: every pair what compose_pair gives it (to the bit), each head's map decomposed once
    for every metric, layer pair and kind that gives it the same coordinates."""
    import torch

    from compscope.analysis import pair as pair_module

    hw = model()
    met = _per_layer_metric(hw, metric.endswith("own")) if metric.startswith("per-layer") else metric
    pairs = [((0, 1), (2, 3), "K"), ((0, 1), (1, 0), "Q"), ((1, 2), (2, 3), "V"), ((0, 1), (2, 0), "K"), ((1, 0), (2, 3), "K")]
    alone = [compose_pair(hw, w, r, k, met, offset=2) for w, r, k in pairs]
    taken = []
    real = pair_module._thin_svd
    monkeypatch.setattr(pair_module, "_thin_svd", lambda m: taken.append(m) or real(m))
    together = pair_module.compose_pairs(hw, pairs, met, offset=2)
    for a, b in zip(alone, together):
        assert (a.writer, a.reader, a.kind, a.metric, a.measures) == (b.writer, b.reader, b.kind, b.metric, b.measures)
        for f in ("principal_angles", "composed_singular_values", "writer_singular_values", "reader_singular_values"):
            assert torch.equal(getattr(a, f), getattr(b, f)), f
    # writers: 0.1 (read at layers 1 and 2: one map unless G is the reader's, per layer), 1.2, 1.0; readers: 4 distinct
    writer_maps = {"identity": 3, "embed": 3, "per-layer": 4, "per-layer-own": 4}[metric]
    assert len(taken) == writer_maps + 4
