"""The ``activations`` metric from data (spec, "Symmetries and metrics"): the second
moment ``G_l = E[x xᵀ]`` of the residual that layer ``l``'s heads read, estimated on token
sequences run through a model compscope can run (:mod:`compscope.data.runner`): toy models on
held-out repeated random sequences, ``transformers`` models on natural text (the standard
library's docstrings, :mod:`compscope.data.sequences`) tokenised by their own tokenizer.

``x`` is what the heads' ``W_Q``, ``W_K`` and ``W_V`` multiply: the residual before layer ``l``
after that layer's norm (with its gain, as ``HeadWeights`` keeps the norms unfolded), averaged
over every sequence and position in float64. Under a change of residual basis ``T`` the
residual moves as ``x → T x``, so ``G_l → T G_l Tᵀ``: the metric that makes every measure
invariant (``compscope.core.metrics``). Layer 0's moment is estimated like the others, although no
pair reads through it. Norm gains are part of ``x`` (unfolded, as ``HeadWeights`` keeps them);
the model always runs unprocessed, and processed weights read its residual as their heads do
(with the gains folded into the weights, the norm's output without its gain).

The ``covariance`` metric is the same residual's central second moment ``E[(x − μ)(x − μ)ᵀ]``
(``centred=True`` below), on the same data. ``activations-own`` and ``covariance-own`` whiten
each reading factor by its own layer's moment (``Metric.own_reads``).

The same residual, sampled rather than averaged (:func:`residual_samples`), is the ``activations``
content distribution of the rotary, ALiBi or relative-position previous-token score (:func:`compscope.analysis.circuits.rotary_previous`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import torch
from torch import Tensor

from ..defaults import SHRINKAGES
from ..errors import OptionError, check_int, check_tokens
from ..core.metrics import DEFAULT_RIDGE, Metric, activations


def _centre(G: Tensor, total: Tensor, count: int) -> Tensor:
    """``E[x xᵀ] − μ μᵀ`` from the second moment ``G = E[x xᵀ]`` and ``total = Σ x`` over ``count`` rows."""
    mu = total / count
    return G - torch.outer(mu, mu)


@torch.no_grad()
def residual_second_moments(model, tokens: Tensor, centred: bool = False) -> dict[int, Tensor]:
    """``{layer: (d, d)}`` float64 second moments of what each layer's heads read, for a
    ``ToyTransformer`` (or anything with its ``cache=`` hooks and ``blocks[l].ln1``) on
    ``tokens: (batch, pos)``; with ``centred``, central ones (covariances)."""
    check_tokens(tokens, "batch, pos")
    cache: dict = {}
    model(tokens, cache=cache)
    out = {}
    for layer, blk in enumerate(model.blocks):
        x = cache[f"resid_pre.{layer}"]
        x = (x if blk.ln1 is None else blk.ln1(x)).reshape(-1, x.shape[-1]).double()
        out[layer] = x.T @ x / x.shape[0]
        if centred:
            out[layer] = _centre(out[layer], x.sum(0), x.shape[0])
    return out


#: seed of the sequences the activations metric is estimated on: not those of the activation
#: labels and interventions (seed 12345), so that a measure is never scored on its own test data
METRIC_SEED = 12346
#: how much data the metric is estimated on: natural text (sequences, tokens each), toy repeats
TEXT_SEQUENCES, TEXT_LENGTH, TOY_SEQUENCES, TOY_HALF = 64, 128, 200, 32


@dataclass(frozen=True)
class MetricData:
    """What the metrics estimated on data (``activations``, ``covariance`` and their ``-own``
    variants) are estimated on: ``sequences`` of ``length`` tokens, ``seed`` picking them. None
    leaves the model's default: natural text, 64 sequences of 128 tokens (at most the model's
    context); a model without a tokenizer, 64 repeated random sequences ``[t, t]`` of 128 tokens;
    compscope's toy models, which have none, 200 held-out repeated random
    sequences ``[t, t]`` of 64 tokens (``|t| = length / 2``); a length given that the model cannot
    take is refused; seed 12346 (the verdict's sequences
    use 12345, so that a measure is never scored on its own test data). ``shrinkage``: how each
    layer's ``G`` is estimated from them: None (or ``'ledoit-wolf'``), the sample moment shrunk
    toward a multiple of the identity by the Ledoit–Wolf intensity, which the same data give
    (:meth:`ResidualSums.ledoit_wolf`); ``'none'``, the sample moment itself.
    ``corpus``: a UTF-8 text file to take the natural text from instead of the docstrings (models
    with a tokenizer; its name and SHA-256 are recorded)."""

    sequences: int | None = None
    length: int | None = None
    seed: int | None = None
    shrinkage: str | None = None
    corpus: str | None = None

    def __post_init__(self) -> None:
        _check_fields(self, "metric data", (("sequences", 1), ("length", 4), ("seed", 0)))
        _check_corpus(self, "metric data")
        if self.shrinkage is not None and self.shrinkage not in SHRINKAGES:
            raise OptionError(f"metric data: shrinkage={self.shrinkage!r}: expected one of {', '.join(SHRINKAGES)}")
        if self.shrinkage == SHRINKAGES[0]:  # the default, spelled out: the same data
            object.__setattr__(self, "shrinkage", None)

    def cli_flags(self) -> list[str]:
        """The command-line options that ask for these data (``--metric-sequences N`` ...), the
        defaults left out."""
        return [x for f in fields(self) if getattr(self, f.name) is not None
                for x in (f"--metric-{f.name}", str(getattr(self, f.name)))]

    @property
    def estimate(self) -> str:
        """How ``G`` is estimated, the default filled in: one of ``SHRINKAGES`` (what
        :func:`runner_second_moments` takes as ``shrinkage``, and a sweep task records)."""
        return self.shrinkage or SHRINKAGES[0]

    @property
    def shrinks(self) -> bool:
        """Whether ``G`` is the Ledoit–Wolf estimate (the default) rather than the sample moment."""
        return self.estimate == "ledoit-wolf"

    def resolved(self, runner) -> tuple[int, int, int]:
        """``(sequences, length, seed)`` for ``runner``'s model, the defaults filled in (a length
        given that the model cannot take is refused; the default is cut to fit)."""
        from .runner import ToyRunner

        _check_fits(runner, self.length, "metric data")
        _check_toy_corpus(runner, self.corpus, "metric data")
        toy = isinstance(runner, ToyRunner)
        return (self.sequences or (TOY_SEQUENCES if toy else TEXT_SEQUENCES),
                self.length or (2 * TOY_HALF if toy else TEXT_LENGTH),
                METRIC_SEED if self.seed is None else self.seed)


def _check_fields(data, what: str, lows: tuple[tuple[str, int], ...]) -> None:
    """Each field of ``data`` named in ``lows`` None or an integer at least its low (``what`` in errors)."""
    for name, low in lows:
        if getattr(data, name) is not None:
            check_int(f"{what}: {name}", getattr(data, name), low)


def _check_corpus(data, what: str) -> None:
    """``data.corpus`` None or the path of a UTF-8 text file (kept as a string, so that the data
    compare, hash and travel as JSON)."""
    if data.corpus is not None:
        from .sequences import corpus_path, corpus_text

        object.__setattr__(data, "corpus", corpus_path(data.corpus, f"{what}: corpus"))
        corpus_text(data.corpus, f"{what}: corpus")  # readable as text: refused before any model is loaded


def _check_toy_corpus(runner, corpus, what: str) -> None:
    """A corpus given for compscope's toy models (no tokenizer: their data are repeats) is refused."""
    from .runner import ToyRunner

    if corpus is not None and isinstance(runner, ToyRunner):
        raise OptionError(f"{what}: corpus {corpus}: {runner.hw.meta.name} is one of compscope's toy models, which have "
                          "no tokenizer (their data are held-out repeated random sequences); a corpus is text for "
                          "a model with a tokenizer")


