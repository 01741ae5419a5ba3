"""``compscope info``: what was loaded — shapes, normalisation, positions, processing, caveats."""

from __future__ import annotations

from .common import add_model, add_processing, processing

HELP = "summarise a model's attention weights"
EXAMPLE = "example: compscope info smollm2"


def add_arguments(p) -> None:
    add_model(p)
    add_processing(p)


def run(args) -> None:
    from ..core.card import describe
    from ..loading.sources import load

    print(describe(load(args.model, **processing(args))))
