"""How close is the planner's throughput model to published runs?  Tokens per second per GPU, predicted and measured.

``memtune plan`` ranks layouts by a throughput model (knowledge/costs.yaml).  The ranking is only as good as that
model, so this scores it where NVIDIA publishes throughput for a run whose settings are known: every Megatron-Bridge
performance recipe measured with its own layout (benchmarks/recipes/bridge-perf-recipes.yaml, the newest such row)
and the runs of benchmarks/recipes/measured-throughput.yaml (a recipe's config with one change, the figure from
knowledge/measurements.yaml).  Each run's own config is scored with ``memtune.planner.search.score`` (the factors
its layout pays, times the achieved FLOP/s, over its FLOPs per token) and compared with the published tokens per
second per GPU.

Cases a costs.yaml constant was solved on (its ``fitted_on``) are reported apart from the held-out ones.  Besides the
absolute error, the pairs of runs that differ in one setting show whether the model moves the right way.

    python3 benchmarks/throughput.py                  # markdown
    python3 benchmarks/throughput.py --format json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from statistics import mean, median
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.recipe_agreement import GPU, load  # noqa: E402
from benchmarks.recipe_fits import config_sets, env_args  # noqa: E402

CASES = ROOT / "benchmarks" / "recipes" / "measured-throughput.yaml"


def recipe_cases(recipes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One case per recipe whose newest measured row ran the recipe's own layout, with that row's figures."""
    out = []
    for r in recipes:
        row = next((m for m in r.get("measured") or [] if m.get("layout_matches_recipe") is True), None)
        if row and row.get("tokens_per_sec_per_gpu"):
            out.append({"id": r["id"], "recipe": r, "set": [], "tokens": float(row["tokens_per_sec_per_gpu"]),
                        "source": f"{row['doc']} ({row['container']})", "moe": bool(r.get("moe"))})
    return out


def measured_cases(recipes: dict[str, dict[str, Any]], kb: Any) -> list[dict[str, Any]]:
    """The runs of measured-throughput.yaml: a recipe plus ``set``, the figure read from measurements.yaml."""
    out = []
    for c in yaml.safe_load(CASES.read_text(encoding="utf-8"))["cases"]:
        recipe = recipes[c["recipe"]]
        if c.get("step_time_ms"):  # a published step time: tokens of the recipe's batch per second per GPU
            lay = recipe["layout"]
            tokens = lay["global_batch_size"] * lay["seq_length"] / (c["step_time_ms"] / 1e3) / recipe["num_gpus"]
            source = c["source"]["citation"]
        else:  # a measured TFLOP/s, turned into tokens with NVIDIA's FLOPs per token for the same model
            arm = kb.get("measurements", c["measurement"])[c["arm"]]
            tflops = float(arm["tflops_per_gpu"])
            ref = next(m for m in recipes[c["tokens_from"]]["measured"] if m.get("tokens_per_sec_per_gpu"))
            per_token = ref["model_tflops_per_gpu"] * 1e12 / ref["tokens_per_sec_per_gpu"]
            tokens = tflops * 1e12 / per_token
            source = f"measurements.yaml {c['measurement']} ({c['arm']}: {tflops:g} TFLOP/s/GPU)"
        out.append({"id": c["id"], "recipe": recipe, "set": list(c.get("set") or []), "tokens": tokens,
                    "source": source, "moe": bool(recipe.get("moe"))})
    return out


def plan_args(case: dict[str, Any]) -> list[str]:
    r = case["recipe"]
    lay = r["layout"]
    args = ["plan", "--model", r["model_key"], "--gpu", GPU[r["gpu"]], "--gpus", str(r["num_gpus"]),
            "--seq-length", str(lay["seq_length"]), "--global-batch-size", str(lay["global_batch_size"]),
            "--task", r["task"], *env_args(r)]
    for item in [*config_sets(r), *case["set"]]:
        args += ["--set", item]
    return args