def _check_fits(runner, length: int | None, what: str) -> None:
    """A ``length`` given that is longer than ``runner``'s model takes is refused (as a ``|t|``
    given is); None, the default, is cut to fit where it is used."""
    if length is not None and runner.n_ctx is not None and length > runner.n_ctx:
        raise OptionError(f"{what}: length={length}: longer than the {runner.n_ctx} tokens {runner.hw.meta.name} "
                          f"takes; give a length <= {runner.n_ctx}, or leave it out for the default (cut to fit)")


def _as(data, cls, what: str):
    """``data`` as a ``cls`` (None: the defaults); anything else is refused, ``what`` in the error."""
    if data is None:
        return cls()
    if not isinstance(data, cls):
        raise OptionError(f"{what}: expected a compscope.{cls.__name__}, got {type(data).__name__}")
    return data


def as_metric_data(data) -> MetricData:
    """``data`` as a :class:`MetricData` (None: the defaults); anything else is refused."""
    return _as(data, MetricData, "metric data")


def metric_data(runner, data: MetricData | None = None) -> str:
    """What :func:`activations_metric` estimates on for ``runner``'s model with ``data``, in words (recorded)."""
    from .runner import ToyRunner

    data = data or MetricData()
    n, length, seed = data.resolved(runner)
    shrunk = "; Ledoit-Wolf shrinkage" if data.shrinks else ""
    if isinstance(runner, ToyRunner):
        from ..toy.storage import held_out_half

        return (f"{n} held-out repeated random sequences [t, t], |t| = {held_out_half(runner.model, length // 2)} "
                f"(seed {seed}){shrunk}")
    return tokens_data(runner, n, length, seed, data.corpus) + shrunk


