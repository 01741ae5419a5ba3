"""The induction scores from the weights on a real model: ``head_circuits`` (the exact maximum over
writers, pruned by its bound) against the reference that solves the matching eigenproblem of every
(earlier writer, reader) pair and takes the maximum, timed in the same run, with the number of
eigenproblems each solves and the largest difference between their ``induction_qk``.

    python bench/circuits_real.py                           # smollm2 and gemma3-270m
    python bench/circuits_real.py --models smollm2 --contents 2

The content of the rotary previous-token score is the normed embeddings (weights only), so nothing
runs on data. ``--contents N`` (N ≥ 2): also N previous-token scores at once, each with samples of
normed embeddings of 1,024 random tokens (seed 0 … N − 1) as content, through
``head_circuits_by_content`` (copying, matching, K and the matching through writers computed once)
against N ``head_circuits`` calls. ``--steps``: first, each step of ``head_circuits`` timed
alone, in its order (copying, matching, the rotary previous-token score, K scores, the pruned
search; the first two each form one vocabulary product), before the vocabulary products are
cleared for the comparison. Peak resident memory of the process is printed last.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import compscope  # noqa: E402
from compscope.analysis import circuits as C  # noqa: E402
from compscope.engine.composition import scores  # noqa: E402


class _Count:
    """Counts the ``r × r`` matching eigenproblems solved (:func:`compscope.analysis.circuits._eigen_scores`)."""

    def __init__(self) -> None:
        self.n, self.real = 0, C._eigen_scores

    def __enter__(self):
        def counted(M):
            self.n += M.shape[:-2].numel()
            return self.real(M)
        C._eigen_scores = counted
        return self

    def __exit__(self, *exc) -> None:
        C._eigen_scores = self.real


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def steps(hw) -> None:
    """Each step of ``head_circuits`` timed alone, in its order; the vocabulary products it forms
    are then dropped, so that the comparison after starts cold."""
    from compscope.core import vocab

    _, t_copy = _timed(lambda: C.copying_scores(hw))
    _, t_match = _timed(lambda: C.matching_scores(hw))
    previous, t_prev = _timed(lambda: C.rotary_previous(hw) if C.reads_content(hw) else C.positional_previous(hw))
    K, t_k = _timed(lambda: scores(hw, "K", ["frobenius"], progress=False).dense("frobenius", "K"))
    with _Count() as n:
        _, t_search = _timed(lambda: C.induction_qk(hw, previous, K))
    print(f"  steps: copying {t_copy:.1f} s, matching {t_match:.1f} s, previous-token {t_prev:.1f} s, "
          f"K {t_k:.1f} s, pruned search {t_search:.1f} s ({n.n} eigenproblems)")
    vocab._KEPT.clear()


def run(name: str, contents: int, by_step: bool = False) -> None:
    hw = compscope.load(name)
    L, H = hw.n_layers, hw.n_heads
    print(f"{hw.meta.name}: {L} layers x {H} heads, d_model {hw.d_model}, d_head {hw.d_head}; "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    if by_step:
        steps(hw)
    with _Count() as pruned_n:
        circ, t_pruned = _timed(lambda: C.head_circuits(hw))
    # the reference: every pair's matching, then the same maximum, from the same K and previous-token scores
    K, t_k = _timed(lambda: scores(hw, "K", ["frobenius"], progress=False).dense("frobenius", "K").double())
    with _Count() as all_n:
        match, t_all = _timed(lambda: C.induction_matching(hw))
    brute = torch.nan_to_num(circ.previous.double()[:, :, None, None] * K.clamp_min(0) * match.clamp_min(0),
                             nan=0.0).flatten(0, 1).amax(0)
    diff = float((brute - circ.induction_qk).abs().max())
    print(f"  head_circuits (pruned maximum)            {t_pruned:8.1f} s   {pruned_n.n:7d} eigenproblems")
    print(f"  reference: K scores + every pair's matching {t_k + t_all:6.1f} s   {all_n.n:7d} eigenproblems "
          f"(K {t_k:.1f} s)")
    print(f"  ratio reference / head_circuits            {(t_k + t_all) / t_pruned:6.1f}x;  "
          f"max |induction_qk - reference| = {diff:.1e}")
    if contents > 1:  # distinct contents: normed embeddings of random tokens, one seed each
        from compscope.core.attention import read_input

        E = hw.W_E.T.float()
        samples = {}
        for i in range(contents):
            g = torch.Generator().manual_seed(i)
            toks = torch.randint(hw.n_vocab, (1024,), generator=g)
            samples[f"tokens, seed {i}"] = {l: read_input(hw, l, E[toks][None])[0] for l in range(L)}
        with _Count() as shared_n:
            _, t_shared = _timed(lambda: C.head_circuits_by_content(hw, samples))
        with _Count() as apart_n:
            _, t_apart = _timed(lambda: [C.head_circuits(hw, content=s) for s in samples.values()])
        print(f"  {contents} contents (sampled token embeddings): head_circuits_by_content {t_shared:.1f} s "
              f"({shared_n.n} eigenproblems), {contents} head_circuits calls {t_apart:.1f} s ({apart_n.n}); "
              f"ratio {t_apart / t_shared:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["smollm2", "gemma3-270m"])
    ap.add_argument("--contents", type=int, default=1)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--steps", action="store_true", help="time each step of head_circuits first")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    for m in args.models:
        run(m, args.contents, args.steps)
    print(f"peak resident memory {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
