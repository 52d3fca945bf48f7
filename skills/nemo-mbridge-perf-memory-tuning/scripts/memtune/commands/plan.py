"""``memtune plan``: the parallel layouts of a model on a cluster that fit, best expected throughput first."""

from __future__ import annotations

import argparse
import gc
from pathlib import Path

from .. import knowledge
from ..errors import UserError
from ..facts import TrainingConfig
from . import argtypes, htmlopt

EPILOG = """examples:
  memtune plan --model llama3-70b --gpu H100 --gpus 32 --seq-length 4096 --global-batch-size 32 --task sft \\
      --set mixed_precision=bf16_with_fp8_current_scaling_mixed
  memtune plan --hf-config config.json --gpu H200 --gpus 64 --seq-length 8192 --global-batch-size 512 --format json
  memtune plan --config run_config.yaml --gpu H100 --gpus 32 --top 10    (also ranks the config's own layout)

exit codes: 0 plan printed (also when nothing fits), 2 bad input."""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "plan", help="rank the layouts (TP/PP/VPP/CP/EP, micro-batch, recompute, offload) that fit in memory",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    model = parser.add_argument_group("model (one of --model, --hf-config, --config)")
    model.add_argument("--model", help="architecture preset from knowledge/models.yaml, e.g. llama3-70b")
    model.add_argument("--hf-config", type=Path, help="Hugging Face config.json")
    model.add_argument("--config", type=Path,
                       help="Bridge run config YAML or Megatron-LM args (its layout is ranked too)")
    model.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="Bridge override for the fixed settings, "
                       "e.g. mixed_precision=bf16_with_fp8_current_scaling_mixed")
    cluster = parser.add_argument_group("cluster and batch")
    cluster.add_argument("--gpu", required=True, help="GPU type, e.g. H100, H200, B200, GB200")
    cluster.add_argument("--gpus", type=argtypes.count(1, argtypes.MAX_GPUS), required=True, help="number of GPUs")
    cluster.add_argument("--gpus-per-node", type=argtypes.count(1, 1024),
                         help="GPUs in one NVLink domain (default: from knowledge/gpus.yaml)")
    cluster.add_argument("--capacity-gib", type=argtypes.number(0, 1 << 20, low_open=True),
                         help="usable memory per GPU, when the GPU table has none")
    cluster.add_argument("--seq-length", type=argtypes.count(1, 1 << 30),
                         help="sequence length (default: the config's)")
    cluster.add_argument("--global-batch-size", type=argtypes.count(), help="global batch size (default: the config's)")
    cluster.add_argument("--task", choices=["pretrain", "sft", "lora"], help="default: the config's, else pretrain")
    cluster.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                         help="environment of the run, checked against the constraints (repeatable)")
    search = parser.add_argument_group("search and output")
    search.add_argument("--headroom", type=argtypes.number(0, 0.9),
                        help="fraction of capacity kept free (default: the estimator's mean error on measured runs of "
                        "the model's class, dense, MoE or LoRA: knowledge/estimator.yaml estimate-error-band)")
    search.add_argument("--expandable-segments", action=argparse.BooleanOptionalAction, default=True,
                        help="assume PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                        "(less allocator slack; default on)")
    search.add_argument("--allow-cross-node-tp", action="store_true", help="also try TP beyond one NVLink domain")
    search.add_argument("--top", type=argtypes.count(1, 100_000), default=5, help="layouts to show (default 5)")
    search.add_argument("--all", action="store_true",
                        help="decide every candidate: detail the first --top, then list every layout that fits, one "
                        "row each")
    search.add_argument("--format", choices=["markdown", "json"], default="markdown")
    search.add_argument("--lang", choices=["en", "zh"], default="en")
    search.add_argument("--output", type=Path, help="write the answer to this file instead of stdout")
    htmlopt.add_argument(search)
    parser.set_defaults(func=run)


def base_config(args: argparse.Namespace, kb: knowledge.Knowledge) -> TrainingConfig:
    """The model and fixed settings: a preset, an HF config or a run config, then ``--set`` on top."""
    from dataclasses import replace

    from ..defaults import fill_unstated
    from ..estimator.models import find, preset
    from ..inputs.config import apply_sets, read_config
    from ..inputs.hf_config import read_hf_config

    given = [a for a in (args.model, args.hf_config, args.config) if a]
    if not given:
        raise UserError("plan: give the model with --model NAME, --hf-config FILE or --config FILE")
    if args.config:
        cfg = apply_sets(read_config(args.config, [], kb=kb), args.overrides, kb)
        if args.model:
            cfg = replace(cfg, model_name=_find(find, args.model, kb)["id"])
    else:
        cfg = read_hf_config(args.hf_config, kb) if args.hf_config else preset(_find(find, args.model, kb)["id"], kb)
        cfg = apply_sets(cfg, args.overrides, kb)
    return fill_unstated(cfg, kb)


def _find(find, name: str, kb: knowledge.Knowledge) -> dict:
    try:
        return find(name, kb)
    except LookupError as exc:
        raise UserError(f"--model: {exc}") from None


def request_from_args(args: argparse.Namespace, kb: knowledge.Knowledge):
    from ..inputs.gpu import GIB, lookup_gpu
    from ..inputs.launch_env import read_env
    from ..planner.search import PlanRequest

    base = base_config(args, kb)
    gpu = lookup_gpu(args.gpu, kb)
    if args.capacity_gib:
        gpu.capacity_bytes = args.capacity_gib * GIB
    if not gpu.capacity_bytes:
        raise UserError(f"--gpu {args.gpu!r}: capacity unknown; give the card's size (e.g. --gpu '{gpu.name} 48GB') "
                        "or --capacity-gib")
    seq = args.seq_length or base.seq_length
    gbs = args.global_batch_size or base.global_batch_size
    if not seq or not gbs:
        raise UserError("plan: give --seq-length and --global-batch-size (or a config that sets them)")
    if args.top < 1:
        raise UserError(f"--top {args.top}: give 1 or more")
    task = args.task or (base.task if base.task in ("pretrain", "sft", "lora") else "pretrain")
    return PlanRequest(
        base=base, gpu=gpu, gpus=args.gpus, seq_length=int(seq), global_batch_size=int(gbs), task=task,
        headroom=args.headroom, expandable_segments=args.expandable_segments, gpus_per_node=args.gpus_per_node,
        allow_cross_node_tp=args.allow_cross_node_tp, env=read_env(args.env, kb=kb),
        top=None if args.all else args.top,
    )


def run(args: argparse.Namespace) -> int:
    """The plan command, with the cyclic collector off until its answer is written and freed: an ``--all`` plan
    holds ~10^6 small objects, none in a cycle, that the collector would only re-scan (a second or more on the
    larger plans); once ``_run`` returns they are freed by reference counting, so turning it back on costs
    nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run(args)
    finally:
        if was_enabled:
            gc.enable()


def _run(args: argparse.Namespace) -> int:
    from ..planner.search import plan
    from ..render import out
    from ..render.plan import json_chunks, markdown_chunks, to_dict

    kb = knowledge.load()
    request = request_from_args(args, kb)
    data = to_dict(plan(request, kb), request, kb, args.lang, detail=args.top)
    chunks = json_chunks(data) if args.format == "json" else markdown_chunks(data, kb, args.lang)
    if args.output:
        out.write_new_file(args.output, chunks)
    else:
        out.emit_chunks(chunks)
    if args.html:
        from ..render import html

        htmlopt.write(args.html, html.plan_page(data, kb, args.lang))
    return 0
