"""``memtune kb validate`` / ``memtune kb compile``: checks of knowledge/, and its compiled form."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import knowledge
from ..errors import UserError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("kb", help="knowledge-base maintenance")
    kb_sub = parser.add_subparsers(dest="kb_command", required=True, metavar="ACTION")
    val = kb_sub.add_parser("validate", help="check every table against its JSON Schema and every cross-reference")
    val.add_argument("--dir", help="knowledge directory (default: the skill's knowledge/)")
    val.set_defaults(func=run_validate)
    comp = kb_sub.add_parser(
        "compile", help=f"validate knowledge/ and write {knowledge.COMPILED_NAME}, the tables every command loads",
        description=f"Validate the YAML tables (as 'kb validate' does) and write them, with a hash of every "
        f"source file, to knowledge/{knowledge.COMPILED_NAME}. Commands load that file instead of parsing the YAML "
        "while the hashes match, and parse the YAML when a source changed, so a stale file is slower, never wrong. "
        "Run it after editing knowledge/ and commit the result.",
        epilog="exit codes: 0 written (or current with --check), 1 stale or missing with --check, "
        "or the KB is invalid.")
    comp.add_argument("--dir", help="knowledge directory (default: the skill's knowledge/)")
    comp.add_argument("--check", action="store_true",
                      help=f"write nothing; exit 1 when {knowledge.COMPILED_NAME} is missing or differs from what "
                      "compile would write")
    comp.set_defaults(func=run_compile)


def run_validate(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir, compiled=False)
    problems = knowledge.validate(kb)
    for line in problems:
        print(line)
    counts = ", ".join(f"{len(kb.entries(t))} {t}" for t in kb.index["tables"])
    print(f"knowledge base {kb.version}: {'INVALID' if problems else 'valid'} ({counts})")
    return 1 if problems else 0


def run_compile(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir, compiled=False)
    problems = knowledge.validate(kb)
    if problems:
        for line in problems:
            print(line)
        print(f"knowledge base {kb.version}: INVALID, {knowledge.COMPILED_NAME} not "
              f"{'checked' if args.check else 'written'} (fix the problems above, then run 'kb compile')")
        return 1
    text = knowledge.compile_text(kb)
    target = kb.root / knowledge.COMPILED_NAME
    shown = _shown(target)
    data = text.encode("utf-8")
    try:
        current = target.read_bytes()
    except FileNotFoundError:
        current = None
    if args.check:
        if current == data:
            print(f"{shown}: current ({len(kb.tables)} tables, knowledge base {kb.version})")
            return 0
        state = "missing" if current is None else "stale (knowledge/ changed since it was compiled)"
        print(f"{shown}: {state}; run: {knowledge.COMPILE_COMMAND}")
        return 1
    if current == data:
        print(f"{shown}: already current ({len(kb.tables)} tables, knowledge base {kb.version})")
        return 0
    from ..actions.safewrite import write_new

    try:
        write_new(target, data)
    except OSError as exc:
        raise UserError(f"{shown}: cannot write ({exc.strerror})") from None
    print(f"wrote {shown} ({len(kb.tables)} tables, knowledge base {kb.version})")
    return 0


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
