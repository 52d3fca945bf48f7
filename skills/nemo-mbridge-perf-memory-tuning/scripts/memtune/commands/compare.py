"""``memtune compare A B``: what changed between two configs, two training logs or two memory snapshots.

The kind of each input is detected (compare/detect.py); both must be of one kind.  This module
only reads the inputs and hands them to the pure comparisons in memtune/compare/; render/compare.py
lays the result out.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from .. import knowledge
from ..errors import UserError
from ..textfmt import brief as _brief
from . import argtypes, htmlopt

EPILOG = """kinds (detected from the file name, else its first bytes):
  configs    Bridge config YAML, override files, Megatron-LM launch script/args (what estimate --config
             reads); or one config and --set changes for B. Both are estimated per pipeline stage and the
             difference is split over the changed settings, applied one at a time (--order).
  logs       training logs with Megatron / Bridge memory report lines: per rank and step, the first step
             where they differ by more than --tolerance, and the two OOM messages side by side.
  snapshots  torch.cuda.memory._dump_snapshot() pickles (read without running anything in them): timeline
             peaks, where the alloc/free sequences part, the sites behind the gap at the peak, --at replay.

examples:
  memtune compare old.yaml new.yaml --world-size 32 --gpu H100
  memtune compare run.yaml --set model.pipeline_model_parallel_size=2 --set model.seq_length=8192 --world-size 32
  memtune compare good.log bad.log --tolerance 1%
  memtune compare before.pickle after.pickle --at step:1 --format json

exit codes: 0 comparison printed, 2 bad input (missing or unreadable file, inputs of different kinds)."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("compare", help="regression analysis of two configs, logs or memory snapshots",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path, metavar="A", help="the reference: config, log or snapshot")
    parser.add_argument("b", type=Path, nargs="?", metavar="B", help="the one to explain (a config may be "
                        "left out when --set gives B's changes)")
    configs = parser.add_argument_group("configs")
    configs.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                         help="a change for B, e.g. model.seq_length=8192 or seq_length=8192 (repeatable)")
    configs.add_argument("--world-size", type=argtypes.count(1, argtypes.MAX_GPUS),
                         help="number of GPUs, for both (DP = world / (TP x PP x CP))")
    configs.add_argument("--dp", type=argtypes.count(1, argtypes.MAX_GPUS), help="data-parallel size, for both")
    configs.add_argument("--global-batch-size", type=argtypes.count(), help="global batch size, for both")
    configs.add_argument("--num-microbatches", type=argtypes.count(), help="micro-batches per step, for both")
    configs.add_argument("--gpu", help="GPU type, for the capacity ratio (e.g. H100, H200, B200)")
    configs.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                         help="environment of both runs, e.g. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    configs.add_argument("--metric", choices=["allocated", "with-overheads"], default="allocated",
                         help="what is attributed: the allocated peak (default) or the peak with overheads")
    configs.add_argument("--order", choices=["field", "name"], default="field",
                         help="order the changes are applied in: TrainingConfig field order (default) or by name")
    others = parser.add_argument_group("logs and snapshots")
    others.add_argument("--tolerance", default="2%",
                        help="a difference larger than this is a divergence: 2%% (default) or a size, 256MiB")
    others.add_argument("--at", metavar="TIME_US|step:N",
                        help="snapshots: memory live at this many us after each trace's first event, or at the "
                        "end of optimizer step N")
    others.add_argument("--top", type=argtypes.count(1, 1000), default=10, help="allocation sites to list")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    htmlopt.add_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..render import out
    from ..render.compare import render_text, to_json

    kb = knowledge.load()
    result = compare(args, kb)
    if args.html:
        from ..render import html

        traces = []
        if result.kind == "snapshots":  # the timelines need every event, which the comparison does not keep
            from ..inputs.snapshot_trace import load_trace

            traces = [load_trace(args.a), load_trace(args.b)]
        htmlopt.write(args.html, html.compare_page(result, kb, args.lang, traces))
    if args.format == "json":
        out.emit(out.json_text(to_json(result)))
    else:
        out.emit(render_text(result, kb, args.lang))
    return 0


