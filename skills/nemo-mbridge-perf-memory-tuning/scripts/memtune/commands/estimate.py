"""``memtune estimate``: per-GPU memory of a training layout, for every pipeline stage.

The layout is assembled in this order, later sources winning: ``--model`` preset
(architecture only), ``--hf-config``, ``--config`` (Bridge YAML, Megatron-LM args
or HF config.json), ``--set`` overrides, then the explicit size flags.
"""

from __future__ import annotations

import argparse
from dataclasses import fields, replace
from pathlib import Path

from .. import knowledge
from ..errors import UserError
from ..facts import GpuFacts, TrainingConfig
from ..render import out
from . import argtypes, htmlopt

EPILOG = """examples:
  memtune estimate --model llama3-70b --set tensor_model_parallel_size=4 --set pipeline_model_parallel_size=4 \\
      --set virtual_pipeline_model_parallel_size=5 --set sequence_parallel=true --set seq_length=4096 \\
      --set use_distributed_optimizer=true --world-size 32 --global-batch-size 32 --gpu H100
  memtune estimate --config run_config.yaml --set model.recompute_granularity=full --format json
  memtune estimate --config run_config.yaml --mode bridge      # Megatron Bridge 0.6.2's own estimator

exit codes: 0 estimate printed, 2 bad input (the message names the file, key or line)."""

GIB = 2**30


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("estimate", help="per-GPU memory of a layout for every pipeline stage",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="architecture preset from knowledge/models.yaml, e.g. llama3-70b")
    parser.add_argument("--hf-config", type=Path, help="Hugging Face config.json with the architecture")
    parser.add_argument("--config", type=Path, help="Bridge run config YAML or Megatron-LM launch script/args")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override, e.g. model.tensor_model_parallel_size=4 (repeatable)")
    parser.add_argument("--dp", type=argtypes.count(1, argtypes.MAX_GPUS), help="data-parallel size")
    parser.add_argument("--world-size", type=argtypes.count(1, argtypes.MAX_GPUS),
                        help="number of GPUs (DP = world / (TP x PP x CP))")
    parser.add_argument("--num-microbatches", type=argtypes.count(), help="micro-batches per step")
    parser.add_argument("--global-batch-size", type=argtypes.count(),
                        help="global batch size (micro-batches = GBS / (MBS x DP))")
    parser.add_argument("--gpu", help="GPU type, for the capacity ratio (e.g. H100, H200, B200)")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="environment of the run, e.g. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    parser.add_argument("--mode", choices=["ours", "bridge"], default="ours",
                        help="ours (default) or bridge: Megatron Bridge 0.6.2's estimate_training_memory")
    parser.add_argument("--format", choices=["markdown", "text", "json"], default="markdown")
    parser.add_argument("--lang", choices=["en", "zh"], default="en")
    htmlopt.add_argument(parser)
    parser.set_defaults(func=run)


def build_config(args: argparse.Namespace, kb: knowledge.Knowledge) -> TrainingConfig:
    """The layout from every source the user gave, later ones winning."""
    from ..estimator.models import preset
    from ..inputs.config import apply_sets, read_config

    layers: list[TrainingConfig] = []
    if args.model:
        try:
            layers.append(preset(args.model, kb))
        except LookupError as exc:
            raise UserError(f"--model: {exc.args[0]}") from None
    if args.hf_config:
        from ..inputs.hf_config import read_hf_config

        layers.append(read_hf_config(_existing(args.hf_config, "--hf-config"), kb))
    if args.config:
        layers.append(read_config(_existing(args.config, "--config"), [], kb=kb))
    cfg = TrainingConfig(provided=True, source="overrides")
    for layer in layers:
        cfg = merge(cfg, layer)
    return finish_config(apply_sets(cfg, args.overrides, kb), args, kb)


def finish_config(cfg: TrainingConfig, args: argparse.Namespace, kb: knowledge.Knowledge) -> TrainingConfig:
    """The sizes given on the command line (``--dp`` / ``--world-size`` / ``--global-batch-size``) over the
    config, then the defaults for what nothing stated; ``compare CONFIG --set`` builds its sides the same way."""
    from ..defaults import fill_unstated

    sizes = {"data_parallel_size": args.dp, "world_size": args.world_size,
             "global_batch_size": args.global_batch_size}
    cfg = replace(cfg, **{k: v for k, v in sizes.items() if v is not None})
    if args.world_size is not None and args.dp is None:
        cfg = replace(cfg, data_parallel_size=None)
    return fill_unstated(cfg, kb)


def merge(base: TrainingConfig, over: TrainingConfig) -> TrainingConfig:
    """``over``'s known fields replace ``base``'s; warnings accumulate; the source is the last one."""
    values = {f.name: vars(over)[f.name] for f in fields(TrainingConfig)
              if f.name not in ("provided", "warnings", "env_vars") and vars(over)[f.name] is not None}
    merged = replace(base, **values)
    merged.warnings = [*base.warnings, *over.warnings]
    merged.env_vars = {**base.env_vars, **over.env_vars}
    return merged


def _existing(path: Path, label: str) -> Path:
    if not path.is_file():
        raise UserError(f"{label} {path}: no such file")
    return path


def run(args: argparse.Namespace) -> int:
    from ..defaults import refuse_invalid
    from ..estimator import estimate, summarize
    from ..inputs.launch_env import parse_pairs, read_env

    kb = knowledge.load()
    cfg = build_config(args, kb)
    gpu: GpuFacts | None = None
    if args.gpu:
        from ..inputs.gpu import lookup_gpu

        gpu = lookup_gpu(args.gpu, kb)
    env = {**cfg.env_vars, **parse_pairs(args.env)}
    unstated_breaches = refuse_invalid(cfg, read_env(args.env, config_env=cfg.env_vars, kb=kb), kb)
    est = estimate(cfg, gpu=gpu, mode=args.mode, num_microbatches=args.num_microbatches, kb=kb, env=env)
    result = est.to_dict()
    if args.mode == "ours":
        from dataclasses import asdict

        from ..estimator.sensitivity import sensitivity

        def peak_of(other: TrainingConfig) -> float:
            return estimate(other, gpu=gpu, mode="ours", num_microbatches=args.num_microbatches, kb=kb,
                            env=env).peak_bytes

        result["sensitivity"] = [asdict(s) for s in sensitivity(cfg, est.peak_bytes, peak_of, kb)]
    result["summary"] = summarize(est, gpu)
    result["gpu"] = {"name": gpu.name, "capacity_bytes": gpu.capacity_bytes, "assumption": gpu.assumption} if gpu \
        else None
    result["warnings"] = [*cfg.warnings, *unstated_breaches]
    if args.html:
        from ..render import html

        htmlopt.write(args.html, html.estimate_page(result, kb, args.lang))
    if args.format == "json":
        out.emit(out.json_text(result))
    else:
        from ..render.estimate import render

        out.emit(render(result, kb, args.lang, markdown=args.format == "markdown"))
    return 0
