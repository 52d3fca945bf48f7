"""A plan as JSON (for agents) or Markdown (for people).  Lays out; never computes or words advice.

Headings come from knowledge/ui.yaml (``plan-*``), cost titles and consequences from costs.yaml, warnings
from constraints.yaml; the numbers come from the PlanResult.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from operator import attrgetter
from typing import Any

from ..knowledge import Knowledge
from ..planner.costs import differences
from ..planner.options import load
from ..planner.search import LayoutRow, PlannedLayout, PlanRequest, PlanResult
from .labels import prefixed

# An --all plan lists every layout that fits (10^5 of them) as one row of these values, and details only the first
# --top: the overrides, reasons and per-stage peaks of each would be ~5 KB a layout (0.7 GB of JSON).
ROW_COLUMNS = LayoutRow._fields  # PlannedLayout's attributes of the same names
_row = attrgetter(*ROW_COLUMNS)
ROWS_PER_CHUNK = 4096  # rows encoded and written at a time: the answer is never one 10^7-character string


class LayoutRows(Sequence[tuple]):
    """The ``ROW_COLUMNS`` values of each fitting layout, read from the layouts when asked (not copied)."""

    def __init__(self, layouts: Sequence[PlannedLayout]) -> None:
        self._layouts = layouts

    def __len__(self) -> int:
        return len(self._layouts)

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        row = getattr(self._layouts, "row", None)  # an --all plan's FittingLayouts: no layout built per row
        if index < 0:
            index += len(self)
        return _row(row(index) if row else self._layouts[index])

    def __iter__(self) -> Iterator[tuple]:
        rows = getattr(self._layouts, "rows", None)
        return map(_row, rows() if rows else self._layouts)


def _layout_dict(lay: PlannedLayout, costs: Mapping[str, Mapping[str, Any]], lang: str) -> dict[str, Any]:
    # the line renderer and the reason tuples are the plan's, shared: left out before asdict copies fields deeply
    out = asdict(replace(lay, lines=None, shape_reasons=(), option_reasons=(), traffic_reasons=(), stage_values=None))
    for name in ("lines", "pair", "stage_values", "shape_reasons", "option_reasons", "traffic_reasons"):
        del out[name]
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


def to_dict(result: PlanResult, request: PlanRequest, kb: Knowledge, lang: str = "en",
            detail: int = 5) -> dict[str, Any]:
    """The JSON answer of ``memtune plan --format json``; an ``--all`` plan (``request.top`` None) details its first
    ``detail`` layouts and lists every fitting one as a row of ``ROW_COLUMNS`` under ``all``."""
    costs = load(kb).costs
    every = request.top is None
    shown = result.layouts[:detail] if every else result.layouts
    return {
        "mode": "plan",
        "kb_version": kb.version,
        "request": {
            "model": request.base.model_name, "gpu": request.gpu.name, "gpus": request.gpus,
            "gpus_per_node": result.gpus_per_node, "seq_length": request.seq_length,
            "global_batch_size": request.global_batch_size, "task": request.task, "headroom": result.headroom,
            "headroom_class": result.headroom_class,
            "expandable_segments": request.expandable_segments, "top": detail if every else request.top,
            "all": every,
        },
        "capacity_bytes": result.capacity_bytes,
        "budget_bytes": result.budget_bytes,
        "stats": asdict(result.stats),
        "layouts": [_layout_dict(lay, costs, lang) for lay in shown],
        "all": {"columns": list(ROW_COLUMNS), "rows": LayoutRows(result.layouts)} if every else None,
        "reference": _layout_dict(result.reference, costs, lang) if result.reference else None,
        "versus_reference": _versus(result, costs, lang),
        "tied_with_first": {"count": result.tied_with_first, "among": result.tie_scope},
        "close_to_first": {"count": result.close_to_first, "among": result.tie_scope, "band": result.throughput_band,
                           "class": result.throughput_class},
        "warnings": [_warning(w, kb, lang) for w in result.warnings],
        "assumptions": result.assumptions,
    }


def json_chunks(data: Mapping[str, Any]) -> Iterator[str]:
    """``out.json_text`` of the answer in pieces, the rows of an ``--all`` plan one compact line each (indented,
    10^5 rows would take 20 lines apiece)."""
    from . import out

    table = data.get("all")
    if not table:
        yield out.json_text(data)
        return
    mark = "\u0000rows\u0000"  # a string no answer holds, where the rows go
    head, tail = out.json_text({**data, "all": {"columns": table["columns"], "rows": mark}}).split(json.dumps(mark))
    yield head + "["
    encode = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "), allow_nan=False).encode  # as json_text
    lead, between = "\n      ", ",\n      "
    for chunk in _batches(table["rows"]):
        yield lead + between.join(map(encode, chunk))
        lead = between
    yield ("\n    ]" if len(table["rows"]) else "]") + tail


def _batches(rows: Iterable[tuple]) -> Iterator[list[tuple]]:
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) == ROWS_PER_CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


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


def _all_table(table: Mapping[str, Any], t: Mapping[str, str], detail: int) -> Iterator[str]:
    """Every fitting layout of an ``--all`` plan as one table row, in rank order, in pieces."""
    at = {name: i for i, name in enumerate(table["columns"])}
    head = t["all-columns"].split(" | ")
    yield "\n".join([f"## {t['all'].format(detail=detail)}", "", f"| {' | '.join(head)} |",
                     "|---:|---|---:|---|---:|---:|"]) + "\n"
    ix = [at[n] for n in ("rank", "tp", "pp", "vpp", "cp", "ep", "dp", "micro_batch_size", "num_microbatches",
                          "recompute", "model_state", "activation_offload", "peft", "split_embedding_loss",
                          "pipeline_layout", "relative_throughput", "peak_with_overheads_bytes", "peak_stage")]
    for chunk in _batches(table["rows"]):
        lines = []
        for row in chunk:
            (rank, tp, pp, vpp, cp, ep, dp, mbs, m, recompute, state, offload, peft, split, layout, score, peak,
             stage) = (row[i] for i in ix)
            shape = f"TP{tp} PP{pp}" + (f" VPP{vpp}" if vpp > 1 else "") + f" CP{cp}" + (f" EP{ep}" if ep > 1 else "")
            shape += f" DP{dp}" + (" (E|L split)" if split else "") + (f" (layout {layout})" if layout else "")
            options = ", ".join(o for o in (recompute, state, offload, peft) if o)
            lines.append(f"| {rank} | {shape} | {mbs} x {m} | {options} | {score:.3f} | {_gb(peak)} ({stage}) |\n")
        yield "".join(lines)
    yield "\n"


def markdown_chunks(data: Mapping[str, Any], kb: Knowledge, lang: str = "en") -> Iterator[str]:
    """``to_markdown`` in pieces: an ``--all`` plan's table of every fitting layout comes last, written as it is
    formatted."""
    yield to_markdown(data, kb, lang, table=False) + "\n"
    if data.get("all"):
        yield "\n"
        yield from _all_table(data["all"], prefixed(kb, lang, "plan-"), data["request"]["top"])


def _band(req: Mapping[str, Any], t: Mapping[str, str]) -> str:
    """Where a default headroom came from: the estimator's measured error on the model's class."""
    cls = req.get("headroom_class")
    return f" {t['headroom-band'].format(cls=t['class-' + cls])}" if cls else ""


def tie_note(data: Mapping[str, Any], t: Mapping[str, str]) -> str | None:
    """The sentence saying how many layouts score what layout 1 scores, when more than it does (``t``: the
    ``plan-`` labels without their prefix)."""
    ties = data["tied_with_first"]
    if ties["count"] <= 1 or not data["layouts"]:
        return None
    return t[f"tied-{ties['among']}"].format(n=ties["count"], score=data["layouts"][0]["relative_throughput"])


def close_note(data: Mapping[str, Any], t: Mapping[str, str]) -> str | None:
    """The sentence saying how many layouts score within the throughput model's measured error of layout 1, when
    more than the exact ties."""
    close = data.get("close_to_first")
    if not close or close["count"] <= max(1, data["tied_with_first"]["count"]) or not data["layouts"]:
        return None
    return t[f"close-{close['among']}"].format(n=close["count"], band=close["band"] * 100,
                                                cls=t["class-" + close["class"]])


def to_markdown(data: Mapping[str, Any], kb: Knowledge, lang: str = "en", table: bool = True) -> str:
    """The Markdown answer, from the dict ``to_dict`` returns (``table``: with an ``--all`` plan's table of every
    fitting layout at the end; see ``markdown_chunks``)."""
    t = prefixed(kb, lang, "plan-")
    req, st = data["request"], data["stats"]
    lines = [
        f"# {t['title']}: {req['model'] or '?'}, {req['task']}, {req['gpus']} x {req['gpu']}, "
        f"seq {req['seq_length']}, GBS {req['global_batch_size']}",
        "",
        f"{t['budget']}: {_gb(data['budget_bytes'])} GB ({t['capacity']} {_gb(data['capacity_bytes'])} GB, "
        f"{t['headroom']} {req['headroom'] * 100:.1f} %{_band(req, t)}; "
        f"{t['expandable-on'] if req['expandable_segments'] else t['expandable-off']}).",
        f"{t['searched']}: {st['enumerated']}, {t['valid']} {st['valid']}, {t['checked']} {st['memory_checked']}"
        + (f", {t['fitting']} {st['fitting']}" if st["fitting"] is not None else "") + f" ({st['seconds']:.2f} s).",
        "",
    ]
    if not data["layouts"]:
        lines += [t["none-fit"], ""]
    for note in (tie_note(data, t), close_note(data, t)):
        if note:
            lines += [note, ""]
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
        gap = 1.0 - ref["relative_throughput"] / data["layouts"][0]["relative_throughput"]
        close = data["close_to_first"]
        if gap <= close["band"]:
            lines += [t["versus-within"].format(gap=gap * 100, band=close["band"] * 100,
                                                cls=t["class-" + close["class"]]), ""]
    if data["warnings"]:
        lines += [f"## {t['warnings']}", ""]
        lines += [f"- {w['title']}: {w['message']}" if "title" in w else f"- {t[w['kind']]}" for w in data["warnings"]]
        lines.append("")
    lines += [f"_{t['model-note']}_", ""]
    text = "\n".join(lines)
    if table and data.get("all"):
        text += "\n\n" + "".join(_all_table(data["all"], t, data["request"]["top"]))
    return text