def toy_activation_metric(model, sequences: int = TOY_SEQUENCES, half: int = TOY_HALF, seed: int = METRIC_SEED,
                          ridge: float = DEFAULT_RIDGE, device=None, centred: bool = False,
                          shrinkage: str = SHRINKAGES[0]) -> Metric:
    """The ``activations`` metric (``covariance`` with ``centred``) of a toy model (folder or
    built-in name) from ``sequences`` held-out repeated random sequences ``[t, t]``,
    ``|t| = min(half, n_ctx / 2)``, run on ``device`` (default CUDA when present); each layer's
    ``G`` shrunk by Ledoit–Wolf as the library's metrics are by default (``shrinkage='none'``: the
    sample moment; :func:`runner_second_moments`)."""
    from ..loading.builtin import find_toy
    from .runner import runner_for

    path = find_toy(model)
    if path is None:
        raise OptionError(f"{model}: the {_name(centred)} metric is estimated on data for compscope's toy models only; "
                          "for another model pass compscope.core.metrics.activations(second moments)")
    return _toy_metric(runner_for(path, device=device), sequences, half, seed, ridge, centred=centred,
                       shrinkage=_shrinkage(shrinkage))


def _shrinkage(shrinkage: str) -> str:
    """``shrinkage`` checked: one of ``SHRINKAGES``."""
    if shrinkage not in SHRINKAGES:
        raise OptionError(f"shrinkage={shrinkage!r}: expected one of {', '.join(SHRINKAGES)}")
    return shrinkage


def _name(centred: bool) -> str:
    return "covariance" if centred else "activations"


def _toy_metric(runner, sequences: int, half: int, seed: int, ridge: float, hw=None, centred: bool = False,
                shrinkage: str | None = None) -> Metric:
    """The activations (or covariance) metric of a toy runner's model on held-out repeated random
    sequences, for the heads of ``hw`` (default the runner's)."""
    from ..toy.storage import held_out_repeats

    tokens = held_out_repeats(runner.model, sequences, half, seed)
    G = runner_second_moments(runner, tokens, batch_size=sequences, hw=hw, centred=centred, shrinkage=shrinkage)
    return activations(G, ridge, _name(centred))


