"""``memtune diagnose``: evidence in, ranked causes / fixes / things to avoid out (Markdown or JSON)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import knowledge, pipeline, report
from ..errors import UserError
from ..knowledge import Knowledge
from ..render import out
from . import htmlopt

EPILOG = """examples:
  memtune diagnose --log train.log --env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  memtune diagnose --config run_config.yaml --set model.pipeline_model_parallel_size=8 --gpu H100 --format json
  memtune diagnose --question "Llama3-70B SFT on 32xH100, TP4 PP4, OOMs at 58.8 GB" --lang zh

exit codes: 0 diagnosis printed, 2 bad input (the message names the file, key or line)."""


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """The evidence options, shared with ``memtune check``."""
    parser.add_argument("--log", type=Path, help="training log or pasted OOM text (read streaming; '-' = stdin)")
    parser.add_argument("--config", type=Path,
                        help="Bridge run config YAML, Megatron-LM launch script/args, or HF config.json")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="Bridge/Hydra override, e.g. model.tensor_model_parallel_size=4 (repeatable)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="environment variable of the failing run, e.g. PYTORCH_CUDA_ALLOC_CONF=... (repeatable; "
                             "this process's own environment is never read)")
    parser.add_argument("--gpu", help="GPU type, e.g. H100-80GB, H200, A100-40GB, B200, GB200")
    parser.add_argument("--question", help="the user's question in free text (English or Chinese)")
    parser.add_argument("--snapshot", type=Path, help="PyTorch memory snapshot pickle (restricted unpickler)")
    parser.add_argument("--stats", type=Path, help="torch.cuda.memory_stats() JSON dump")
    parser.add_argument("--num-microbatches", type=positive_int,
                        help="micro-batches per step (default: from GBS / (MBS x DP))")


# What the agent read in the user's message (knowledge/situation.yaml names; --help lists them).
SITUATION_OPTIONS = (
    ("--phase", "phase", "when it failed"),
    ("--step", "step", "before training, the first step, or later"),
    ("--component", "component", "what the user names as holding memory (repeatable)"),
    ("--trend", "trend", "how memory moves over steps"),
    ("--process", "process", "what shares the GPU or memory"),
    ("--where", "where", "which ranks or pipeline stage"),
    ("--framework", "framework", "the training framework"),
)


def add_situation_arguments(parser: argparse.ArgumentParser) -> None:
    """The situation as the agent read it from the user's message; it outranks the helper's own word list."""
    group = parser.add_argument_group(
        "situation as read from the user's message (the names are listed below; each outranks what the helper "
        "reads from --question)")
    for flag, dest, what in SITUATION_OPTIONS:
        group.add_argument(flag, dest=f"situation_{dest}", action="append" if dest == "component" else "store",
                           metavar="NAME", help=what)
    group.add_argument("--changed", dest="situation_changed", action="append", default=[], metavar="TEXT",
                       help="what the user changed, upgraded, took out or already tried, in their words (repeatable)")


def situation_epilog() -> str:
    """The names each situation option takes, read from the knowledge base only when --help is printed."""
    from ..situation import known_values

    names = known_values(knowledge.load())
    lines = [f"  {flag} {{{','.join(names[dest])}}}" for flag, dest, _ in SITUATION_OPTIONS]
    return "situation names:\n" + "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diagnose", help="diagnose an OOM from its log, config, env and question",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    plain_help = parser.format_help
    parser.format_help = lambda: plain_help().rstrip("\n") + "\n\n" + situation_epilog() + "\n"  # type: ignore
    add_input_arguments(parser)
    add_situation_arguments(parser)
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown")
    htmlopt.add_argument(parser)
    parser.add_argument("--detail", action="store_true",
                        help="Markdown: every interface's lines and the sources under each fix (the lead is the same)")
    parser.add_argument("--lang", choices=["en", "zh"], help="answer language (default: the question's, else en)")
    parser.add_argument("--output", type=Path, help="write the answer to this new file (never overwrites)")
    parser.add_argument("--ranking", choices=["rules", "ledger"],
                        help="rank causes by the rules' confidences or by the ledger's deficit shares "
                             "(default: knowledge/ledger.yaml ranking)")
    parser.set_defaults(func=run)


def inputs_from_args(args: argparse.Namespace, kb: Knowledge) -> pipeline.Inputs:
    log = args.log
    stdin = log is not None and str(log) == "-"
    for label, path in (("--log", None if stdin else log), ("--config", args.config),
                        ("--snapshot", args.snapshot), ("--stats", args.stats)):
        if path is not None and not Path(path).is_file():
            raise UserError(f"{label} {path}: no such file")
    if stdin:
        log = sys.stdin  # read streaming, never copied to disk
    return pipeline.Inputs(log=log, config=args.config, overrides=args.overrides, env=args.env, gpu=args.gpu,
                           question=args.question, snapshot=args.snapshot, stats=args.stats,
                           num_microbatches=args.num_microbatches, ranking=getattr(args, "ranking", None),
                           stated=stated_from_args(args, kb))


def stated_from_args(args: argparse.Namespace, kb: Knowledge):
    """The --phase / --trend / ... values, each checked against knowledge/situation.yaml (a one-line error names
    the option and the names it takes)."""
    from ..situation import Stated, known_values

    given = {dest: vars(args).get(f"situation_{dest}") for _, dest, _ in SITUATION_OPTIONS}
    changed = [t for t in vars(args).get("situation_changed") or [] if t.strip()]
    if not any(given.values()) and not changed:
        return None
    names = known_values(kb)
    for flag, dest, _ in SITUATION_OPTIONS:
        values = given[dest] if isinstance(given[dest], list) else [given[dest]] if given[dest] else []
        for value in values:
            if value not in names[dest]:
                raise UserError(f"{flag} {value!r}: not a known name (one of: {', '.join(names[dest])})")
    return Stated(phase=given["phase"], step=given["step"], component=list(given["component"] or []),
                  trend=given["trend"], process=given["process"], where=given["where"],
                  framework=given["framework"], changed=changed)


def positive_int(text: str) -> int:
    """argparse type: a count that must be at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def run(args: argparse.Namespace) -> int:
    kb = knowledge.load()
    facts, flat, diag = pipeline.run(inputs_from_args(args, kb), kb)
    lang = args.lang or facts.question.lang or "en"
    rep = report.build(diag, flat, kb, lang, estimate=facts.estimate.get("table"))
    if args.format == "json":
        text = out.json_text(rep)
    else:
        from ..render.render import render_markdown

        text = render_markdown(rep, kb, detail=args.detail)
    if args.output:
        out.write_new_file(args.output, text)
    else:
        out.emit(text)
    if args.html:
        from ..render import html

        htmlopt.write(args.html, html.diagnose_page(rep, kb, lang))
    return 0
