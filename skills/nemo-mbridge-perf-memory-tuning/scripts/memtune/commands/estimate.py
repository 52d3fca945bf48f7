"""``memtune estimate``: per-GPU memory of a training layout, for every pipeline stage.

The layout is assembled in this order, later sources winning: ``--model`` preset
(architecture only), ``--hf-config``, ``--config`` (Bridge YAML, Megatron-LM args
or HF config.json), ``--set`` overrides, then the explicit size flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from .. import knowledge
from ..errors import UserError
from ..facts import GpuFacts, TrainingConfig
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
    from ..defaults import fill_unstated
    from ..estimator.models import preset
    from ..inputs.config import apply_overrides, read_config

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
        layers.append(read_config(_existing(args.config, "--config"), [], kb))
    cfg = TrainingConfig(provided=True, source="overrides")
    for layer in layers:
        cfg = merge(cfg, layer)
    bare = [o for o in args.overrides if "." not in o.partition("=")[0].lstrip("+~")]
    cfg = apply_overrides(cfg, [o for o in args.overrides if o not in bare], kb)
    cfg = _apply_fields(cfg, bare)
    sizes = {"data_parallel_size": args.dp, "world_size": args.world_size,
             "global_batch_size": args.global_batch_size}
    cfg = replace(cfg, **{k: v for k, v in sizes.items() if v is not None})
    if args.world_size is not None and args.dp is None:
        cfg = replace(cfg, data_parallel_size=None)
    return fill_unstated(cfg, kb)


def _apply_fields(cfg: TrainingConfig, overrides: list[str]) -> TrainingConfig:
    """``--set field=value`` with a bare TrainingConfig field name (no Bridge section)."""
    from ..inputs.config import coerce, parse_scalar

    names = {f.name for f in fields(TrainingConfig)}
    values: dict[str, Any] = {}
    for raw in overrides:
        key, eq, value = raw.partition("=")
        key = key.strip()
        if not eq or key not in names:
            raise UserError(f"--set {raw!r}: expected section.key=value or a layout field name=value")
        values[key] = coerce(key, parse_scalar(value.strip()), f"--set {raw!r}")
    return replace(cfg, **values) if values else cfg


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
    refuse_invalid(cfg, read_env(args.env, config_env=cfg.env_vars, kb=kb), kb)
    est = estimate(cfg, gpu=gpu, mode=args.mode, num_microbatches=args.num_microbatches, kb=kb, env=env)
    result = est.to_dict()
    result["summary"] = summarize(est, gpu)
    result["gpu"] = {"name": gpu.name, "capacity_bytes": gpu.capacity_bytes} if gpu else None
    result["warnings"] = list(cfg.warnings)
    if args.html:
        from ..render import html

        t = html.labels_for(kb, args.lang)
        htmlopt.write(args.html, html.page("estimate", html.estimate_view(result, t), t, args.lang,
                                           t["html-title-estimate"]))
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False, default=str) + "\n")
    else:
        sys.stdout.write(render(result, kb, args.lang, markdown=args.format == "markdown"))
    return 0


def render(result: dict[str, Any], kb: knowledge.Knowledge, lang: str, *, markdown: bool) -> str:
    """The per-stage table (GiB), the overheads beside the allocated peak, and the assumptions."""
    from ..estimator.constants import text

    def t(ident: str) -> str:
        return text(kb, f"label-{ident}", lang)

    lines: list[str] = []
    bridge = result.get("bridge")
    heading = t("title-bridge") if result["mode"] == "bridge" else t("title")
    lines.append(f"## {heading} ({t('unit')})" if markdown else f"{heading} ({t('unit')})")
    lines.append("")
    if result["mode"] == "bridge" and bridge:
        for key, label in (("weight_and_optimizer_bytes", "bridge-weight-optimizer"),
                           ("activation_bytes", "bridge-activation"), ("total_bytes", "bridge-total")):
            lines.append(f"{'- ' if markdown else '  '}{t(label)}: {bridge[key] / GIB:.2f}")
    else:
        lines += _table(result, t("columns"), markdown)
        lines.append("")
        peak = result["breakdown"]
        lines.append(f"{t('peak')} {result['peak_stage']}: {result['peak_bytes'] / GIB:.2f} ({t('other-parts')})")
        lines.append(f"{t('beside')}: {t('slack')} {peak['allocator_slack_bytes'] / GIB:.2f}, "
                     f"{t('context')} {peak['cuda_context_bytes'] / GIB:.2f}, "
                     f"{t('nccl')} {peak['nccl_bytes'] / GIB:.2f}"
                     f" -> {t('with-overheads')} {peak['peak_with_overheads_bytes'] / GIB:.2f}")
        ratio = result["summary"].get("capacity_ratio")
        if ratio is not None and result.get("gpu"):
            lines.append(f"{result['gpu']['name']}: {ratio * 100:.1f} % {t('capacity')}")
    lines.append("")
    lines.append(f"### {t('assumptions')}" if markdown else f"{t('assumptions')}:")
    for ident in result.get("assumption_ids", []):
        lines.append(f"- {text(kb, ident, lang)}")
    for warning in result.get("warnings", []):
        lines.append(f"- {warning}")
    return "\n".join(lines) + "\n"


def _table(result: dict[str, Any], columns: str, markdown: bool) -> list[str]:
    heads = [c.strip() for c in columns.split("|")]
    rows = []
    for s in result["stages"]:
        rows.append([str(s["pp_rank"]), str(s["layers"]), "/".join(str(n) for n in s["in_flight_microbatches"]),
                     *(f"{s[k] / GIB:.2f}" for k in ("weights_bytes", "grads_bytes", "optimizer_bytes",
                                                      "activations_bytes", "logits_bytes")),
                     # other_bytes holds the logits too: the column shows the rest, so a row adds up
                     f"{(s['workspace_bytes'] + s['graph_pool_bytes']) / GIB:.2f}",
                     *(f"{s[k] / GIB:.2f}" for k in ("allocated_peak_bytes", "peak_with_overheads_bytes"))])
    if markdown:
        out = ["| " + " | ".join(heads) + " |", "|" + "---|" * 3 + "---:|" * (len(heads) - 3)]
        out += ["| " + " | ".join(r) + " |" for r in rows]
        return out
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    out = ["  ".join(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return out