def evaluate(case: dict[str, Any], kb: Any, fitted: dict[str, list[str]]) -> dict[str, Any]:
    from memtune import cli
    from memtune.commands.plan import request_from_args
    from memtune.errors import UserError
    from memtune.planner.search import score

    row = {"id": case["id"], "moe": case["moe"], "measured": case["tokens"], "predicted": None, "error_pct": None,
           "fit": fitted.get(case["id"], []), "options": None, "reasons": [], "status": "ok", "source": case["source"]}
    try:
        scored = score(request_from_args(cli.build_parser().parse_args(plan_args(case)), kb), kb)
    except UserError as exc:
        row["status"] = str(exc).splitlines()[0]
        return row
    if scored is None or scored.tokens_per_gpu_second is None:
        row["status"] = "its options or sizes are outside the planner's space"
        return row
    predicted = scored.tokens_per_gpu_second
    row.update(predicted=predicted, error_pct=100 * (predicted / case["tokens"] - 1),
               options=scored.options, relative=scored.relative_throughput,
               reasons=[(r.cost, r.factor) for r in scored.reasons if abs(r.factor - 1) > 1e-9])
    return row


def fitted_on(kb: Any) -> dict[str, list[str]]:
    """Case id -> the costs.yaml constants solved on it."""
    out: dict[str, list[str]] = {}
    for c in kb.tables["costs"]["costs"]:
        for case in c.get("fitted_on") or []:
            out.setdefault(case, []).append(c["id"])
    return out


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """MAPE and median signed error by family, held-out cases apart from the ones a constant was fitted on."""
    scored = [r for r in rows if r["error_pct"] is not None]
    groups = [("all", scored), ("held out", [r for r in scored if not r["fit"]]),
              ("dense, held out", [r for r in scored if not r["fit"] and not r["moe"]]),
              ("MoE, held out", [r for r in scored if not r["fit"] and r["moe"]]),
              ("fitted on", [r for r in scored if r["fit"]])]
    return [{"family": name, "cases": len(g), "mape": mean(abs(r["error_pct"]) for r in g) if g else None,
             "median_signed": median(r["error_pct"] for r in g) if g else None,
             "worst": max((r["error_pct"] for r in g), key=abs) if g else None} for name, g in groups]


def bands(rows: list[dict[str, Any]]) -> dict[str, float]:
    """The held-out MAPE per class, as a fraction: knowledge/costs.yaml ``throughput-error`` stores it (a LoRA run
    computes as its dense base does, so it counts as dense)."""
    held = [r for r in rows if r["error_pct"] is not None and not r["fit"]]
    return {cls: mean(abs(r["error_pct"]) for r in held if r["moe"] == (cls == "moe")) / 100
            for cls in ("dense", "moe") if any(r["moe"] == (cls == "moe") for r in held)}


def render(rows: list[dict[str, Any]]) -> str:
    out = ["| run | MoE | measured tok/s/GPU | predicted | error | fitted on it | factors below 1 |",
           "|---|---|---:|---:|---:|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            out.append(f"| {r['id']} | {'yes' if r['moe'] else ''} | {r['measured']:,.0f} | {r['status']} | | | |")
            continue
        why = ", ".join(f"{c} {f:.3f}" for c, f in r["reasons"]) or "—"
        out.append(f"| {r['id']} | {'yes' if r['moe'] else ''} | {r['measured']:,.0f} | {r['predicted']:,.0f} | "
                   f"{r['error_pct']:+.1f} % | {', '.join(r['fit']) or ''} | {why} |")
    out += ["", "| family | cases | MAPE | median signed error | worst |", "|---|---:|---:|---:|---:|"]
    for s in summary(rows):
        if s["cases"]:
            out.append(f"| {s['family']} | {s['cases']} | {s['mape']:.1f} % | {s['median_signed']:+.1f} % | "
                       f"{s['worst']:+.1f} % |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    from memtune import knowledge

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", metavar="ID", help="only cases whose id contains this")
    parser.add_argument("--format", choices=("markdown", "json"), default="markdown")
    args = parser.parse_args(argv)
    kb = knowledge.load()
    usable, _ = load(None)
    cases = recipe_cases(usable) + measured_cases({r["id"]: r for r in usable}, kb)
    if args.only:
        cases = [c for c in cases if any(o in c["id"] for o in args.only)]
    fitted = fitted_on(kb)
    rows = [evaluate(c, kb, fitted) for c in cases]
    if args.format == "json":
        print(json.dumps({"rows": rows, "summary": summary(rows), "bands": bands(rows)}, indent=2))
    else:
        print(render(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
