"""``memtune explain ID``: print one cause, fix, constraint or rule from the knowledge base."""

from __future__ import annotations

import argparse

from .. import knowledge
from ..errors import UserError
from ..render import messages, out


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("explain", help="show the knowledge-base entry for a cause, fix, constraint or rule id")
    parser.add_argument("id")
    parser.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the heading")
    parser.set_defaults(func=run)


def find(kb: knowledge.Knowledge, ident: str) -> tuple[str, dict]:
    for table, entries in kb.by_id.items():
        if ident in entries:
            return table, entries[ident]
    known = sorted(i for t in ("causes", "fixes", "constraints") for i in kb.by_id.get(t, {}))
    raise UserError(f"unknown id {ident!r}; known cause/fix/constraint ids: {', '.join(known)}")


def run(args: argparse.Namespace) -> int:
    kb = knowledge.load()
    table, entry = find(kb, args.id)
    out.emit_lines(messages.explain(kb, args.lang, table, args.id, entry))
    return 0
