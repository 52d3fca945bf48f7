"""Planner throughput benchmark: how many layouts ``memtune plan`` scores per second.

Target (issue 3): at least 10,000 layouts scored per second.  Three rates are reported per scenario so
the number is not flattering by construction:

* ranked/s   - valid layouts (no constraint refuses them) enumerated, checked and scored by the cost
               model, per second of a default ``plan`` run (top 5: memory is then estimated in score
               order only until five fit);
* decided/s  - valid layouts whose fit was decided, per second of a ``--all`` run (every candidate:
               estimated, or inferred from a neighbour that needs more / less memory);
* estimate   - milliseconds per estimator call, and how many calls each mode made.

Every run starts with the estimator's caches empty (estimator/static.py keeps the per-shape parts of
estimates for the life of the process), so the rates are those of a fresh ``memtune plan`` process.

    python3 benchmarks/bench_plan.py                 # the built-in scenarios, Markdown table
    python3 benchmarks/bench_plan.py --format json
    python3 benchmarks/bench_plan.py --repeat 3      # best of three runs per scenario
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
if str(SKILL / "scripts") not in sys.path:
    sys.path.insert(0, str(SKILL / "scripts"))

from memtune import knowledge  # noqa: E402
from memtune.estimator.models import preset  # noqa: E402
from memtune.estimator.static import clear_caches  # noqa: E402
from memtune.inputs.config import apply_overrides  # noqa: E402
from memtune.inputs.gpu import lookup_gpu  # noqa: E402
from memtune.planner import PlanRequest, plan  # noqa: E402

FP8_CS = ["mixed_precision=bf16_with_fp8_current_scaling_mixed", "mixed_precision.grad_reduce_in_fp32=false"]
SCENARIOS: list[dict[str, Any]] = [
    {"id": "llama3-70b-sft-32xh100", "model": "llama3-70b", "gpu": "H100", "gpus": 32, "seq": 4096, "gbs": 32,
     "task": "sft", "set": FP8_CS},
    {"id": "llama3-8b-lora-8xh100", "model": "llama3-8b", "gpu": "H100", "gpus": 8, "seq": 8192, "gbs": 64,
     "task": "lora", "set": []},
    {"id": "qwen3-30b-a3b-pretrain-16xh100", "model": "qwen3-30b-a3b", "gpu": "H100", "gpus": 16, "seq": 4096,
     "gbs": 256, "task": "pretrain", "set": []},
    {"id": "llama3-405b-pretrain-128xh200", "model": "llama3-405b", "gpu": "H200", "gpus": 128, "seq": 8192,
     "gbs": 512, "task": "pretrain", "set": FP8_CS},
]


def _request(kb: knowledge.Knowledge, sc: dict[str, Any], top: int | None) -> PlanRequest:
    base = apply_overrides(preset(sc["model"], kb), sc["set"], kb)
    return PlanRequest(base=base, gpu=lookup_gpu(sc["gpu"], kb), gpus=sc["gpus"], seq_length=sc["seq"],
                       global_batch_size=sc["gbs"], task=sc["task"], top=top)


def _best(kb: knowledge.Knowledge, sc: dict[str, Any], top: int | None, repeat: int):
    """Best of ``repeat`` runs, each with the estimator's caches emptied first (as in a fresh process)."""
    runs = []
    for _ in range(repeat):
        clear_caches()
        start = time.perf_counter()
        result = plan(_request(kb, sc, top), kb)
        runs.append((time.perf_counter() - start, result))
    return min(runs, key=lambda r: r[0])


def measure(kb: knowledge.Knowledge, sc: dict[str, Any], repeat: int) -> dict[str, Any]:
    top_s, top = _best(kb, sc, 5, repeat)
    all_s, full = _best(kb, sc, None, repeat)
    est_s = all_s - _enumeration_seconds(kb, sc)
    return {
        "id": sc["id"],
        "enumerated": top.stats.enumerated,
        "valid": top.stats.valid,
        "top5_seconds": top_s,
        "top5_estimates": top.stats.memory_checked,
        "ranked_per_s": top.stats.valid / top_s,
        "all_seconds": all_s,
        "all_estimates": full.stats.memory_checked,
        "all_inferred": full.stats.valid - full.stats.memory_checked,
        "fitting": full.stats.fitting,
        "decided_per_s": full.stats.valid / all_s,
        "ms_per_estimate": 1000 * est_s / max(1, full.stats.memory_checked),
        "best": _shape(top.layouts[0]) if top.layouts else None,
    }


def _enumeration_seconds(kb: knowledge.Knowledge, sc: dict[str, Any]) -> float:
    """Time of enumeration, constraint checks and scoring alone (a plan that estimates nothing)."""
    from memtune.planner.search import Planner

    start = time.perf_counter()
    Planner(_request(kb, sc, 1), kb).candidates()
    return time.perf_counter() - start


def _shape(lay: Any) -> str:
    vpp = f" VPP{lay.vpp}" if lay.vpp > 1 else ""
    return (f"TP{lay.tp} PP{lay.pp}{vpp} CP{lay.cp} EP{lay.ep} DP{lay.dp} MBS{lay.micro_batch_size} "
            f"{lay.recompute} {lay.model_state}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--format", choices=["markdown", "json"], default="markdown")
    args = parser.parse_args(argv)
    kb = knowledge.load()
    rows = [measure(kb, sc, max(1, args.repeat)) for sc in SCENARIOS]
    if args.format == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print("| scenario | enumerated | valid | top-5 s | ranked/s | estimates (top-5) | --all s | decided/s "
          "| estimates (--all) | fitting | ms/estimate | best |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['id']} | {r['enumerated']} | {r['valid']} | {r['top5_seconds']:.2f} | {r['ranked_per_s']:,.0f} "
              f"| {r['top5_estimates']} | {r['all_seconds']:.2f} | {r['decided_per_s']:,.0f} | {r['all_estimates']} "
              f"| {r['fitting']} | {r['ms_per_estimate']:.2f} | {r['best']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