@dataclass(frozen=True)
class ResidualSums:
    """What :func:`runner_second_moments` summed over ``tokens`` for the heads of ``hw``, ``batch_size``
    sequences at a time: per layer ``Σ x xᵀ`` (``acc``) and ``Σ x`` (``total``), float64, over
    ``count`` positions."""

    hw: object
    tokens: Tensor
    batch_size: int
    acc: dict[int, Tensor]
    total: dict[int, Tensor]
    count: int
    #: per layer ``Σ |x|⁴`` and ``Σ |x|² x`` (for the Ledoit–Wolf intensity)
    quartic: dict[int, Tensor]
    weighted: dict[int, Tensor]
    #: :meth:`ledoit_wolf` by ``(layer, centred)``, made once (the metric and its description read it)
    shrunk: dict = field(default_factory=dict, compare=False, repr=False)

    def serves(self, hw, tokens: Tensor, batch_size: int) -> bool:
        """Whether these are the sums for heads that read the same (:func:`~compscope.core.attention.same_reads`:
        QK-norm linearised or not, say), the same tokens and batches."""
        from ..core.attention import same_reads

        return (self.batch_size == batch_size and self.tokens.shape == tokens.shape
                and bool(torch.equal(self.tokens, tokens)) and same_reads(self.hw, hw))

    def mean(self, layer: int) -> Tensor:
        """``E[x]`` of ``layer``, float64 where the sums are."""
        return self.total[layer] / self.count

    def moment(self, layer: int, centred: bool) -> Tensor:
        """``E[x xᵀ]`` of ``layer`` (``E[(x − μ)(x − μ)ᵀ]`` with ``centred``), float64 where the sums are."""
        G = self.acc[layer] / self.count
        return _centre(G, self.total[layer], self.count) if centred else G

    def fourth(self, layer: int, centred: bool) -> Tensor:
        """``Σ |y|⁴`` over the positions, ``y = x`` (``x − μ`` with ``centred``: expanded in the sums,
        ``|x − μ|² = a − 2b + c`` with ``a = |x|²``, ``b = xᵀμ``, ``c = |μ|²``, ``Σ b = n c``)."""
        q = self.quartic[layer]
        if not centred:
            return q
        n, A = self.count, self.acc[layer]
        mu = self.total[layer] / n
        c = mu @ mu
        return q + 4 * (mu @ A @ mu) - 4 * (self.weighted[layer] @ mu) + 2 * c * torch.trace(A) - 3 * n * c * c

    def ledoit_wolf(self, layer: int, centred: bool) -> tuple[Tensor, float]:
        """``((1 − ρ) S + ρ m I, ρ)`` for the sample moment ``S`` of ``layer`` (:meth:`moment`),
        ``m = tr S / d``, and the Ledoit–Wolf intensity ``ρ = min(b̄², δ²) / δ²`` with
        ``δ² = |S − m I|² / d`` and ``b̄² = Σ_k |y_k y_kᵀ − S|² / (n² d) = (Σ_k |y_k|⁴ − n |S|²) / (n² d)``
        (Frobenius norms; Ledoit and Wolf 2004, "A well-conditioned estimator for large-dimensional
        covariance matrices"). ``ρ = 0`` when ``S`` is already a multiple of the identity."""
        if (layer, centred) not in self.shrunk:
            self.shrunk[layer, centred] = self._ledoit_wolf(layer, centred)
        return self.shrunk[layer, centred]

    def _ledoit_wolf(self, layer: int, centred: bool) -> tuple[Tensor, float]:
        S = self.moment(layer, centred)
        n, d = self.count, S.shape[0]
        m = torch.trace(S) / d
        delta2 = float(((S - m * torch.eye(d, dtype=S.dtype, device=S.device)) ** 2).sum()) / d
        if delta2 <= 0:
            return S, 0.0
        beta2 = max(0.0, float(self.fourth(layer, centred) - n * (S ** 2).sum()) / (n * n * d))
        rho = min(beta2, delta2) / delta2
        return (1 - rho) * S + rho * m * torch.eye(d, dtype=S.dtype, device=S.device), rho


