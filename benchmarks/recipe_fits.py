"""Does the estimator let NVIDIA's own recipes run?  Each Bridge performance recipe's full config, estimated.

A recipe in benchmarks/recipes/bridge-perf-recipes.yaml whose published throughput was measured with the recipe's
own layout (a measured row with layout_matches_recipe true) ran on its GPU, so its real peak fits that GPU: an
estimate above the capacity is an overestimate, by at least that much.  Recipes whose published rows used another
layout are listed but not counted.  No
peak is published for them, so this is a bound, not an error: it is reported beside benchmarks/accuracy.py and
fits nothing.  Each recipe is estimated with everything it sets that the estimator reads (layout, recompute,
offload, FSDP, CUDA graphs and their allocator configuration, dispatcher, precision and optimizer dtypes);
settings it does not model are listed per recipe.

    python3 benchmarks/recipe_fits.py                 # markdown table
    python3 benchmarks/recipe_fits.py --format json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.recipe_agreement import GPU, load, recipe_settings  # noqa: E402

NOT_MODELLED = ("moe_paged_stash", "moe_expert_rank_capacity_factor", "cpu_offloading_weights")
SYMBOL = {"embedding": "E", "decoder": "t", "mtp": "m", "loss": "L"}


def layout_string(text: str | None) -> str | None:
    """A recipe's pipeline layout in Megatron-Core's string notation: Bridge writes some as Python lists
    ("[[embedding]+[decoder]*4] + [[decoder]*4]*14 + [[decoder]+[mtp]+[loss]]"), some already as strings."""
    if not text:
        return None
    text = text.split("  (")[0].strip()  # the yaml's own note after the value
    if "[" not in text:
        return text
    stages = []
    for term in re.findall(r"\[((?:\[\w+\](?:\*\d+)?\+?)+)\](?:\*(\d+))?", text.replace(" ", "")):
        inner, times = term
        stage = "".join(SYMBOL[name] * int(n or 1) for name, n in re.findall(r"\[(\w+)\](?:\*(\d+))?", inner))
        stages += [stage] * int(times or 1)
    return "|".join(stages)


def estimate_args(recipe: dict[str, Any]) -> list[str]:
    """The ``memtune estimate`` command line of a recipe's own config (``config_sets``) and its environment."""
    lay = recipe["layout"]
    args = ["estimate", "--model", recipe["model_key"], "--gpu", GPU[recipe["gpu"]],
            "--world-size", str(recipe["num_gpus"]), "--global-batch-size", str(lay["global_batch_size"]),
            *env_args(recipe)]
    for item in config_sets(recipe):
        args += ["--set", item]
    return args


def env_args(recipe: dict[str, Any]) -> list[str]:
    """The recipes' environment as ``--env`` options: their allocator configuration, NCCL graph registration off."""
    mem = recipe.get("memory") or {}
    alloc = mem.get("pytorch_cuda_alloc_conf") or ("expandable_segments:True" if mem.get("expandable_segments") else "")
    return ["--env", f"PYTORCH_CUDA_ALLOC_CONF={alloc}", "--env", "NCCL_GRAPH_REGISTER=0"]


def config_sets(recipe: dict[str, Any]) -> list[str]:
    """A recipe's own config as ``--set`` items: its layout, recompute, offload and FSDP, the settings the planner
    benchmark passes too (``recipe_settings``), and what only the estimate reads."""
    lay, mem = recipe["layout"], recipe.get("memory") or {}
    sets = [f"tensor_model_parallel_size={lay['tensor_model_parallel_size']}",
            f"pipeline_model_parallel_size={lay['pipeline_model_parallel_size']}",
            f"context_parallel_size={lay.get('context_parallel_size') or 1}",
            f"expert_model_parallel_size={lay.get('expert_model_parallel_size') or 1}",
            f"micro_batch_size={lay['micro_batch_size']}", f"seq_length={lay['seq_length']}",
            f"sequence_parallel={str(bool(lay.get('sequence_parallel'))).lower()}",
            f"use_distributed_optimizer={str(bool(mem.get('use_distributed_optimizer'))).lower()}",
            *recipe_settings(recipe)]
    if lay.get("virtual_pipeline_model_parallel_size"):
        sets.append(f"virtual_pipeline_model_parallel_size={lay['virtual_pipeline_model_parallel_size']}")
    if recipe["task"] in ("sft", "lora"):
        sets.append(f"task={recipe['task']}")
    if recipe["task"] == "lora":
        sets.append("peft=lora")
    if mem.get("recompute_granularity"):
        sets.append(f"recompute_granularity={mem['recompute_granularity']}")
        if mem.get("recompute_method"):
            sets += [f"recompute_method={mem['recompute_method']}",
                     f"recompute_num_layers={mem['recompute_num_layers']}"]
        if mem.get("recompute_modules"):
            sets.append(f"recompute_modules=[{','.join(mem['recompute_modules'])}]")
    if mem.get("cpu_offloading"):
        sets.append("cpu_offloading=true")
        if mem.get("cpu_offloading_num_layers"):
            sets.append(f"cpu_offloading_num_layers={mem['cpu_offloading_num_layers']}")
    if mem.get("fine_grained_activation_offloading") and mem.get("offload_modules"):
        sets += ["fine_grained_activation_offloading=true", f"offload_modules=[{','.join(mem['offload_modules'])}]"]
    if mem.get("use_megatron_fsdp"):
        strategy = mem.get("data_parallel_sharding_strategy") or "optim_grads_params"
        sets += ["use_megatron_fsdp=true", f"data_parallel_sharding_strategy={strategy}"]
    layout = layout_string(mem.get("pipeline_model_parallel_layout"))
    if layout:
        sets.append(f"pipeline_model_parallel_layout={layout}")
    if mem.get("account_for_embedding_in_pipeline_split"):
        sets.append("account_for_embedding_in_pipeline_split=true")
    if mem.get("account_for_loss_in_pipeline_split"):
        sets.append("account_for_loss_in_pipeline_split=true")
    if recipe["precision"] == "fp8_mx":  # Bridge's MXFP8 recipes gather FP8 parameters into the gradient buffer
        sets.append("ddp.reuse_grad_buf_for_mxfp8_param_ag=true")
    backend = str(mem.get("moe_flex_dispatcher_backend") or "").split(" ")[0]
    if recipe.get("moe") and backend:
        sets.append(f"model.moe_flex_dispatcher_backend={backend}")
    return sets


