"""Synthetic sequences on which induction heads form, from a seeded generator.

Each training sequence of length ``n_ctx`` is filler with one repeated random segment: a
segment of ``span`` uniform random tokens is written at ``first`` and copied at ``second``
(``first + span <= second``, ``second + span <= n_ctx``). Filler is drawn from a fixed random
bigram chain (each token has ``branching`` likely successors) with probability ``bigram``,
uniform otherwise — so a model gains from bigram statistics before it gains from copying.

Held-out *repeated random* sequences (for induction scores and in-context loss) are
``[t_1 … t_n, t_1 … t_n]`` of uniform tokens, as in "In-context Learning and Induction Heads".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..core.memory import check_fits
from ..errors import OptionError


@dataclass(frozen=True)
class DataConfig:
    """``span_min..span_max``: repeated segment lengths; ``bigram``: filler share from the chain."""

    d_vocab: int = 64
    n_ctx: int = 64
    span_min: int = 8
    span_max: int = 32
    bigram: float = 0.5
    branching: int = 4
    chain_seed: int = 1234

    def __post_init__(self) -> None:
        if not (1 <= self.span_min <= self.span_max and 2 * self.span_max <= self.n_ctx):
            raise OptionError(
                f"data config: need 1 <= span_min <= span_max and 2*span_max <= n_ctx "
                f"(got span {self.span_min}..{self.span_max}, n_ctx {self.n_ctx})"
            )
        if not 0.0 <= self.bigram <= 1.0:
            raise OptionError(f"data config bigram={self.bigram}: expected a probability in [0, 1]")
        if not 1 <= self.branching <= self.d_vocab or self.d_vocab < 2:
            raise OptionError(f"data config: need 2 <= d_vocab and 1 <= branching <= d_vocab (got {self.d_vocab}, {self.branching})")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Batch:
    """``tokens: (batch, n_ctx)``; the segment ``tokens[b, first[b] : first[b]+span[b]]`` equals
    ``tokens[b, second[b] : second[b]+span[b]]``."""

    tokens: Tensor
    first: Tensor
    second: Tensor
    span: Tensor


def bigram_chain(cfg: DataConfig) -> Tensor:
    """Row-stochastic ``(d_vocab, d_vocab)`` transition matrix: ``branching`` successors per token
    with Dirichlet(1) weights, fixed by ``chain_seed``."""
    g = torch.Generator().manual_seed(cfg.chain_seed)
    V = cfg.d_vocab
    succ = torch.stack([torch.randperm(V, generator=g)[: cfg.branching] for _ in range(V)])
    w = -torch.rand(V, cfg.branching, generator=g).clamp_min(1e-12).log()  # Exp(1) -> Dirichlet(1)
    P = torch.zeros(V, V, dtype=torch.float64)
    P.scatter_(1, succ, (w / w.sum(1, keepdim=True)).double())
    return P


class InductionData:
    """Seeded batches of training sequences (see the module docstring)."""

    def __init__(self, cfg: DataConfig, seed: int = 0):
        self.cfg = cfg
        self.chain = bigram_chain(cfg)
        self.gen = torch.Generator().manual_seed(seed)

    def filler(self, n: int) -> Tensor:
        """``(n, n_ctx)`` filler: bigram chain steps with probability ``bigram``, else uniform."""
        cfg, g = self.cfg, self.gen
        out = torch.empty(n, cfg.n_ctx, dtype=torch.long)
        out[:, 0] = torch.randint(cfg.d_vocab, (n,), generator=g)
        uniform = torch.randint(cfg.d_vocab, (n, cfg.n_ctx), generator=g)
        use_chain = torch.rand(n, cfg.n_ctx, generator=g) < cfg.bigram
        u = torch.rand(n, cfg.n_ctx, generator=g)
        cdf = self.chain.cumsum(1)
        for p in range(1, cfg.n_ctx):
            nxt = torch.searchsorted(cdf[out[:, p - 1]], u[:, p : p + 1].double()).squeeze(1).clamp_max(cfg.d_vocab - 1)
            out[:, p] = torch.where(use_chain[:, p], nxt, uniform[:, p])
        return out

    def batch(self, n: int) -> Batch:
        cfg, g = self.cfg, self.gen
        tokens = self.filler(n)
        span = torch.randint(cfg.span_min, cfg.span_max + 1, (n,), generator=g)
        # first in [0, n_ctx - 2 span], second in [first + span, n_ctx - span]
        first = (torch.rand(n, generator=g) * (cfg.n_ctx - 2 * span + 1)).long()
        room = cfg.n_ctx - span - (first + span) + 1
        second = first + span + (torch.rand(n, generator=g) * room).long()
        seg = torch.randint(cfg.d_vocab, (n, cfg.span_max), generator=g)
        pos = torch.arange(cfg.span_max)[None, :]
        inside = pos < span[:, None]
        rows = torch.arange(n)[:, None].expand(-1, cfg.span_max)
        for start in (first, second):
            cols = (start[:, None] + pos).clamp_max(cfg.n_ctx - 1)
            tokens[rows[inside], cols[inside]] = seg[inside]
        return Batch(tokens, first, second, span)


def repeated_random(n: int, half: int, d_vocab: int, seed: int) -> Tensor:
    """``(n, 2·half)`` held-out sequences ``[t, t]`` of uniform random tokens ``t`` (seeded)."""
    if half < 2:
        raise OptionError(f"repeated sequences need half-length >= 2, got {half}")
    check_fits(3 * n * half * 8, f"{n:,} sequences [t, t] with |t| = {half} (token ids, int64)", "ask for fewer")
    g = torch.Generator().manual_seed(seed)
    t = torch.randint(d_vocab, (n, half), generator=g)
    return torch.cat([t, t], dim=1)
