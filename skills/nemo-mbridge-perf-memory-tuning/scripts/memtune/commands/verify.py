"""``memtune verify``: the checks of knowledge/validations.yaml as a pass/fail table.

Nothing is ever started: env and config checks are evaluated over the files and
values passed, and each command step (an upstream GPU test) is printed as the
exact, shell-quoted line to run, with its directory and time limit.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import knowledge
from ..actions import verify
from ..errors import UserError

EPILOG = """examples:
  memtune verify --list
  memtune verify --launch launch.sh --config run_config.yaml
  memtune verify --only lora-regather-unit-tests --bridge-repo ~/Megatron-Bridge   (prints the line to run)

exit codes: 0 no check failed, 1 a check failed, 2 bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("verify", help="the validation checks; prints upstream test commands, starts nothing",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true",
                        help="list the checks and what each would run, then stop (text, or --format json)")
    parser.add_argument("--only", action="append", metavar="ID", help="only these checks (repeatable)")
    parser.add_argument("--bridge-repo", type=Path, help="Megatron Bridge checkout the upstream tests run in")
    parser.add_argument("--launch", type=Path, help="launch shell script the training is started with")
    parser.add_argument("--config", type=Path, help="Bridge run config YAML, Megatron-LM launch script or HF config")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="Bridge/Hydra override (repeatable)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="environment variable of the run (repeatable)")
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.set_defaults(func=run)


def gather_facts(args: argparse.Namespace, kb: knowledge.Knowledge) -> dict[str, Any]:
    """Flat facts from the evidence passed; exports before the launch command count as the run's env.

    Variables the job inherits from the calling shell are unknown unless --env says them.
    """
    flat: dict[str, Any] = {}
    env = list(args.env)
    if args.launch is not None:
        from ..actions.apply import read_target
        from ..actions.launch import compile_patterns, launch_facts

        kind, text = read_target(args.launch)
        if kind != "shell":
            raise UserError(f"--launch {args.launch}: not a shell script")
        facts = launch_facts(text, compile_patterns(verify.command_patterns(kb)))
        env = [f"{k}={v}" for k, v in facts["exports"].items()] + env
        flat.update({f"launch.{k}": v for k, v in facts.items() if k != "exports"})
    if args.config is not None or args.overrides or env:
        from .. import pipeline

        if args.config is not None and not args.config.is_file():
            raise UserError(f"--config {args.config}: no such file")
        inputs = pipeline.Inputs(config=args.config, overrides=args.overrides, env=env)
        flat.update(pipeline.collect_facts(inputs, kb).flatten())
    if args.launch is not None:
        flat["env.provided"] = True  # the script is an environment source even when it exports nothing
    return flat


def run(args: argparse.Namespace) -> int:
    from ..render import out
    from ..render import verify as view

    kb = knowledge.load()
    selected = verify.select(kb, args.only)
    values = {"bridge_repo": str(args.bridge_repo.expanduser().resolve()) if args.bridge_repo else ""}
    if args.list:
        entries = listing(selected, values, args.lang)
        out.emit(out.json_text(view.list_json(entries, kb)) if args.format == "json"
                 else view.list_text(entries, kb, args.lang))
        return 0
    flat = gather_facts(args, kb)
    results = []
    for step in selected:
        if step["kind"] != "command":
            results.append(verify.evaluate_check(step, flat, kb, args.lang))
        else:
            results.append(verify.plan_command(step, values))
    if args.format == "json":
        titles = {step["id"]: step["title"][args.lang] for step in selected}
        out.emit(out.json_text(view.results_json(results, titles, kb, args.lang)))
    else:
        out.emit(view.results_text(results, kb, args.lang))
    return 1 if any(r.status == "fail" for r in results) else 0


def listing(selected: list[dict[str, Any]], values: dict[str, str], lang: str) -> list[dict[str, Any]]:
    """What --list shows per check: its title, what it checks and, for a command step, the line to run
    (with the reason it cannot be completed yet, e.g. no --bridge-repo)."""
    entries = []
    for step in selected:
        run, note = None, None
        if step["kind"] == "command":
            try:
                run = verify.shell_line(step, *verify.command_argv(step, values))
            except verify.MissingValue as exc:
                run, note = verify.shell_line(step, list(step["argv"]), step.get("cwd")), exc.option
        entries.append({"id": step["id"], "kind": step["kind"], "title": step["title"][lang],
                        "checks": step["checks"][lang], "run": run, "run_note": note, "gpus": step.get("gpus")})
    return entries
