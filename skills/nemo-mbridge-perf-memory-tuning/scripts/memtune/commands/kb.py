"""``memtune kb validate`` / ``memtune kb compile``: checks of knowledge/, and the cache of its parsed tables."""

from __future__ import annotations

import argparse

from .. import knowledge
from ..errors import UserError
from ..inputs.oom_log import compile_signatures
from ..render import messages, out


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("kb", help="knowledge-base maintenance")
    kb_sub = parser.add_subparsers(dest="kb_command", required=True, metavar="ACTION")
    val = kb_sub.add_parser("validate", help="check every table against its JSON Schema and every cross-reference")
    val.add_argument("--dir", help="knowledge directory (default: the skill's knowledge/)")
    val.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the status lines")
    val.set_defaults(func=run_validate)
    comp = kb_sub.add_parser(
        "compile", help="validate knowledge/ and keep its parsed tables in the user's cache (start-up speed)",
        description="Validate the YAML tables (as 'kb validate' does) and write them, with a hash of every "
        "source file, to the cache file this command names ($HOME/.cache/memtune, a private folder). Commands "
        "load that file instead of parsing the YAML while the hashes match, and parse the YAML (and refresh the "
        "cache) when a source changed, so a stale or missing cache is slower, never wrong. The skill ships no "
        "generated file; any command fills the cache on first use, this one only after validating.",
        epilog="exit codes: 0 written (or current with --check), 1 stale or missing with --check, "
        "or the KB is invalid.")
    comp.add_argument("--dir", help="knowledge directory (default: the skill's knowledge/)")
    comp.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 when the cache is missing or differs from what compile would write")
    comp.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the status lines")
    comp.set_defaults(func=run_compile)


def _problems(kb: knowledge.Knowledge) -> list[str]:
    """The tables' problems, then every log regex compiled (commands compile each on first use only)."""
    problems = knowledge.validate(kb)
    if problems:
        return problems
    try:
        compile_signatures(kb, eager=True)
    except knowledge.KnowledgeError as exc:
        return [str(exc)]
    return []


def run_validate(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir, compiled=False)
    problems = _problems(kb)
    out.emit_lines(messages.kb_summary(kb, args.lang, problems))
    return 1 if problems else 0


def run_compile(args: argparse.Namespace) -> int:
    kb = knowledge.load(args.dir, compiled=False)
    problems = _problems(kb)

    def say(ident: str, **values: object) -> None:
        out.emit(messages.line(kb, args.lang, ident, version=kb.version, tables=len(kb.tables), **values))

    if problems:
        out.emit_lines(list(problems))
        say("kb-compile-refused", file=knowledge.compiled_path(kb.root),
            action=messages.line(kb, args.lang, "kb-action-checked" if args.check else "kb-action-written"))
        return 1
    target = knowledge.compiled_path(kb.root)
    shown = str(target)
    status = knowledge.compiled_status(kb.root)
    if args.check:
        if status == "current":
            say("kb-current", file=shown)
            return 0
        say("kb-missing" if status == "missing" else "kb-stale", file=shown, command=knowledge.COMPILE_COMMAND)
        return 1
    if status == "current":
        say("kb-already-current", file=shown)
        return 0
    try:
        knowledge.store_compiled(kb)
    except OSError as exc:
        raise UserError(f"{shown}: cannot write ({exc.strerror})") from None
    except knowledge.KnowledgeError as exc:
        raise UserError(str(exc)) from None
    say("kb-wrote", file=shown)
    return 0
