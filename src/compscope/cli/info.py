"""``compscope info``: what was loaded — shapes, normalisation, positions, processing, caveats."""

from __future__ import annotations

from .common import add_model, add_processing, output_file, processing

HELP = "summarise a model's attention weights"
EXAMPLE = "example: compscope info smollm2"


def add_arguments(p) -> None:
    add_model(p)
    add_processing(p)
    p.add_argument("--out", metavar="FILE.json",
                   help="also write the card as a .json file: shapes and settings as numbers, each layer's rotary "
                        "frequencies, the processing, the notes, and the printed rows")


def run(args) -> None:
    from ..core.card import card_dict, describe
    from ..loading.sources import load
    from ..results.files import write_json

    output_file(args.out, "--out", (".json",))
    hw = load(args.model, **processing(args))
    print(describe(hw))
    if args.out:
        write_json(args.out, card_dict(hw))
