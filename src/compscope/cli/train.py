"""``compscope train``: options map onto a preset's ``ToyConfig``, ``DataConfig``, ``TrainConfig``."""

from __future__ import annotations

import argparse
import dataclasses

from ..errors import OptionError
from .common import output_folder

HELP = "train a toy transformer on induction data, saving log-spaced checkpoints"
DESCRIPTION = "Train a toy model from a preset; options override the preset's values."
EXAMPLE = "example: compscope train --out induction-run --steps 2000 --seed 1"
#: presets (toy.train.PRESETS), named here so that --help needs no torch (a test keeps them equal)
PRESET_NAMES = ("induction-2l", "tiny")
MAX_LAYERS = 4

# option -> (config, field)
_OVERRIDES = {
    "layers": ("model", "n_layers"), "heads": ("model", "n_heads"), "d_model": ("model", "d_model"),
    "d_head": ("model", "d_head"), "positions": ("model", "positions"), "norm": ("model", "norm"),
    "mlp": ("model", "mlp"), "tied": ("model", "tied"), "qk_norm": ("model", "qk_norm"),
    "attn_out_norm": ("model", "attn_out_norm"),
    "span_min": ("data", "span_min"), "span_max": ("data", "span_max"), "bigram": ("data", "bigram"),
    "steps": ("train", "steps"), "batch_size": ("train", "batch_size"), "lr": ("train", "lr"),
    "seed": ("train", "seed"), "checkpoints": ("train", "n_checkpoints"), "threads": ("train", "threads"),
}


def _layers(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_LAYERS:
        raise argparse.ArgumentTypeError(f"{text!r}: toy models have 1 to {MAX_LAYERS} layers")
    return int(text)


def add_arguments(p) -> None:
    p.add_argument("--preset", default="induction-2l", choices=PRESET_NAMES, help="starting configuration (default induction-2l, the built-in default model)")
    p.add_argument("--out", required=True, help="run folder to create (checkpoints/, final/, log.jsonl, run.json)")
    p.add_argument("--name", help="run name stored in the checkpoints (default: the preset)")
    g = p.add_argument_group("model")
    g.add_argument("--layers", type=_layers, help=f"1 to {MAX_LAYERS}")
    g.add_argument("--heads", type=int)
    g.add_argument("--d-model", type=int)
    g.add_argument("--d-head", type=int)
    g.add_argument("--vocab", type=int, help="vocabulary size (model and data)")
    g.add_argument("--n-ctx", type=int, help="context length (model and data)")
    g.add_argument("--positions", choices=["learned", "rotary"])
    g.add_argument("--norm", choices=["none", "layernorm", "rmsnorm"])
    g.add_argument("--mlp", action=argparse.BooleanOptionalAction, default=None, help="add MLP layers")
    g.add_argument("--tied", action=argparse.BooleanOptionalAction, default=None, help="tie W_U to W_E")
    g.add_argument("--qk-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="normalise each head's queries and keys (one gain per layer, shared by its heads), as Gemma 3 does; needs --norm")
    g.add_argument("--attn-out-norm", action=argparse.BooleanOptionalAction, default=None,
                   help="normalise what each layer's attention writes, before the residual add, as Gemma 3 does; needs --norm")
    g = p.add_argument_group("data")
    g.add_argument("--span-min", type=int, help="shortest repeated segment")
    g.add_argument("--span-max", type=int, help="longest repeated segment")
    g.add_argument("--bigram", type=float, help="share of filler tokens drawn from the bigram chain")
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int)
    g.add_argument("--batch-size", type=int)
    g.add_argument("--lr", type=float)
    g.add_argument("--seed", type=int)
    g.add_argument("--checkpoints", type=int, help="number of log-spaced checkpoints")
    g.add_argument("--threads", type=int, help="torch threads (results are reproducible for a fixed value; default 1)")


def run(args) -> None:
    from ..toy.train import PRESETS, train

    output_folder(args.out)
    preset = PRESETS[args.preset]
    changes: dict[str, dict] = {"model": {}, "data": {}, "train": {}}
    for opt, (which, field) in _OVERRIDES.items():
        v = getattr(args, opt)
        if v is not None:
            changes[which][field] = v
    for opt, field in (("vocab", "d_vocab"), ("n_ctx", "n_ctx")):
        if getattr(args, opt) is not None:
            changes["model"][field] = changes["data"][field] = getattr(args, opt)
    norm = changes["model"].get("norm", preset.model.norm)
    for flag, field in (("--qk-norm", "qk_norm"), ("--attn-out-norm", "attn_out_norm")):
        if changes["model"].get(field) and norm == "none":
            raise OptionError(f"{flag} needs a norm kind: add --norm rmsnorm (as Gemma 3) or --norm layernorm "
                              f"(the preset {args.preset!r} has none)")
    try:
        model = dataclasses.replace(preset.model, **changes["model"])
        data = dataclasses.replace(preset.data, **changes["data"])
        tcfg = dataclasses.replace(preset.train, **changes["train"])
    except TypeError as e:
        raise OptionError(str(e)) from e
    name = args.name or args.preset
    result = train(model, data, tcfg, args.out, name=name)
    print(summary(result.log, name, str(result.folder)))


def summary(log: list[dict], name: str, folder: str) -> str:
    """What ``compscope train`` prints at the end."""
    last = log[-1]
    ind = [(v, l, h) for l, row in enumerate(last["induction"]) for h, v in enumerate(row) if l >= 1]
    prev = [(v, l, h) for l, row in enumerate(last["previous"]) for h, v in enumerate(row)]
    lines = [
        f"run {name}: {last['step']} steps, {len(log)} checkpoints in {folder}/checkpoints, final model in {folder}/final",
        f"train loss (last interval)        {last['train_loss']:.3f}",
        f"held-out repeated sequences: loss on first copy {last['loss_first']:.3f}, on second copy {last['loss_second']:.3f} (drop {last['icl_drop']:.3f} nats)",
        "best previous-token head          {1}.{2}  score {0:.3f}".format(*max(prev)),
    ]
    if ind:
        lines.append("best induction head (layer >= 1)  {1}.{2}  score {0:.3f}".format(*max(ind)))
    return "\n".join(lines)