def compare(args: argparse.Namespace, kb: knowledge.Knowledge) -> Any:
    """Read both inputs, check they are of one kind, and compare them."""
    kind = kind_of(args.a, kb)
    kind_b = kind_of(args.b, kb) if args.b is not None else None
    if args.b is None and not (kind == "config" and args.overrides):
        raise UserError("compare: give two files, or one config and --set changes for B")
    if kind_b is not None and kind_b != kind:
        raise UserError(f"compare: {args.a} is a {kind} but {args.b} is a {kind_b}; compare two of the same kind")
    if args.overrides and kind != "config":
        raise UserError(f"compare: --set applies to configs, but {args.a} is a {kind}")
    if args.at and kind != "snapshot":
        raise UserError(f"compare: --at applies to snapshots, but {args.a} is a {kind}")
    if kind == "config":
        return _configs(args, kb)
    from ..compare.tolerance import parse_tolerance

    tolerance = parse_tolerance(args.tolerance)
    if kind == "log":
        return _logs(args, kb, tolerance)
    return _snapshots(args, tolerance)


def kind_of(path: Path, kb: knowledge.Knowledge) -> str:
    from ..compare.detect import HEAD_BYTES, detect_kind
    from ..inputs.oom_log import compile_signatures

    if not path.is_file():
        raise UserError(f"{path}: no such file")
    try:
        with path.open("rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or exc})") from None
    p = compile_signatures(kb)
    markers = (*(t for s in p.reports for t in s.triggers), *p.alloc_triggers)
    return detect_kind(path.name, head, markers)


def _configs(args: argparse.Namespace, kb: knowledge.Knowledge) -> Any:

    from ..compare.configs import changed_fields, compare_configs
    from ..facts import TrainingConfig
    from ..inputs.config import apply_sets, read_config
    from ..inputs.launch_env import parse_pairs
    from .estimate import finish_config, merge

    parsed: dict[Path, TrainingConfig] = {}  # each file parsed once: 40 --set on a 300 KB config re-parsed it 41x

    def read(path: Path, overrides: list[str]) -> Any:
        """What estimate's build_config makes of --config PATH --set OVERRIDES and the shared sizes."""
        if path not in parsed:
            parsed[path] = merge(TrainingConfig(provided=True, source="overrides"), read_config(path, [], kb=kb))
        return finish_config(apply_sets(parsed[path], overrides, kb), args, kb)

    a = read(args.a, [])
    base_b = args.b or args.a
    b = read(base_b, args.overrides)
    given: dict[str, str] = {}
    before = read(base_b, []) if args.overrides else b
    for i, raw in enumerate(args.overrides):  # which field each --set changed, to show the user's text
        after = read(base_b, args.overrides[: i + 1])
        given.update({name: raw for name in changed_fields(before, after)})
        before = after
    gpu = None
    if args.gpu:
        from ..inputs.gpu import lookup_gpu

        gpu = lookup_gpu(args.gpu, kb)
    label_b = str(args.b) if args.b else str(args.a)
    if args.overrides:
        label_b += " + " + " ".join(f"--set {o}" for o in args.overrides)
    return compare_configs(a, b, kb, gpu=gpu, metric=args.metric, order=args.order, labels=(str(args.a), label_b),
                           given=given, num_microbatches=args.num_microbatches, env=parse_pairs(args.env))


def _logs(args: argparse.Namespace, kb: knowledge.Knowledge, tolerance: Any) -> Any:
    from ..compare.logs import LogSeries, compare_logs
    from ..inputs.memory_steps import scan_log

    runs = []
    for path in (args.a, args.b):  # one streamed read per log: its facts and its report series
        series = LogSeries()
        runs.append((scan_log(path, kb, series.add), series))
    return compare_logs(runs[0], runs[1], tolerance, labels=(str(args.a), str(args.b)))


def _snapshots(args: argparse.Namespace, tolerance: Any) -> Any:
    from ..compare.snapshots import compare_snapshots, parse_at
    from ..inputs.snapshot_trace import load_trace

    at = parse_at(_at_text(args.at)) if args.at else None
    return compare_snapshots(load_trace(args.a), load_trace(args.b), tolerance, at=at, top=args.top,
                             labels=(str(args.a), str(args.b)))


_MAX_AT_DIGITS = 19  # 10**19 us is 300,000 years of trace, and no run has that many optimizer steps


def _at_text(text: str) -> str:
    """``--at`` with no number longer than any trace: int() of a 5,000-digit one raised past the 4,300-digit limit."""
    longest = max((len(run) for run in re.findall(r"\d+", text)), default=0)
    if longest > _MAX_AT_DIGITS:
        raise UserError(f"--at {_brief(text)}: a {longest}-digit number is past any trace "
                        f"(at most {_MAX_AT_DIGITS} digits)")
    return text