@torch.no_grad()
def runner_second_moments(runner, tokens: Tensor, batch_size: int = 16, hw=None,
                          centred: bool = False, shrinkage: str | None = None) -> dict[int, Tensor]:
    """``{layer: (d, d)}`` float64 second moments of what each layer's heads read, for any runner
    on ``tokens: (batch, seq)``, ``batch_size`` sequences at a time; with ``centred``, central ones
    (covariances); with ``shrinkage='ledoit-wolf'``, each shrunk by its Ledoit–Wolf intensity
    (:meth:`ResidualSums.ledoit_wolf`; None or ``'none'``: the sample moment, this building block's
    default, where the metrics made from it shrink by default). ``hw``: the weights whose heads read
    (default the runner's; with norm gains folded the heads read the norm's output without its gain). The sums of the latest call stay on
    the runner: the same tokens and heads again (the covariance after the second moment, an
    ``-own`` variant after its metric) do not run the model again."""
    from ..core.attention import read_input
    from ..progress import progress_bar

    check_tokens(tokens)
    if shrinkage is not None:
        _shrinkage(shrinkage)
    hw = runner.weights_here(hw)
    memo = runner._moments
    if memo is None or not memo.serves(hw, tokens, batch_size):
        def zeros(*shape):
            return {l: torch.zeros(*shape, dtype=torch.float64, device=runner.device) for l in range(hw.n_layers)}

        acc, total, quartic, weighted = zeros(hw.d_model, hw.d_model), zeros(hw.d_model), zeros(()), zeros(hw.d_model)
        count = 0
        bar = progress_bar(tokens.shape[0], "residual moments", enabled=runner.progress)
        for b0 in range(0, tokens.shape[0], batch_size):
            tr = runner.trace(tokens[b0 : b0 + batch_size])
            for l in range(hw.n_layers):
                x = read_input(hw, l, tr.resid[l]).reshape(-1, hw.d_model).double()
                sq = (x * x).sum(1)
                acc[l] += x.T @ x
                total[l] += x.sum(0)
                quartic[l] += (sq * sq).sum()
                weighted[l] += sq @ x
            count += tr.resid[0].shape[0] * tr.resid[0].shape[1]
            bar.update(tr.resid[0].shape[0])
        bar.close()
        memo = runner._moments = ResidualSums(hw, tokens.clone(), batch_size, acc, total, count, quartic, weighted)
    if shrinkage == "ledoit-wolf":
        return {l: memo.ledoit_wolf(l, centred)[0].cpu().clone() for l in memo.acc}  # the kept one stays as it is
    return {l: memo.moment(l, centred).cpu() for l in memo.acc}


def data_activation_metric(runner, sequences: int = TEXT_SEQUENCES, seq_len: int = TEXT_LENGTH, seed: int = METRIC_SEED,
                           ridge: float = DEFAULT_RIDGE, hw=None, centred: bool = False,
                           shrinkage: str = SHRINKAGES[0], corpus: str | None = None) -> Metric:
    """The ``activations`` metric (``covariance`` with ``centred``) of a runner's model: on natural
    text when it has a tokenizer (``sequences`` of ``seq_len`` tokens, at most the model's
    context; ``corpus``: a text file's instead of the docstrings), else on held-out repeated random
    sequences; each layer's ``G`` shrunk by Ledoit–Wolf as by default (``shrinkage='none'``: the
    sample moment; :func:`runner_second_moments`)."""
    tokens = metric_tokens(runner, sequences, seq_len, seed, corpus)
    return activations(runner_second_moments(runner, tokens, hw=hw, centred=centred, shrinkage=_shrinkage(shrinkage)),
                       ridge, _name(centred))


def metric_tokens(runner, sequences: int, seq_len: int, seed: int, corpus: str | None = None) -> Tensor:
    """``(sequences, seq_len)`` tokens the residual statistics are estimated on (:func:`tokens_data`
    says what they are): natural text when the runner has a tokenizer (``seq_len`` at most the
    model's context; the file ``corpus``'s, else the docstrings), else repeated random sequences
    ``[t, t]`` without the model's special tokens (:meth:`Runner.special_ids`, as the verdict's; a corpus given is
    then refused)."""
    from .sequences import natural_text, repeats
    from .tokenizers import check_token_ids

    seq_len = _within_context(runner, seq_len)
    if runner.tokenizer is not None or corpus is not None:
        tokens = natural_text(runner.tokenizer, sequences, seq_len, seed, runner.bos, corpus)
        # every token of the text: another model's tokenizer may pass runner_for's probe
        check_token_ids(tokens, runner.hw.n_vocab, runner.hw.meta.name, "the tokenizer")
        return tokens
    return repeats(sequences, _repeat_half(runner, seq_len), runner.hw.n_vocab, seed, runner.bos,
                   avoid=runner.special_ids()).tokens


