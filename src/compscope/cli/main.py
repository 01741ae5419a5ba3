"""``compscope``: the command registry, the parser built from it, and the entry point.

A command is a module of this package with ``HELP``, optional ``DESCRIPTION`` and ``EXAMPLE``,
``add_arguments(parser)`` and ``run(args) -> int | None``; it is added with one line below. Every
command takes ``--quiet`` (no progress bars), its own where it leaves out more.
Nothing here or in a command module imports torch before ``run``: ``compscope --help`` and
``compscope CMD --help`` answer at once.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from ..errors import CompscopeError
from ..registry import Registry

#: the commands, in the order ``compscope --help`` lists them
COMMANDS: Registry = Registry("command")
for _name in ("info", "models", "scores", "report", "pair", "circuits", "axioms", "gauge", "intervene", "validate", "train",
              "track", "sweep"):
    COMMANDS.lazy(_name, f"compscope.cli.{_name}")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="compscope", description="How attention heads compose (Q-, K-, V-composition), read from the weights.",
        epilog="run 'compscope CMD --help' for a command's options; with no model named, commands use the "
               "built-in induction-2l", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"compscope {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, mod in COMMANDS.items():
        p = sub.add_parser(name, help=mod.HELP, description=getattr(mod, "DESCRIPTION", mod.HELP[:1].upper() + mod.HELP[1:] + "."),
                           epilog=getattr(mod, "EXAMPLE", None), formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        if "--quiet" not in p._option_string_actions:  # report and sweep say what more theirs leaves out
            p.add_argument("--quiet", action="store_true", help="no progress bars on stderr (the results print as ever)")
        p.set_defaults(command_parser=p)  # so that an unknown option is refused by the command's own parser
    return parser


def refuse_unknown(parser: argparse.ArgumentParser, extra: list[str]) -> None:
    """Exit through ``parser`` (a command's) naming the arguments it does not take, with the nearest
    option it does take where one is close."""
    import difflib

    known = [o for o in parser._option_string_actions if o.startswith("--")]
    hints = []
    for a in extra:
        close = difflib.get_close_matches(a.split("=", 1)[0], known, n=1) if a.startswith("--") else []
        if close:
            hints.append(f"{a.split('=', 1)[0]}: did you mean {close[0]}?")
    parser.error(f"unrecognized arguments: {' '.join(extra)}" + (f" ({'; '.join(hints)})" if hints else ""))


def main(argv: list[str] | None = None) -> int:
    """Run one command; a ``CompscopeError``, or the file system refusing a read or write, becomes one
    line on stderr and exit status 2."""
    from .common import leave_model_names

    args, extra = build_parser().parse_known_args(leave_model_names(sys.argv[1:] if argv is None else argv))
    if extra:
        refuse_unknown(args.command_parser, extra)
    from ..progress import silenced

    try:
        with silenced() if args.quiet else contextlib.nullcontext():
            return COMMANDS.get(args.command).run(args) or 0
    except CompscopeError as e:
        print(f"compscope: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader of stdout went away: entry() ends quietly
        raise
    except OSError as e:  # the file system refused what the checks could not foresee: a full disk, a
        where = f"{e.filename}: " if e.filename else ""  # folder that cannot be made
        print(f"compscope: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2


def entry() -> None:
    """Console entry point: exit quietly when the reader of stdout goes away (``| head``)."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


if __name__ == "__main__":
    entry()
