"""Command-line wiring only: each subcommand lives in memtune/commands/<name>.py.

A command module exposes ``register(subparsers)`` (adds its parser and sets
``func``) and keeps its work in functions the tests can call directly.
Exit codes: 0 ok, 1 a check found problems (violations, invalid KB), 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import UserError
from .knowledge import KnowledgeError

COMMAND_MODULES = ["diagnose", "check", "explain", "kb", "snapshot", "verify", "apply", "estimate", "plan"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memtune",
        description="Diagnose and fix GPU out-of-memory failures in Megatron Bridge training. "
        "Reads only the files you pass; never uses the network.",
    )
    parser.add_argument("--version", action="version", version=f"memtune {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"memtune.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (UserError, KnowledgeError) as exc:
        print(f"memtune: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