def has_text(runner) -> bool:
    """Whether ``runner``'s model takes natural text (it has a tokenizer); a model without one is
    given repeated random sequences instead, which a toy model's documentation says and a
    HuggingFace model's users do not expect (so its verdict says it)."""
    from .runner import ToyRunner

    return runner.tokenizer is not None or isinstance(runner, ToyRunner)


def tokens_data(runner, sequences: int, seq_len: int, seed: int, corpus: str | None = None) -> str:
    """What :func:`metric_tokens` gives for these arguments, in words (recorded with results)."""
    from .sequences import corpus_words
    from .tokenizers import check_tokenizer

    seq_len = _within_context(runner, seq_len)
    if runner.tokenizer is not None or corpus is not None:
        check_tokenizer(runner.tokenizer, corpus)
        by = f", tokenised by {runner.tokenizer_given}" if runner.tokenizer_given else ""  # not the model's own
        return f"{sequences} sequences of {seq_len} tokens of {corpus_words(corpus)} (seed {seed}){by}"
    return f"{sequences} repeated random sequences [t, t], |t| = {_repeat_half(runner, seq_len)} (seed {seed})"


def _within_context(runner, seq_len: int) -> int:
    return seq_len if runner.n_ctx is None else min(seq_len, runner.n_ctx)


def _token_length(runner, seq_len: int) -> int:
    """The length of the sequences :func:`metric_tokens` gives for ``seq_len``."""
    seq_len = _within_context(runner, seq_len)
    return seq_len if runner.tokenizer is not None else (runner.bos is not None) + 2 * _repeat_half(runner, seq_len)


