"""``memtune kb validate``: schema and cross-reference checks of knowledge/."""

from __future__ import annotations

import argparse

from .. import knowledge


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("kb", help="knowledge-base maintenance")
    kb_sub = parser.add_subparsers(dest="kb_command", required=True, metavar="ACTION")
    val = kb_sub.add_parser("validate", help="check every table against its JSON Schema and every cross-reference")
    val.add_argument("--dir", help="knowledge directory (default: the skill's knowledge/)")
    val.set_defaults(func=run_validate)


def run_validate(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir)
    problems = knowledge.validate(kb)
    for line in problems:
        print(line)
    counts = ", ".join(f"{len(kb.entries(t))} {t}" for t in kb.index["tables"])
    print(f"knowledge base {kb.version}: {'INVALID' if problems else 'valid'} ({counts})")
    return 1 if problems else 0
