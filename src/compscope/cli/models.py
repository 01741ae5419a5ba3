"""``compscope models``: what compscope reads (built-in names, families, GGUF architectures), and why not."""

from __future__ import annotations

HELP = "the models compscope reads: built-in names, families, model types, GGUF architectures, and what it does not"
DESCRIPTION = ("The models compscope reads: its built-in names, every family with the HuggingFace model types and "
               "GGUF architectures it reads, and the architectures it knows and does not read. With NAMEs, one line "
               "for each: the family that reads it, or why not (exit status 1 if any is not read); a model's folder "
               "or .gguf file, or a hub id (owner/name, its config.json from the local cache, or downloaded alone where "
               "HF_HUB_OFFLINE is not set), is looked up by the model_type or architecture its files state; a model "
               "class's name (BartForConditionalGeneration) by its model_type.")
EXAMPLE = ("examples:\n  compscope models\n  compscope models qwen2 deepseek_v3\n"
           "  compscope models MarianMTModel facebook/bart-large\n  compscope models --markdown > models.md")


def add_arguments(p) -> None:
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="a model_type (config.json), GGUF architecture or model class, or a model's folder, .gguf file "
                        "or hub id")
    p.add_argument("--markdown", action="store_true", help="the whole catalogue as a Markdown page")


def run(args) -> int:
    from ..errors import OptionError
    from ..loading import catalogue

    if args.markdown and args.names:
        raise OptionError("--markdown writes the whole catalogue: give it without NAMEs")
    if args.markdown:
        print(catalogue.markdown(), end="")
        return 0
    if not args.names:
        print(catalogue.text())
        return 0
    answers = [catalogue.lookup_files(n) if _model_files(n) else catalogue.lookup_hub(n) if _hub_id(n)
               else catalogue.lookup(n) for n in args.names]
    for _, line in answers:
        print(line)
    return 0 if all(read for read, _ in answers) else 1


def _hub_id(name: str) -> bool:
    """Whether ``name`` is a HuggingFace hub id with its owner (``owner/name``, ``@revision`` optional)."""
    from ..loading.formats.hub import looks_like_id

    return "/" in name.split("@")[0] and looks_like_id(name)


def _model_files(name: str) -> bool:
    """Whether ``name`` is a model's files: a folder with a config.json, or a .gguf file."""
    from pathlib import Path

    path = Path(name)
    return (path / "config.json").is_file() if path.is_dir() else path.is_file() and path.suffix == ".gguf"