def _repeat_half(runner, seq_len: int) -> int:
    """``|t|`` of repeated sequences ``[bos] t t`` of at most ``seq_len`` tokens (at least 2)."""
    return max(2, (seq_len - (runner.bos is not None)) // 2)


#: how many samples per layer :func:`residual_samples` keeps, from how many sequences
CONTENT_SAMPLES, CONTENT_SEQUENCES = 1024, 16


@dataclass(frozen=True)
class SampleData:
    """What the residual is sampled on where compscope needs the heads' operating point rather
    than the residual's moments: the ``activations`` content of the rotary, ALiBi or relative-position previous-token score
    (``positions`` residuals per layer, drawn from every position after the first) and the mean
    Jacobians of the norms that :func:`~compscope.data.norm_linearisation.linearise_norms`
    replaces (every position after the first); and the heads' labels on text (``validate``'s
    ``text_labels``). ``sequences`` of ``length`` tokens as the metrics'
    text (:func:`metric_tokens`: natural text, or repeated random sequences for a model without a
    tokenizer), ``seed`` picking them and the positions; ``corpus``: a UTF-8 text file to take the
    text from instead of the docstrings. None leaves the default: 16 sequences of 128 tokens (at
    most the model's context), 1024 positions, seed 12346."""

    sequences: int | None = None
    length: int | None = None
    seed: int | None = None
    positions: int | None = None
    corpus: str | None = None

    def __post_init__(self) -> None:
        _check_fields(self, "sample data", (("sequences", 1), ("length", 4), ("seed", 0), ("positions", 1)))
        _check_corpus(self, "sample data")

    def resolved(self, runner=None) -> tuple[int, int, int, int]:
        """``(sequences, length, seed, positions)``, the defaults filled in; with ``runner``, a
        length given that its model cannot take is refused (the default is cut to fit)."""
        if runner is not None:
            _check_fits(runner, self.length, "sample data")
        return (self.sequences or CONTENT_SEQUENCES, self.length or TEXT_LENGTH,
                METRIC_SEED if self.seed is None else self.seed, self.positions or CONTENT_SAMPLES)

    def recorded(self) -> dict:
        """The fields with the defaults filled in, as a run records them (``corpus`` only where given)."""
        names = [f.name for f in fields(self) if f.name != "corpus"]  # resolved()'s order
        return {**dict(zip(names, self.resolved(), strict=True)), **({"corpus": self.corpus} if self.corpus else {})}

    def tokens(self, runner) -> Tensor:
        """The ``(sequences, length)`` tokens of ``runner``'s model these samples are taken on."""
        n, length, seed, _ = self.resolved(runner)
        return metric_tokens(runner, n, length, seed, self.corpus)

    def text(self, runner) -> str:
        """What :meth:`tokens` gives, in words."""
        n, length, seed, _ = self.resolved(runner)
        return tokens_data(runner, n, length, seed, self.corpus)

    def content(self, runner) -> str:
        """What the ``activations`` content is sampled on, in words (recorded)."""
        n, length, _, k = self.resolved(runner)
        there = n * (_token_length(runner, length) - 1)
        drawn = f"{k} of the {there} positions after the first, drawn by the same seed" if k < there \
            else f"all {there} positions after the first"
        return f"{self.text(runner)}; {drawn}"


def as_sample_data(data) -> SampleData:
    """``data`` as a :class:`SampleData` (None: the defaults); anything else is refused."""
    return _as(data, SampleData, "sample data")


@torch.no_grad()
def residual_samples(runner, tokens: Tensor, n: int = CONTENT_SAMPLES, seed: int = METRIC_SEED, batch_size: int = 16,
                     hw=None, progress: bool = True) -> dict[int, Tensor]:
    """``{layer: (n, d_model)}`` float32 samples of what each layer's heads read (as
    :func:`runner_second_moments`), at every position but the first (the first token is where
    attention sinks, not content), ``n`` drawn without replacement (``seed``; all of them when
    there are fewer)."""
    from ..core.attention import read_input
    from ..progress import progress_bar

    hw = runner.weights_here(hw)
    if check_tokens(tokens).shape[1] < 2:
        raise OptionError(f"residual samples need (batch, seq) tokens with seq >= 2, got shape {tuple(tokens.shape)}")
    xs: dict[int, list[Tensor]] = {l: [] for l in range(hw.n_layers)}
    bar = progress_bar(tokens.shape[0], "residual samples", enabled=progress)
    for b0 in range(0, tokens.shape[0], batch_size):
        tr = runner.trace(tokens[b0 : b0 + batch_size])
        for l in range(hw.n_layers):
            xs[l].append(read_input(hw, l, tr.resid[l])[:, 1:].reshape(-1, hw.d_model).float().cpu())
        bar.update(tr.tokens.shape[0])
    bar.close()
    total = sum(x.shape[0] for x in xs[0])
    keep = torch.randperm(total, generator=torch.Generator().manual_seed(seed))[:n]
    return {l: torch.cat(x)[keep] for l, x in xs.items()}


def content_runner(hw, model):
    """The runner that samples the content of ``hw``'s heads: ``model`` itself when a runner, else
    one for it (a name or folder; the model runs unprocessed, with ``hw`` when that is unprocessed)."""
    from .runner import Runner, runner_for

    if model is None or model is hw:
        raise OptionError("the activations content is sampled by running the model: pass the model itself "
                          "(a name or folder), not HeadWeights")
    return model if isinstance(model, Runner) else runner_for(model, None if hw.meta.processed_here else hw)


def content_samples(hw, model, data: SampleData | None = None, progress: bool = True) -> dict[int, Tensor]:
    """:func:`residual_samples` of ``model`` (a runner, or a name or folder :func:`runner_for`
    runs) on ``data`` (:class:`SampleData`; default 1024 positions of 16 sequences of 128 tokens
    of the metrics' text, :func:`metric_tokens`), as ``hw``'s heads read (processed or not; the
    model runs unprocessed)."""
    data = as_sample_data(data)
    runner = content_runner(hw, model)
    _, _, seed, positions = data.resolved(runner)
    return residual_samples(runner, data.tokens(runner), positions, seed=seed, hw=hw, progress=progress)


def activations_metric(hw, ridge: float, model, device=None, centred: bool = False, own_reads: bool = False,
                       data: MetricData | None = None) -> Metric:
    """The registered ``activations`` metric (``compscope.core.metrics.METRICS``; ``covariance``
    with ``centred``; the ``-own`` variants with ``own_reads``, each reading factor in the ``G`` of
    its own layer): estimated on data for ``model``, which must be the source ``hw`` was loaded
    from (a name or folder) or a runner already holding the model (:mod:`compscope.data.runner`).
    ``device``: where a model loaded from files runs (default CUDA when present); a runner or model
    object runs where it is, and another device for it is refused. ``data``: what it is estimated
    on (:class:`MetricData`; default the model's default)."""
    name = _name(centred) + ("-own" if own_reads else "")
    return replace(_estimated(hw, ridge, model, device, centred, name, as_metric_data(data)), name=name, own_reads=own_reads)


def _estimated(hw, ridge: float, model, device, centred: bool, name: str, data: MetricData) -> Metric:
    """The body of :func:`activations_metric`: the metric ``_name(centred)``, ``name`` in errors."""
    from .runner import Runner, ToyRunner, runner_for

    if device is not None and isinstance(model, Runner):
        model = runner_for(model, device=device)  # the same runner, or a one-line refusal

    if isinstance(model, Runner):  # the model runs unprocessed; hw's heads (processed or not) read
        n, length, seed = data.resolved(model)
        met = (_toy_metric(model, n, length // 2, seed, ridge, hw, centred, data.estimate) if isinstance(model, ToyRunner)
               else data_activation_metric(model, n, length, seed, ridge=ridge, hw=hw, centred=centred,
                                           shrinkage=data.estimate, corpus=data.corpus))
        words = metric_data(model, data)
        if data.shrinks:  # the intensities the estimate found, kept with its sums on the runner
            rho = [model._moments.ledoit_wolf(l, centred)[1] for l in sorted(model._moments.acc)]
            low, high = f"{min(rho):.2g}", f"{max(rho):.2g}"
            words += f" {low} in every layer" if low == high else f" {low}-{high} per layer"
        return replace(met, data=words)
    if model is None or model is hw:
        raise OptionError(f"metric {name!r} is estimated on data by running the model: pass the model itself "
                          "(a name or folder) to compscope.scores, not HeadWeights, or pass a Metric from "
                          "compscope.core.metrics.activations(second moments)")
    from ..loading.builtin import find_toy

    toy = find_toy(model)
    processed = hw.meta.processed_here  # the model runs as it is; processed heads read its residual
    runner = runner_for(toy if toy is not None else model, None if toy is not None or processed else hw, device=device)
    reads = runner.hw if toy is not None and not processed else hw  # a toy's unprocessed heads: its own weights
    return _estimated(reads, ridge, runner, None, centred, name, data)


def covariance_metric(hw, ridge: float, model, device=None, data: MetricData | None = None) -> Metric:
    """The registered ``covariance`` metric: :func:`activations_metric` with the residual centred
    on its mean, ``G_l = E[(x − μ_l)(x − μ_l)ᵀ]``, on the same data."""
    return activations_metric(hw, ridge, model, device, centred=True, data=data)


def activations_own_metric(hw, ridge: float, model, device=None, data: MetricData | None = None) -> Metric:
    """The registered ``activations-own`` metric: :func:`activations_metric` with each reading
    factor in its own layer's ``G`` (the writer's ``W_V`` in ``G_{l1}``, not the reader's ``G_{l2}``)."""
    return activations_metric(hw, ridge, model, device, own_reads=True, data=data)


def covariance_own_metric(hw, ridge: float, model, device=None, data: MetricData | None = None) -> Metric:
    """The registered ``covariance-own`` metric: ``covariance`` with each reading factor in its own
    layer's ``G``."""
    return activations_metric(hw, ridge, model, device, centred=True, own_reads=True, data=data)
