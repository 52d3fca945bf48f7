"""A plan as JSON (for agents) or Markdown (for people).  Lays out; never computes or words advice.

Headings come from knowledge/ui.yaml (``plan-*``), cost titles and consequences from costs.yaml, warnings
from constraints.yaml; the numbers come from the PlanResult.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ..knowledge import Knowledge
from ..planner.costs import differences
from ..planner.options import load
from ..planner.search import PlannedLayout, PlanRequest, PlanResult
from .labels import prefixed


def _layout_dict(lay: PlannedLayout, costs: Mapping[str, Mapping[str, Any]], lang: str) -> dict[str, Any]:
    out = asdict(lay)
    del out["shape_reasons"], out["option_reasons"], out["traffic_reasons"]
    out["overrides"] = list(lay.overrides)
    out["stages"] = [asdict(stage) for stage in lay.stages]
    out["reasons"] = [
        {"cost": r.cost, "factor": r.factor, "change_pct": (r.factor - 1.0) * 100, "detail": r.detail,
         "title": costs[r.cost]["title"][lang], "basis": costs[r.cost]["basis"],
         "source": costs[r.cost]["evidence"][0]["source"]}
        for r in lay.reasons
    ]
    return out


def _versus(result: PlanResult, costs: Mapping[str, Mapping[str, Any]], lang: str) -> list[dict[str, Any]]:
    """Cost by cost, why the first layout ranks above the config's own (empty when the config's is first)."""
    ref = result.reference
    if ref is None or not result.layouts or ref.rank == 1:
        return []
    return [{"cost": d.cost, "title": costs[d.cost]["title"][lang], "basis": costs[d.cost]["basis"],
             "ratio": d.ratio, "change_pct": (d.ratio - 1.0) * 100, "first": d.first, "reference": d.other}
            for d in differences(result.layouts[0].reasons, ref.reasons)]


def to_dict(result: PlanResult, request: PlanRequest, kb: Knowledge, lang: str = "en") -> dict[str, Any]:
    """The JSON answer of ``memtune plan --format json``."""
    costs = load(kb).costs
    return {
        "mode": "plan",
        "kb_version": kb.version,
        "request": {
            "model": request.base.model_name, "gpu": request.gpu.name, "gpus": request.gpus,
            "gpus_per_node": result.gpus_per_node, "seq_length": request.seq_length,
            "global_batch_size": request.global_batch_size, "task": request.task, "headroom": request.headroom,
            "expandable_segments": request.expandable_segments, "top": request.top,
        },
        "capacity_bytes": result.capacity_bytes,
        "budget_bytes": result.budget_bytes,
        "stats": asdict(result.stats),
        "layouts": [_layout_dict(lay, costs, lang) for lay in result.layouts],
        "reference": _layout_dict(result.reference, costs, lang) if result.reference else None,
        "versus_reference": _versus(result, costs, lang),
        "warnings": [_warning(w, kb, lang) for w in result.warnings],
        "assumptions": result.assumptions,
    }


def _warning(w: Mapping[str, Any], kb: Knowledge, lang: str) -> dict[str, Any]:
    if w["kind"] == "constraint":
        con = kb.get("constraints", w["id"])
        return {"kind": "constraint", "id": w["id"], "title": con["title"][lang], "message": con["message"][lang]}
    return dict(w)


def _gb(value: float | None) -> str:
    return "?" if value is None else f"{value / 1e9:.1f}"


def _shape(lay: Mapping[str, Any]) -> str:
    parts = [f"TP{lay['tp']}", f"PP{lay['pp']}"]
    if lay["vpp"] > 1:
        parts.append(f"VPP{lay['vpp']}")
    parts += [f"CP{lay['cp']}"] + ([f"EP{lay['ep']}"] if lay["ep"] > 1 else []) + [f"DP{lay['dp']}"]
    if lay.get("split_embedding_loss"):
        parts.append("(E|L split)")
    if lay.get("pipeline_layout"):
        parts.append(f"(layout {lay['pipeline_layout']})")
    options = [o for o in (lay["recompute"], lay["model_state"], lay["activation_offload"], lay["peft"]) if o]
    return f"{' '.join(parts)}, MBS {lay['micro_batch_size']} x {lay['num_microbatches']}; {', '.join(options)}"


def _consequences(lay: Mapping[str, Any], kb: Knowledge, lang: str) -> list[str]:
    """What the layout's non-layout choices change besides memory and throughput (knowledge/costs.yaml options)."""
    chosen = {lay["recompute"], lay["model_state"], lay["activation_offload"], lay["peft"]} - {None}
    rows = [row for group in kb.tables["costs"]["options"].values() for row in group]
    return [row["consequences"][lang] for row in rows if row["id"] in chosen and row.get("consequences")]


