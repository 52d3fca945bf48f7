"""``memtune check``: constraint violations of a config/env only (exit 1 when any)."""

from __future__ import annotations

import argparse
import json
import sys

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
    kb = knowledge.load()
    facts = pipeline.collect_facts(inputs_from_args(args), kb)
    violations = check_constraints(facts.flatten(), kb)
    rows = []
    for v in violations:
        con = kb.get("constraints", v.id)
        rows.append({"id": v.id, "message": con["message"][args.lang], "upstream_error": con.get("upstream_error")})
    if args.format == "json":
        json.dump({"kb_version": kb.version, "violations": rows}, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for row in rows:
            print(f"{row['id']}: {row['message']}")
        print(f"{len(rows)} violation(s)")
    return 1 if rows else 0