def evaluate(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe's estimated peak (with allocator and CUDA overheads) over its GPU's usable capacity."""
    from memtune import cli, knowledge
    from memtune.commands.estimate import build_config
    from memtune.defaults import refuse_invalid
    from memtune.errors import UserError
    from memtune.estimator import estimate, summarize
    from memtune.inputs.gpu import lookup_gpu
    from memtune.inputs.launch_env import parse_pairs, read_env

    mem = recipe.get("memory") or {}
    ran = any(m.get("layout_matches_recipe") is True for m in recipe.get("measured") or [])
    row: dict[str, Any] = {"id": recipe["id"], "gpu": GPU[recipe["gpu"]], "ratio": None, "peak_gib": None,
                           "capacity_gib": None, "status": "ok", "ran": ran,
                           "not_modelled": [k for k in NOT_MODELLED if mem.get(k) not in (None, False, [])]}
    kb = knowledge.load()
    try:
        args = cli.build_parser().parse_args(estimate_args(recipe))
        cfg = build_config(args, kb)
        refuse_invalid(cfg, read_env(args.env, config_env=cfg.env_vars, kb=kb), kb)
        gpu = lookup_gpu(args.gpu, kb)
        est = estimate(cfg, gpu=gpu, kb=kb, env={**cfg.env_vars, **parse_pairs(args.env)})
    except UserError as exc:
        row["status"] = str(exc).splitlines()[0]
        return row
    summary = summarize(est, gpu)
    row.update(ratio=summary["capacity_ratio"], peak_gib=summary["peak_with_overheads_bytes"] / 2**30,
               capacity_gib=gpu.capacity_bytes / 2**30)
    return row


def render(rows: list[dict[str, Any]]) -> str:
    out = ["| recipe | GPU | ran as published | estimated peak | capacity | ratio | not modelled |",
           "|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        ran = "yes" if r["ran"] else "no (other layout)"
        if r["status"] != "ok":
            out.append(f"| {r['id']} | {r['gpu']} | {ran} | {r['status']} | | | |")
            continue
        out.append(f"| {r['id']} | {r['gpu']} | {ran} | {r['peak_gib']:.1f} GiB | {r['capacity_gib']:.1f} GiB | "
                   f"{r['ratio']:.3f} | {', '.join(r['not_modelled']) or '—'} |")
    counted = [r for r in rows if r["ran"]]
    scored = [r for r in counted if r["ratio"] is not None]
    over = [r for r in scored if r["ratio"] > 1]
    ratios = sorted(r["ratio"] for r in scored)
    median = ratios[len(ratios) // 2] if ratios else float("nan")
    out += ["", f"estimated above capacity (NVIDIA runs them, so at least that much too high): {len(over)} of "
                f"{len(scored)} that ran as published; median ratio {median:.3f}; not estimated: "
                f"{len(counted) - len(scored)}; not counted (published with another layout): "
                f"{len(rows) - len(counted)}"]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="ID", help="only these recipe ids")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args(argv)
    usable, _ = load(None)
    rows = [evaluate(r) for r in usable if not args.only or r["id"] in args.only]
    print(json.dumps(rows, indent=2) if args.format == "json" else render(rows), end="\n" if args.format == "json"
          else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
