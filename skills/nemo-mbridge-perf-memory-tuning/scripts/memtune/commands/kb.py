"""``memtune kb validate`` / ``memtune kb compile``: checks of knowledge/, and its compiled form."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import knowledge
from ..errors import UserError
from ..render import messages, out


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("kb", help="knowledge-base maintenance")
    kb_sub = parser.add_subparsers(dest="kb_command", required=True, metavar="ACTION")
    val = kb_sub.add_parser("validate", help="check every table against its JSON Schema and every cross-reference")
    val.add_argument("--dir", help="knowledge directory (default: the skill's knowledge/)")
    val.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the status lines")
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
    comp.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the status lines")
    comp.set_defaults(func=run_compile)


def run_validate(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir, compiled=False)
    problems = knowledge.validate(kb)
    out.emit_lines(messages.kb_summary(kb, args.lang, problems))
    return 1 if problems else 0


def run_compile(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir, compiled=False)
    problems = knowledge.validate(kb)

    def say(ident: str, **values: object) -> None:
        out.emit(messages.line(kb, args.lang, ident, version=kb.version, tables=len(kb.tables), **values))

    if problems:
        out.emit_lines(list(problems))
        say("kb-compile-refused", file=knowledge.COMPILED_NAME,
            action=messages.line(kb, args.lang, "kb-action-checked" if args.check else "kb-action-written"))
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
            say("kb-current", file=shown)
            return 0
        say("kb-missing" if current is None else "kb-stale", file=shown, command=knowledge.COMPILE_COMMAND)
        return 1
    if current == data:
        say("kb-already-current", file=shown)
        return 0
    from ..actions.safewrite import write_new

    try:
        write_new(target, data)
    except OSError as exc:
        raise UserError(f"{shown}: cannot write ({exc.strerror})") from None
    say("kb-wrote", file=shown)
    return 0


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
