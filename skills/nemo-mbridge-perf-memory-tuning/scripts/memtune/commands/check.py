"""``memtune check``: constraint violations of a config/env only (exit 1 when any)."""

from __future__ import annotations

import argparse

from .. import knowledge, pipeline
from ..engine import check_constraints
from .diagnose import add_input_arguments, inputs_from_args


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("check", help="check a config and env against the known constraints (exit 1 on violation)")
    add_input_arguments(parser)
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..render import check, out

    kb = knowledge.load()
    facts = pipeline.collect_facts(inputs_from_args(args, kb), kb)
    found = check.rows((v.id for v in check_constraints(facts.flatten(), kb)), kb, args.lang)
    if args.format == "json":
        out.emit(out.json_text(check.to_json(found, kb)))
    else:
        out.emit(check.render_text(found, kb, args.lang))
    return 1 if found else 0
