"""The axiom battery (compscope.analysis.axioms): every measure keeps the axioms it declares, the checks
find the failures that are hand-derived, and the constructed pairs are what they claim to be
(checked with dense numpy matrices)."""

import math
import re

import numpy as np
import pytest
import torch

from compscope import OptionError
from compscope.analysis.axioms import CHECKS, TOL, check_axioms, format_axioms, monotone_path, value
from compscope.cli.main import main
from compscope.core.lowrank import LowRank
from compscope.measures import AXIOMS, Measure, get_measure, measures


@pytest.mark.parametrize("name", sorted(measures()))
def test_every_measure_keeps_the_axioms_it_declares(name):
    """The conformance suite: a new measure is checked here with no other edit."""
    results = check_axioms(name, seed=1)
    assert {r.axiom for r in results} == set(AXIOMS) | {"gauge"}
    for r in results:
        if r.declared == "satisfies":
            assert r.holds, (r.axiom, r.worst, r.detail)


@pytest.mark.parametrize("name", sorted(measures()))
def test_the_battery_finds_every_failure_a_measure_declares(name):
    for r in check_axioms(name, seed=2):
        if r.declared == "fails":
            assert not r.holds, (r.axiom, r.reason)


@pytest.mark.parametrize("name", sorted(measures()))
def test_gauge_orderings_flip_in_the_raw_basis_and_hold_under_a_metric_that_moves_with_the_model(name):
    """Axiom 4 of docs/spec.md for T in GL(d): the seed's point, and the metrics' purpose."""
    (raw,) = check_axioms(name, ["gauge"], seed=4)
    assert raw.declared == "fails" and not raw.holds and "orderings flipped" in raw.detail
    (embed,) = check_axioms(name, ["gauge"], seed=4, metric="embed")
    assert embed.declared == "satisfies" and embed.holds, embed.detail


def test_identity_failures_have_their_hand_derived_values():
    """C(I_d, I_d): frobenius d^-1/2, bandwidth and shared_dims d; the worst of d = 2, 8, 32."""
    got = {r.measure: r.worst for r in check_axioms(["frobenius", "bandwidth", "shared_dims", "overlap"], ["identity"])}
    assert got["frobenius"] == pytest.approx(1 - 32**-0.5, rel=1e-12)
    assert got["bandwidth"] == pytest.approx(31, rel=1e-9)
    assert got["shared_dims"] == pytest.approx(31, rel=1e-9)
    assert got["overlap"] <= TOL


def _dense(lr: LowRank) -> np.ndarray:
    return lr.dense().numpy()


def test_monotone_path_rotates_the_write_space_into_the_read_space():
    """Along the path B A(t) = sin t · B A(π/2): frobenius(t) = sin t · frobenius(π/2) and
    overlap(t) = sin² t, from dense matrices."""
    path, _ = monotone_path(seed=5)
    A1, B = (_dense(x) for x in path(math.pi / 2))
    frob = lambda A: np.linalg.norm(B @ A) / (np.linalg.norm(A) * np.linalg.norm(B))  # noqa: E731
    P_B = np.linalg.pinv(B) @ B  # projector onto row(B)
    for t in (0.0, 0.3, 1.0, 1.4):
        A, _ = (_dense(x) for x in path(t))
        assert frob(A) == pytest.approx(math.sin(t) * frob(A1), abs=1e-12)
        U = np.linalg.svd(A)[0][:, : np.linalg.matrix_rank(A)]
        assert np.linalg.norm(P_B @ U) ** 2 / U.shape[1] == pytest.approx(math.sin(t) ** 2, abs=1e-10)
        assert value(get_measure("overlap"), *path(t)) == pytest.approx(math.sin(t) ** 2, abs=1e-10)
        assert value(get_measure("frobenius"), *path(t)) == pytest.approx(frob(A), abs=1e-12)


def _seen_pairs(axiom, trials):
    """The dense ``(A, B)`` of every pair the check ``axiom`` evaluates, in order."""
    import compscope.analysis.axioms as ax

    seen, inner = [], ax.value

    def spy(m, W, R, seed=0):
        seen.append((_dense(W), _dense(R)))
        return inner(m, W, R, seed)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ax, "value", spy)
        check_axioms("overlap", [axiom], trials=trials)
    return seen


