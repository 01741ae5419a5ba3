"""Train a toy transformer on induction data, with checkpoints on a log-spaced schedule.

A run folder holds::

    run.json                 model, data and training configs; torch version
    log.jsonl                one line per checkpoint: step, train loss, held-out in-context
                             losses, per-head induction and previous-token scores
    checkpoints/step_NNNNNN/ toy model folders (``toy.json`` + ``model.safetensors``)
    final/                   the final model (same tensors as the last checkpoint)

Deterministic under the seeds: weights from ``seed``, batches from ``seed + 1``, held-out
sequences from ``eval_seed``; no dropout; one thread count per run (``threads``).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .. import __version__
from ..errors import OptionError
from ..data.head_labels import HeadLabels, label_heads
from ..progress import progress_bar
from .data import DataConfig, InductionData, repeated_random
from .model import ToyConfig, ToyTransformer
from .storage import save_toy


@dataclass(frozen=True)
class TrainConfig:
    """Adam with linear warm-up then constant ``lr``; ``n_checkpoints`` log-spaced steps."""

    steps: int = 3000
    batch_size: int = 32
    lr: float = 1e-3
    warmup: int = 50
    weight_decay: float = 0.0
    seed: int = 0
    n_checkpoints: int = 40
    eval_sequences: int = 64
    eval_half: int = 24
    eval_seed: int = 10_000
    threads: int = 1

    def __post_init__(self) -> None:
        for f in ("steps", "batch_size", "n_checkpoints", "eval_sequences", "eval_half", "threads"):
            if getattr(self, f) < 1:
                raise OptionError(f"train config {f}={getattr(self, f)}: expected a positive integer")
        if not self.lr > 0 or self.warmup < 0 or self.weight_decay < 0:
            raise OptionError("train config: lr must be positive, warmup and weight_decay non-negative")


@dataclass(frozen=True)
class Preset:
    model: ToyConfig
    data: DataConfig
    train: TrainConfig
    about: str = ""


#: Named runs. ``induction-2l`` trains the built-in default model.
PRESETS = {
    "induction-2l": Preset(
        ToyConfig(n_layers=2, n_heads=4, d_model=64, d_head=16, d_vocab=64, n_ctx=64),
        DataConfig(d_vocab=64, n_ctx=64, span_min=8, span_max=32),
        TrainConfig(steps=4000, lr=3e-3, n_checkpoints=100),
        "2-layer attention-only, 4 heads of width 16, d_model 64, 64 tokens, learned positions, no norm",
    ),
    "tiny": Preset(
        ToyConfig(n_layers=2, n_heads=2, d_model=16, d_head=8, d_vocab=16, n_ctx=16),
        DataConfig(d_vocab=16, n_ctx=16, span_min=3, span_max=6),
        TrainConfig(steps=30, batch_size=8, n_checkpoints=6, eval_sequences=8, eval_half=6),
        "seconds-long smoke run",
    ),
}


def checkpoint_steps(steps: int, n: int) -> list[int]:
    """Step 0, ``steps``, and up to ``n - 2`` more steps log-spaced in between (distinct, sorted)."""
    if steps < 1 or n < 1:
        raise OptionError("checkpoint_steps needs steps >= 1 and n >= 1")
    out = {0, steps}
    if n > 2:
        for i in range(n - 1):
            out.add(int(round(math.exp(math.log(steps) * i / (n - 2)))))
    return sorted(s for s in out if 0 <= s <= steps)


@dataclass
class RunResult:
    folder: Path
    log: list[dict] = field(default_factory=list)

    @property
    def final(self) -> dict:
        return self.log[-1]


def _log_row(step: int, train_loss: float | None, labels: HeadLabels) -> dict:
    return {
        "step": step,
        "train_loss": train_loss,
        "loss_first": labels.loss_first,
        "loss_second": labels.loss_second,
        "icl_drop": labels.icl_drop,
        "induction": [[round(float(x), 6) for x in row] for row in labels.induction],
        "previous": [[round(float(x), 6) for x in row] for row in labels.previous],
    }


def training_bytes(model_cfg: ToyConfig, train_cfg: TrainConfig) -> tuple[int, int]:
    """A lower bound on the memory a training step takes, ``(state, batch)`` bytes: the weight
    matrices with their gradients and AdamW's two moments (4 float32 copies of
    :meth:`~compscope.toy.model.ToyConfig.matrix_entries`), and one batch's attention patterns and
    logits, each with its gradient (``2 x batch x (n_ctx − 1) x (L H (n_ctx − 1) + V)`` float32)."""
    c, t = model_cfg, model_cfg.n_ctx - 1
    return 16 * c.matrix_entries(), 8 * train_cfg.batch_size * t * (c.n_layers * c.n_heads * t + c.d_vocab)


def check_fits_memory(model_cfg: ToyConfig, train_cfg: TrainConfig) -> None:
    """A run whose :func:`training_bytes` exceed the memory free is refused before it starts, by
    the sizes to change (a typo such as ``--vocab 100000000`` would otherwise fail deep inside
    torch, or be killed by the system)."""
    from ..core.memory import check_fits, gib

    state, batch = training_bytes(model_cfg, train_cfg)
    check_fits(state + batch, f"train: this run's {model_cfg.matrix_entries():,} weights with their gradients and Adam's "
               f"moments ({gib(state)}) and one batch's attention patterns and logits ({gib(batch)})",
               "make it smaller (d_model, d_vocab, n_ctx, n_heads, d_head, n_layers, batch_size: --d-model, --vocab, "
               "--n-ctx, --heads, --d-head, --layers, --batch-size)", bound="at least")


def train(
    model_cfg: ToyConfig,
    data_cfg: DataConfig,
    train_cfg: TrainConfig,
    out: str | Path,
    *,
    name: str = "toy",
    progress: bool = True,
) -> RunResult:
    """Train from scratch into the run folder ``out`` (see the module docstring)."""
    if (model_cfg.d_vocab, model_cfg.n_ctx) != (data_cfg.d_vocab, data_cfg.n_ctx):
        raise OptionError(f"model (vocab {model_cfg.d_vocab}, n_ctx {model_cfg.n_ctx}) and data "
                          f"(vocab {data_cfg.d_vocab}, n_ctx {data_cfg.n_ctx}) disagree")
    if 2 * train_cfg.eval_half > model_cfg.n_ctx:
        raise OptionError(f"eval_half={train_cfg.eval_half}: repeated sequences of 2 x {train_cfg.eval_half} exceed n_ctx={model_cfg.n_ctx}")
    check_fits_memory(model_cfg, train_cfg)
    out = Path(out)
    if (out / "log.jsonl").exists():
        raise OptionError(f"{out}: already holds a run (log.jsonl); choose a new folder")
    out.mkdir(parents=True, exist_ok=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(train_cfg.threads)
    try:
        return _train(model_cfg, data_cfg, train_cfg, out, name, progress)
    finally:
        torch.set_num_threads(threads)


def _train(model_cfg, data_cfg, train_cfg, out: Path, name: str, progress: bool) -> RunResult:
    run = {"name": name, "model": model_cfg.to_dict(), "data": data_cfg.to_dict(), "train": asdict(train_cfg), "torch": torch.__version__,
           "compscope": __version__}
    (out / "run.json").write_text(json.dumps(run, indent=1))
    model = ToyTransformer(model_cfg, seed=train_cfg.seed)
    data = InductionData(data_cfg, seed=train_cfg.seed + 1)
    held_out = repeated_random(train_cfg.eval_sequences, train_cfg.eval_half, model_cfg.d_vocab, train_cfg.eval_seed)
    opt = torch.optim.AdamW(model.parameters(), lr=train_cfg.lr, weight_decay=train_cfg.weight_decay)
    save_at = set(checkpoint_steps(train_cfg.steps, train_cfg.n_checkpoints))
    result = RunResult(out)
    info = {"run": name, "seed": train_cfg.seed}
    recent: list[float] = []
    bar = progress_bar(train_cfg.steps, f"training {name}", enabled=progress)
    with open(out / "log.jsonl", "w") as log:
        for step in range(train_cfg.steps + 1):
            if step in save_at:
                model.eval()
                row = _log_row(step, sum(recent) / len(recent) if recent else None, label_heads(model, held_out))
                recent = []
                log.write(json.dumps(row) + "\n")
                log.flush()
                result.log.append(row)
                save_toy(model, out / "checkpoints" / f"step_{step:06d}", name=name, step=step, info=info)
                model.train()
            if step == train_cfg.steps:
                break
            for g in opt.param_groups:
                g["lr"] = train_cfg.lr * min(1.0, (step + 1) / max(1, train_cfg.warmup))
            tokens = data.batch(train_cfg.batch_size).tokens
            logits = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            recent.append(loss.item())
            bar.update(1)
            if step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
    bar.close()
    save_toy(model, out / "final", name=name, step=train_cfg.steps, info=info)
    return result


def read_log(folder: str | Path) -> list[dict]:
    """The rows of a run's ``log.jsonl``, in step order."""
    file = Path(folder) / "log.jsonl"
    try:
        rows = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise OptionError(f"{file}: cannot read the training log ({e})") from e
    return sorted(rows, key=lambda r: r["step"])