def _layout_md(lay: Mapping[str, Any], t: Mapping[str, str], heading: str,
               consequences: list[str] = ()) -> list[str]:
    lines = [f"### {heading}: {_shape(lay)}", ""]
    fit = t["fits"] if lay["fits"] else t["does-not-fit"]
    lines.append(f"- {t['relative-throughput']}: {lay['relative_throughput']:.3f}; {fit}")
    if lay["stages"]:
        stages = " | ".join(_gb(s["peak_with_overheads_bytes"]) for s in lay["stages"])
        lines.append(f"- {t['peak']}: {_gb(lay['peak_with_overheads_bytes'])} GB {t['on-stage']} {lay['peak_stage']}; "
                     f"{t['per-stage']}: {stages} GB")
    if lay.get("error"):
        lines.append(f"- {lay['error']}")
    why = "; ".join(f"{r['title']} {r['change_pct']:+.1f} % ({r['detail']})" for r in lay["reasons"])
    lines.append(f"- {t['why']}: {why or t['no-cost']}")
    lines += [f"- {t['consequences']}: {text}" for text in consequences]
    lines += ["", f"{t['overrides']}:", "", "```", *lay["overrides"], "```"]
    if lay["env"]:
        lines += ["", f"{t['env']}:", "", "```", *(f"export {e}" for e in lay["env"]), "```"]
    return lines + [""]


def to_markdown(data: Mapping[str, Any], kb: Knowledge, lang: str = "en") -> str:
    """The Markdown answer, from the dict ``to_dict`` returns."""
    t = prefixed(kb, lang, "plan-")
    req, st = data["request"], data["stats"]
    lines = [
        f"# {t['title']}: {req['model'] or '?'}, {req['task']}, {req['gpus']} x {req['gpu']}, "
        f"seq {req['seq_length']}, GBS {req['global_batch_size']}",
        "",
        f"{t['budget']}: {_gb(data['budget_bytes'])} GB ({t['capacity']} {_gb(data['capacity_bytes'])} GB, "
        f"{t['headroom']} {req['headroom'] * 100:.0f} %; "
        f"{t['expandable-on'] if req['expandable_segments'] else t['expandable-off']}).",
        f"{t['searched']}: {st['enumerated']}, {t['valid']} {st['valid']}, {t['checked']} {st['memory_checked']}"
        + (f", {t['fitting']} {st['fitting']}" if st["fitting"] is not None else "") + f" ({st['seconds']:.2f} s).",
        "",
    ]
    if not data["layouts"]:
        lines += [t["none-fit"], ""]
    for lay in data["layouts"]:
        lines += _layout_md(lay, t, f"{lay['rank']}", _consequences(lay, kb, lang))
    ref = data["reference"]
    if ref:
        where = f"{t['rank']} {ref['rank']}" if ref["rank"] else t["does-not-fit"]
        lines += _layout_md(ref, t, f"{t['reference']} ({where})", _consequences(ref, kb, lang))
    if data["versus_reference"]:
        lines += [f"{t['versus']}:", ""]
        lines += [f"- {d['title']}: {d['change_pct']:+.1f} % "
                  f"({d['basis']}; {d['first'] or '-'} / {d['reference'] or '-'})" for d in data["versus_reference"]]
        lines.append("")
    if data["warnings"]:
        lines += [f"## {t['warnings']}", ""]
        lines += [f"- {w['title']}: {w['message']}" if "title" in w else f"- {t[w['kind']]}" for w in data["warnings"]]
        lines.append("")
    lines += [f"_{t['model-note']}_", ""]
    return "\n".join(lines)