def test_full_and_no_read_pairs_are_what_they_claim():
    """The writers the two checks build lie inside / orthogonal to the reader's row space."""
    for axiom, inside in (("full_read", True), ("no_read", False)):
        seen = _seen_pairs(axiom, 4)
        assert len(seen) == 4
        for A, B in seen:
            P_B = np.linalg.pinv(B) @ B
            moved = np.linalg.norm(P_B @ A - (A if inside else 0)) / np.linalg.norm(A)
            assert moved < 1e-12


def _broken(name, fn, satisfies):
    """A measure from ``fn(ba2, a, b, x2)`` declared to satisfy ``satisfies`` (not registered)."""
    def exact(p):
        return fn(p.core().pow(2).sum((-1, -2)), p.a, p.b, p.X.pow(2).sum((-1, -2)))
    return Measure(name=name, exact=exact, from_gram=None, range=(0.0, 1.0), doc="test", satisfies=frozenset(satisfies))


def test_a_measure_that_breaks_what_it_declares_is_reported_violated():
    unnormalised = _broken("unnormalised", lambda ba2, a, b, x2: ba2.sqrt(), {"scale", "identity", "no_read"})
    got = {r.axiom: r for r in check_axioms(unnormalised)}
    assert got["scale"].violated and got["identity"].violated  # ‖BA‖_F: scales with α β; ‖I_32‖_F = √32
    assert got["identity"].worst == pytest.approx(math.sqrt(32) - 1, rel=1e-12)
    assert not got["no_read"].violated
    assert got["full_read"].declared == "undeclared"
    decreasing = _broken("one_minus_overlap", lambda ba2, a, b, x2: 1 - x2 / (a > 0).sum(-1), {"monotone"})
    (r,) = check_axioms(decreasing, ["monotone"], trials=2)
    assert r.violated and "decreases" in r.detail
    text = format_axioms(check_axioms(decreasing, ["monotone", "scale"], trials=2), 2, 0)
    assert "VIOLATED" in text and "one_minus_overlap / monotone" in text


def _of_overlap(name, f):
    """A measure ``f(overlap)``, declared monotone: along the monotone path overlap is ``sin² t``
    (checked above), so the measure is ``f(sin² t)`` there."""
    return _broken(name, lambda ba2, a, b, x2: f(x2 / (a > 0).sum(-1)), {"monotone"})


def test_the_monotone_check_finds_a_decrease_in_the_paths_last_step_alone():
    """``f(u) = u`` up to ``u = 0.999``, then falling with slope 100: on the grid ``t_i = iπ/80``
    only the last step (``sin²(39π/80) = 0.99846`` to ``sin²(π/2) = 1``) ends above 0.999, where
    ``f(1) = 0.899``; f is continuous, so the continuity check holds."""
    m = _of_overlap("falls_at_the_end", lambda u: torch.where(u <= 0.999, u, 0.999 - 100 * (u - 0.999)))
    (r,) = check_axioms(m, ["monotone"], trials=2)
    before = math.sin(39 * math.pi / 80) ** 2
    assert r.violated and r.worst == pytest.approx(before - 0.899, abs=1e-8)
    frm, to, at = (float(x) for x in re.search(r"decreases from (\S+) to (\S+) at t=(\S+)$", r.detail).groups())
    assert (frm, to, at) == (pytest.approx(before, abs=1e-6), pytest.approx(0.899, abs=1e-6),
                             pytest.approx(39 * math.pi / 80, abs=1e-4))


def test_the_continuity_check_finds_a_jump_and_passes_a_steep_ramp():
    """A step ``f(u) = u/2 + ½·[u ≥ 0.6]`` never decreases but jumps by ½ where ``sin² t = 0.6``:
    bisection (12 halvings of a step of π/80) pins it to within 1e-5 and finds it unshrunk. A ramp
    of slope 50 in ``u`` over the same place is continuous: its steps shrink below 1e-3 (``|df/dt|
    ≤ 50``, so a step of ``π/80/2¹²`` changes it by at most 5e-4)."""
    t0 = math.asin(math.sqrt(0.6))
    step = _of_overlap("step", lambda u: u / 2 + 0.5 * (u >= 0.6).double())
    (r,) = check_axioms(step, ["monotone"], trials=2)
    assert r.violated and r.worst == pytest.approx(0.5, abs=1e-4)
    frm, to, near = (float(x) for x in re.search(r"jumps from (\S+) to (\S+) near t=(\S+)$", r.detail).groups())
    assert (frm, to, near) == (pytest.approx(0.3, abs=1e-4), pytest.approx(0.8, abs=1e-4), pytest.approx(t0, abs=1e-5))
    ramp = _of_overlap("ramp", lambda u: (u / 2 + 50 * (u - 0.59)).clamp(0.295, 0.8))
    (r,) = check_axioms(ramp, ["monotone"], trials=2)
    assert r.holds and r.worst == 0.0 and r.detail == ""


def test_the_random_pairs_span_the_stated_widths_and_ranks():
    """Widths ``d`` from 6 to 24 and ranks from 1 to 6 with ``r_A + r_B ≤ d`` (so a writer fits in
    the complement of the reader's row space), every end reached over 120 trials; the full-read
    pairs have ``r_A ≤ r_B``, sometimes strictly; padding adds 1 to 8 dimensions."""
    shapes = {}
    for axiom in ("full_read", "no_read"):
        shapes[axiom] = [(A.shape[0], np.linalg.matrix_rank(A), np.linalg.matrix_rank(B))
                         for A, B in _seen_pairs(axiom, 120)]
        d, ra, rb = np.array(shapes[axiom]).T
        assert d.min() == 6 and d.max() == 24 and (ra + rb <= d).all()
        assert min(ra.min(), rb.min()) == 1 and max(ra.max(), rb.max()) == 6
        assert (np.maximum(ra, rb) <= np.maximum(d // 3, 1)).all()
    _, ra, rb = np.array(shapes["full_read"]).T
    assert (ra <= rb).all() and (ra < rb).any() and (ra == rb).any()
    padded = _seen_pairs("padding", 60)
    grown = {B2.shape[0] - B.shape[0] for (_, B), (_, B2) in zip(padded[::2], padded[1::2])}
    assert grown == set(range(1, 9))


def test_bandwidth_of_an_orthogonal_pair_is_zero_not_rounding_noise():
    """col(A) ⊥ row(B): the core is rounding noise (~1e-16), whose effective rank would be ~r."""
    (r,) = check_axioms("bandwidth", ["no_read"], trials=6)
    assert r.holds and r.worst == 0.0


def test_options_are_checked():
    with pytest.raises(OptionError, match="unknown axioms"):
        check_axioms("overlap", ["smoothness"])
    with pytest.raises(OptionError, match="unknown measure"):
        check_axioms("nope")
    for bad in (0, True, 2.0):
        with pytest.raises(OptionError, match=r"trials=.*: need an integer >= 1"):
            check_axioms("overlap", trials=bad)
    (one,) = check_axioms("overlap", ["no_read"], trials=1)  # the smallest battery
    assert one.holds
    with pytest.raises(OptionError, match="gauge check takes identity or embed"):
        check_axioms("overlap", ["gauge"], metric="unembed")
    assert set(CHECKS) == set(AXIOMS) | {"gauge"}


def test_the_printed_table_lines_up_and_states_each_failure_once():
    """Every mark starts at the column of its axiom's name in the header, whatever the names' lengths;
    the raw-basis gauge failure is stated once for every measure, with each measure's flipped
    orderings out of the 6 pairs of 4 readers per trial; the other declared failures one per line."""
    names, trials = ["overlap", "frobenius", "shared_dims"], 3
    results = check_axioms(names, trials=trials)
    lines = format_axioms(results, trials, 0).splitlines()
    axioms = list(CHECKS)
    starts = [lines[1].index(f" {a}") + 1 for a in axioms]
    assert starts == sorted(starts) and lines[1][: starts[0]].strip() == ""
    for row, name in zip(lines[2:5], names):
        assert row.split()[0] == name
        assert [row[k - 1] == " " and row[k] != " " for k in starts] == [True] * len(axioms), row
    assert sum(line.startswith("  every measure / gauge: in the raw residual basis") for line in lines) == 1
    (flips,) = [line for line in lines if line.startswith("    orderings flipped: ")]
    got = dict(item.split(" ") for item in flips.removeprefix("    orderings flipped: ").split(", "))
    assert set(got) == set(names)
    for name, ratio in got.items():
        k, total = map(int, ratio.split("/"))
        assert 0 < k <= total == 6 * trials, (name, ratio)
    failing = [r for r in results if r.declared == "fails" and r.axiom != "gauge"]
    assert failing
    assert all(sum(line == f"  {r.measure} / {r.axiom}: {r.reason}" for line in lines) == 1 for r in failing)


def test_cli_prints_the_table_and_fails_on_bad_names(capsys):
    assert main(["axioms", "--measure", "overlap", "--measure", "frobenius", "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2].split() == ["overlap"] + ["yes"] * len(AXIOMS) + ["no"]  # gauge: raw basis
    assert main(["axioms", "--measure", "overlap", "--axiom", "gauge", "--metric", "embed", "--trials", "2"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split() == ["overlap", "yes"]
    assert "frobenius / identity: C(I, I) = d^-1/2" in out
    assert main(["axioms", "--measure", "nope"]) == 2
    assert "unknown measure 'nope'" in capsys.readouterr().err


def test_cli_writes_every_result_to_the_table_named(capsys, tmp_path):
    """``axioms --out``: one row per measure and axiom, the fields of what ``check_axioms`` returns for the same
    options; a name other than .csv or .parquet is refused before the checks."""
    import dataclasses

    pd = pytest.importorskip("pandas")
    out = tmp_path / "axioms.csv"
    assert main(["axioms", "--measure", "overlap", "--measure", "tight", "--trials", "2", "--seed", "4",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.endswith(f"wrote {out}\n")
    want = [dataclasses.asdict(r) for r in check_axioms(["overlap", "tight"], trials=2, seed=4)]
    got = pd.read_csv(out, keep_default_na=False).to_dict("records")
    assert len(got) == 2 * (len(AXIOMS) + 1) and list(got[0]) == list(want[0])
    for a, b in zip(got, want):
        assert {k: v for k, v in a.items() if k != "worst"} == {k: v for k, v in b.items() if k != "worst"}
        assert a["worst"] == pytest.approx(b["worst"], rel=1e-12, abs=0)
    assert main(["axioms", "--out", str(tmp_path / "a.json")]) == 2
    err = capsys.readouterr()
    assert "--out" in err.err and ".csv or .parquet" in err.err and err.out == ""


def test_seeded_results_repeat():
    a, b = check_axioms("tight", seed=3), check_axioms("tight", seed=3)
    assert [(r.holds, r.worst) for r in a] == [(r.holds, r.worst) for r in b]
    assert torch.get_default_dtype() == torch.float32  # the battery does not change torch's defaults


class _NoSharing:
    """Stands in for the battery's context variable so that every value takes its pair's spectra anew."""

    def get(self):
        return None

    def set(self, _):
        return None

    def reset(self, _):
        pass


def _rows(results):
    return [(r.measure, r.axiom, r.holds, r.worst, r.detail) for r in results]


def test_sharing_the_pairs_spectra_between_measures_changes_no_result(monkeypatch):
    from compscope.analysis import axioms

    shared = check_axioms(trials=2)
    monkeypatch.setattr(axioms, "_SPECTRA", _NoSharing())
    assert _rows(shared) == _rows(check_axioms(trials=2))


def test_a_measure_that_writes_into_the_shared_spectra_changes_no_other_measure():
    def scribbler(p):  # cubes the writer's spectrum and halves the cosines in place, then scores nothing
        p.a.pow_(3)
        p.X.mul_(0.5)
        return torch.zeros(p.a.shape[:-1], dtype=p.a.dtype)

    rude = Measure(name="scribbler", exact=scribbler, from_gram=None, range=(0.0, 1.0), doc="test", satisfies=frozenset())
    alone = check_axioms("frobenius", ["scale", "monotone", "identity"], trials=2)
    after = [r for r in check_axioms([rude, "frobenius"], ["scale", "monotone", "identity"], trials=2) if r.measure == "frobenius"]
    assert _rows(after) == _rows(alone)
