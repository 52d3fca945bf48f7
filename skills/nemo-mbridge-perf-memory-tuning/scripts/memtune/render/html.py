"""``--html FILE``: one self-contained page (inline SVG, no script, no network) for estimate, snapshot, compare.

The functions here are pure: each turns a command's existing result (the dict or dataclass it already
prints) into drawing coordinates, already scaled to the SVG's pixels, so the Jinja2 templates under
templates/ only lay the shapes out.  Every label comes from knowledge/ui.yaml (``html-*`` ids); every
string that came from a user's file is escaped by Jinja2's autoescape, never by hand.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from .labels import labels, prefixed
from .render import TEMPLATES

GIB = 2**30
MAX_POINTS = 2000  # per polyline: a browser draws this fast, and min/max buckets keep every peak
WIDTH, HEIGHT = 960, 380  # the SVG's user units
PLOT = {"left": 72.0, "top": 20.0, "right": 24.0, "bottom": 56.0}
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac")
# Estimate segments, bottom to top: (id, label id, colour).  other_bytes already holds the logits, so the
# last allocated segment is workspaces + CUDA-graph pools; the overheads beside the allocated peak go on top.
SEGMENTS = (("weights", "html-seg-weights", "#4e79a7"), ("grads", "html-seg-grads", "#f28e2b"),
            ("optimizer", "html-seg-optimizer", "#e15759"), ("activations", "html-seg-activations", "#76b7b2"),
            ("logits", "html-seg-logits", "#59a14f"), ("workspaces", "html-seg-workspaces", "#edc948"),
            ("overheads", "html-seg-overheads", "#d4d0cc"))
A_COLOUR, B_COLOUR, UP_COLOUR, DOWN_COLOUR = "#4e79a7", "#f28e2b", "#e15759", "#59a14f"


# --------------------------------------------------------------------------- scales


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round axis values from 0 covering ``top`` (1, 2, 2.5 or 5 times a power of ten apart)."""
    if not top or top <= 0 or not math.isfinite(top):
        return [0.0, 1.0]
    raw = top / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [round(i * step, 10) for i in range(n + 1)]


def plot_box(width: float = WIDTH, height: float = HEIGHT) -> dict[str, float]:
    x0, y0 = PLOT["left"], PLOT["top"]
    return {"x0": x0, "y0": y0, "x1": width - PLOT["right"], "y1": height - PLOT["bottom"],
            "w": width - PLOT["right"] - x0, "h": height - PLOT["bottom"] - y0, "width": width, "height": height}


def _y(box: Mapping[str, float], value: float, lo: float, hi: float) -> float:
    span = (hi - lo) or 1.0
    return round(box["y1"] - (value - lo) / span * box["h"], 1)


def _x(box: Mapping[str, float], value: float, lo: float, hi: float) -> float:
    span = (hi - lo) or 1.0
    return round(box["x0"] + (value - lo) / span * box["w"], 1)


def y_axis(box: Mapping[str, float], ticks: Sequence[float], fmt: str = "{:g}") -> list[dict[str, Any]]:
    """Gridlines for value ticks (the ticks' own unit, e.g. GiB)."""
    hi = ticks[-1]
    return [{"y": _y(box, v, 0, hi), "text": fmt.format(v)} for v in ticks]


def x_axis(box: Mapping[str, float], lo: float, hi: float, count: int = 6) -> list[dict[str, Any]]:
    ticks = nice_ticks(hi - lo, count)
    return [{"x": _x(box, lo + v, lo, hi), "text": f"{lo + v:g}"} for v in ticks if lo + v <= hi + 1e-9]


def gib(value: float | None) -> str:
    return "?" if value is None else f"{value / GIB:.2f}"


# --------------------------------------------------------------------------- series


def downsample(points: Sequence[tuple[float, float]], max_points: int = MAX_POINTS) -> list[tuple[float, float]]:
    """At most ``max_points`` points: per bucket of consecutive points, its lowest and highest, in order.

    Keeping both extremes means a peak (or a dip) one event wide survives however long the trace is.
    """
    if len(points) <= max_points:
        return list(points)
    buckets = max(1, max_points // 2)
    size = len(points) / buckets
    out: list[tuple[float, float]] = []
    for b in range(buckets):
        chunk = points[int(b * size): int((b + 1) * size)] or points[int(b * size): int(b * size) + 1]
        lo = min(range(len(chunk)), key=lambda i: chunk[i][1])
        hi = max(range(len(chunk)), key=lambda i: chunk[i][1])
        out += [chunk[i] for i in sorted({lo, hi})]
    return out[:max_points]


def polyline(box: Mapping[str, float], points: Sequence[tuple[float, float]], x_range: tuple[float, float],
             y_top: float) -> str:
    """SVG ``points`` text; y values in GiB against the axis top ``y_top``."""
    return " ".join(f"{_x(box, x, *x_range)},{_y(box, y, 0, y_top)}" for x, y in points)


def line_chart(series: Sequence[Mapping[str, Any]], x_label: str, marks: Sequence[Mapping[str, Any]] = ()) \
        -> dict[str, Any]:
    """Polylines for ``series`` ({name, colour, dash, points: [(x, bytes)]}), each downsampled, plus marks."""
    box = plot_box()
    thin = [{**s, "points": downsample([(x, y / GIB) for x, y in s["points"]])} for s in series]
    xs = [x for s in thin for x, _ in s["points"]] or [0.0, 1.0]
    ys = [y for s in thin for _, y in s["points"]] or [1.0]
    x_range = (min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1)
    ticks = nice_ticks(max(ys) * 1.05 or 1.0)
    lines = [{"name": s["name"], "colour": s["colour"], "dash": s.get("dash", ""), "count": len(s["points"]),
              "points": polyline(box, s["points"], x_range, ticks[-1])} for s in thin]
    dots = []
    for m in marks:
        x = _x(box, m["x"], *x_range)
        right = x > box["x1"] - 160  # near the right edge the label goes to the mark's left
        dots.append({"x": x, "y": _y(box, m["bytes"] / GIB, 0, ticks[-1]), "colour": m["colour"], "text": m["text"],
                     "text_x": round(x - 8 if right else x + 8, 1), "anchor": "end" if right else "start"})
    return {"box": box, "y_ticks": y_axis(box, ticks), "x_ticks": x_axis(box, *x_range), "x_label": x_label,
            "lines": lines, "marks": dots}


# --------------------------------------------------------------------------- estimate


def stage_segments(stage: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(segment id, bytes) of one estimate stage, bottom to top; they add up to its peak with overheads."""
    allocated = (stage["weights_bytes"] + stage["grads_bytes"] + stage["optimizer_bytes"] + stage["activations_bytes"]
                 + stage["logits_bytes"] + stage["workspace_bytes"] + stage["graph_pool_bytes"])
    return [("weights", stage["weights_bytes"]), ("grads", stage["grads_bytes"]),
            ("optimizer", stage["optimizer_bytes"]), ("activations", stage["activations_bytes"]),
            ("logits", stage["logits_bytes"]), ("workspaces", stage["workspace_bytes"] + stage["graph_pool_bytes"]),
            ("overheads", max(0.0, stage["peak_with_overheads_bytes"] - allocated))]


def capacity_line(box: Mapping[str, float], gpu: Mapping[str, Any] | None, top: float, t: Mapping[str, str]) \
        -> dict[str, Any] | None:
    if not gpu or not gpu.get("capacity_bytes"):
        return None
    value = gpu["capacity_bytes"] / GIB
    return {"y": _y(box, value, 0, top), "text": f"{gpu['name']}: {t['html-capacity']} {value:.1f} GiB"}


def estimate_view(result: Mapping[str, Any], t: Mapping[str, str]) -> dict[str, Any]:
    """Stacked bars, one per pipeline stage, the GPU's usable capacity as a line, and the table beneath."""
    box = plot_box()
    stages = result["stages"]
    colours = {key: colour for key, _, colour in SEGMENTS}
    names = {key: t[label] for key, label, _ in SEGMENTS}
    totals = [sum(v for _, v in stage_segments(s)) for s in stages]
    cap = (result.get("gpu") or {}).get("capacity_bytes") or 0
    ticks = nice_ticks(max([*totals, cap, 1.0]) / GIB * 1.05)
    slot = box["w"] / max(len(stages), 1)
    bar_w = round(min(80.0, slot * 0.6), 1)
    bars = []
    for i, stage in enumerate(stages):
        x = round(box["x0"] + slot * i + (slot - bar_w) / 2, 1)
        base, rects = 0.0, []
        for key, value in stage_segments(stage):
            if value <= 0:
                continue
            y_low, y_high = _y(box, base / GIB, 0, ticks[-1]), _y(box, (base + value) / GIB, 0, ticks[-1])
            rects.append({"key": key, "x": x, "y": y_high, "w": bar_w, "h": round(y_low - y_high, 1),
                          "colour": colours[key], "title": f"{t['html-stage']} {stage['pp_rank']}: {names[key]} "
                                                           f"{value / GIB:.2f} GiB"})
            base += value
        bars.append({"pp_rank": stage["pp_rank"], "rects": rects, "label_x": round(x + bar_w / 2, 1),
                     "total": f"{base / GIB:.1f}", "total_y": _y(box, base / GIB, 0, ticks[-1]) - 4})
    rows = [{"pp_rank": s["pp_rank"], "layers": s["layers"],
             "cells": [f"{v / GIB:.2f}" for _, v in stage_segments(s)],
             "allocated": gib(s["allocated_peak_bytes"]), "with_overheads": gib(s["peak_with_overheads_bytes"])}
            for s in stages]
    ratio = (result.get("summary") or {}).get("capacity_ratio")
    return {"box": box, "y_ticks": y_axis(box, ticks), "bars": bars,
            "capacity": capacity_line(box, result.get("gpu"), ticks[-1], t),
            "legend": [{"colour": c, "text": names[k]} for k, _, c in SEGMENTS],
            "columns": [names[k] for k, _, _ in SEGMENTS], "rows": rows,
            "peak_stage": result.get("peak_stage"), "peak": gib(result.get("peak_bytes")),
            "ratio": None if ratio is None else f"{ratio * 100:.1f} %",
            "gpu": (result.get("gpu") or {}).get("name"), "mode": result.get("mode"),
            "warnings": list(result.get("warnings") or [])}


# --------------------------------------------------------------------------- snapshots


def trace_points(trace: Any) -> dict[str, Any]:
    """(x, allocated) and (x, reserved) after every event of a SnapshotTrace; x in ms since its first event,
    or the event's position when the trace has no times.  Replayed by compare/snapshots.py's own rules."""
    from ..compare.snapshots import NO_PEAK, _live, peak_position
    from ..inputs.snapshot_trace import SEGMENT_ACTIONS

    live = _live(trace)
    timed = trace.start_time_us is not None and all(e.time_us is not None for e in trace.events)
    xs = [(e.time_us - trace.start_time_us) / 1000 if timed else float(i) for i, e in enumerate(trace.events)]
    peak = peak_position(trace, live) if trace.events else NO_PEAK
    return {"allocated": [(x, lv[0]) for x, lv in zip(xs, live, strict=True)],
            "reserved": [(x, lv[1]) for x, lv in zip(xs, live, strict=True)]
            if any(e.action in SEGMENT_ACTIONS for e in trace.events) else [],
            "timed": timed, "peak": None if peak in (None, NO_PEAK) else (xs[peak], live[peak][0])}


def snapshot_view(summary: Mapping[str, Any], trace: Any, t: Mapping[str, str]) -> dict[str, Any]:
    """Allocated (and reserved, where segments were traced) memory over the trace, the peak marked."""
    pts = trace_points(trace)
    series = [{"name": t["html-allocated"], "colour": A_COLOUR, "points": pts["allocated"]}]
    if pts["reserved"]:
        series.append({"name": t["html-reserved"], "colour": B_COLOUR, "dash": "6 3", "points": pts["reserved"]})
    marks = [] if pts["peak"] is None else [{"x": pts["peak"][0], "bytes": pts["peak"][1], "colour": UP_COLOUR,
                                             "text": f"{t['html-peak']} {pts['peak'][1] / GIB:.2f} GiB"}]
    chart = line_chart(series, t["html-time-ms"] if pts["timed"] else t["html-event"], marks) if trace.events else None
    facts = [(t["html-file"], summary.get("file")), (t["html-device"], summary.get("device")),
             (t["html-reserved"], gib(summary.get("reserved_bytes")) + " GiB"),
             (t["html-allocated"], gib(summary.get("allocated_bytes")) + " GiB"),
             (t["html-peak"], gib(summary.get("timeline_peak_bytes")) + " GiB"),
             (t["html-fragmentation"], _pct(summary.get("fragmentation_ratio"))),
             (t["html-events"], len(trace.events))]
    if summary.get("oom"):
        facts.append((t["html-oom"], f"{gib(summary.get('oom_requested_bytes'))} GiB -> {summary.get('oom_kind')}"))
    sites = [{"site": s["site"], "bytes": gib(s["bytes"]), "blocks": s["blocks"]}
             for s in summary.get("top_sites") or []]
    return {"chart": chart, "facts": facts, "sites": sites}


def _pct(ratio: float | None) -> str:
    return "?" if ratio is None else f"{ratio * 100:.1f} %"


# --------------------------------------------------------------------------- compare


def compare_configs_view(r: Any, t: Mapping[str, str]) -> dict[str, Any]:
    """Per-stage bars A beside B, and the attribution as a waterfall from A's peak to B's."""
    box = plot_box()
    width = max(len(r.a.stages), len(r.b.stages))
    a = {s.pp_rank: s.bytes for s in r.a.stages}
    b = {s.pp_rank: s.bytes for s in r.b.stages}
    cap = (r.gpu or {}).get("capacity_bytes") or 0
    ticks = nice_ticks(max([*a.values(), *b.values(), cap, 1]) / GIB * 1.05)
    slot = box["w"] / max(width, 1)
    bar_w = round(min(48.0, slot * 0.35), 1)
    groups = []
    for rank in range(width):
        left = box["x0"] + slot * rank + slot / 2 - bar_w
        rects = []
        for k, (side, values, colour) in enumerate((("A", a, A_COLOUR), ("B", b, B_COLOUR))):
            if rank not in values:
                continue
            y = _y(box, values[rank] / GIB, 0, ticks[-1])
            rects.append({"side": side, "x": round(left + k * bar_w, 1), "y": y, "w": bar_w,
                          "h": round(box["y1"] - y, 1), "colour": colour,
                          "title": f"{side} {t['html-stage']} {rank}: {values[rank] / GIB:.2f} GiB"})
        groups.append({"pp_rank": rank, "rects": rects, "label_x": round(left + bar_w, 1)})
    return {"bars": {"box": box, "y_ticks": y_axis(box, ticks), "groups": groups,
                     "capacity": capacity_line(box, r.gpu, ticks[-1], t)},
            "waterfall": waterfall(r, t), "a_label": r.a.label, "b_label": r.b.label,
            "metric": r.metric, "order": r.order_text}


def waterfall(r: Any, t: Mapping[str, str]) -> dict[str, Any]:
    """A's peak, each change's share of the peak stage's difference, B's peak: each step starts where the last
    ended, so the shares telescope to B exactly (compare/configs.py's guarantee)."""
    start = max(s.bytes for s in r.a.stages)
    steps: list[dict[str, Any]] = [{"text": "A", "low": 0, "high": start, "kind": "total", "value": start}]
    level = start
    for change in r.changes:
        share = change.shares.peak
        steps.append({"text": ", ".join(change.fields) or "-", "low": min(level, level + share),
                      "high": max(level, level + share), "kind": "up" if share >= 0 else "down", "value": share})
        level += share
    steps.append({"text": "B", "low": 0, "high": level, "kind": "total", "value": level})
    return step_chart(steps, t["html-waterfall"])


STEP_COLOURS = {"total": "#8c8c8c", "up": UP_COLOUR, "down": DOWN_COLOUR, "part": "#76b7b2", "waste": "#e15759",
                "request": "#f28e2b", "deficit": "#b07aa1"}


def step_chart(steps: Sequence[Mapping[str, Any]], caption: str) -> dict[str, Any]:
    """Bars from ``low`` to ``high`` bytes, one slot each, labelled below (a waterfall when each starts where
    the last ended); ``kind`` picks the colour, ``value`` the number printed above."""
    box = plot_box(height=HEIGHT + 100)
    box["y1"] -= 100  # room for the slanted names
    box["h"] -= 100
    ticks = nice_ticks(max(st["high"] for st in steps) / GIB * 1.05 or 1.0)
    slot = box["w"] / len(steps)
    bar_w = round(min(70.0, slot * 0.6), 1)
    bars = []
    for i, st in enumerate(steps):
        x = round(box["x0"] + slot * i + (slot - bar_w) / 2, 1)
        y_hi, y_lo = _y(box, st["high"] / GIB, 0, ticks[-1]), _y(box, st["low"] / GIB, 0, ticks[-1])
        sign = "+" if st["kind"] == "up" else ""
        bars.append({"x": x, "y": y_hi, "w": bar_w, "h": max(round(y_lo - y_hi, 1), 1.0),
                     "colour": STEP_COLOURS[st["kind"]], "kind": st["kind"],
                     "text": st["text"], "label_x": round(x + bar_w / 2, 1), "label_y": box["y1"] + 14,
                     "value": f"{sign}{st['value'] / GIB:.2f}", "value_y": round(y_hi - 4, 1),
                     "title": f"{st['text']}: {sign}{st['value'] / GIB:.2f} GiB"})
    return {"box": box, "y_ticks": y_axis(box, ticks), "bars": bars, "caption": caption}


def ledger_view(report: Mapping[str, Any], t: Mapping[str, str]) -> dict[str, Any]:
    """The diagnosis ledger as a waterfall from the GPU's capacity to the failed request.

    Capacity, then each component the ledger names (waste in red), then what the run's tensors held, down to
    the memory free at the failure; beside it the request, whose part above the free memory is the deficit.
    """
    led = report.get("ledger") or {}
    view: dict[str, Any] = {"lead": list(report.get("lead") or []), "chart": None, "rows": []}
    cap, free, req = led.get("capacity_bytes"), led.get("free_bytes"), led.get("request_bytes")
    if not cap:
        return view
    steps: list[dict[str, Any]] = [{"text": t["html-ledger-capacity"], "low": 0, "high": cap, "kind": "total",
                                    "value": cap}]
    level = cap
    for entry in led.get("entries") or []:
        size = max(0.0, min(float(entry["bytes"]), level))
        steps.append({"text": entry["title"], "low": level - size, "high": level,
                      "kind": "waste" if entry.get("kind") == "waste" else "part", "value": size})
        level -= size
    if free is not None and level > free:
        steps.append({"text": t["html-ledger-tensors"], "low": free, "high": level, "kind": "part",
                      "value": level - free})
        level = free
    steps.append({"text": t["html-ledger-free"], "low": 0, "high": level, "kind": "total", "value": level})
    if req:
        steps.append({"text": t["html-ledger-request"], "low": 0, "high": req, "kind": "request", "value": req})
        if req > level:
            steps.append({"text": t["html-ledger-deficit"], "low": level, "high": req, "kind": "deficit",
                          "value": req - level})
    view["rows"] = [(st["text"], gib(st["value"])) for st in steps]  # the table keeps the full names
    short = [{**st, "text": st["text"] if len(st["text"]) <= 32 else st["text"][:31] + "\u2026"} for st in steps]
    view["chart"] = step_chart(short, t["html-ledger"])
    return view


def compare_snapshots_view(r: Any, traces: Sequence[Any], t: Mapping[str, str]) -> dict[str, Any]:
    """Both allocated timelines on one chart (x: each trace's own clock from its first event), peaks marked."""
    series, marks, timed = [], [], True
    for side, trace, colour, dash in zip(("A", "B"), traces, (A_COLOUR, B_COLOUR), ("", "6 3"), strict=True):
        pts = trace_points(trace)
        timed = timed and pts["timed"]
        series.append({"name": f"{side} {t['html-allocated']}", "colour": colour, "dash": dash,
                       "points": pts["allocated"]})
        if pts["peak"] is not None:
            marks.append({"x": pts["peak"][0], "bytes": pts["peak"][1], "colour": colour,
                          "text": f"{side} {t['html-peak']} {pts['peak'][1] / GIB:.2f} GiB"})
    chart = line_chart(series, t["html-time-ms"] if timed else t["html-event"], marks) \
        if any(tr.events for tr in traces) else None
    gap = r.peak_gap_bytes
    return {"chart": chart, "a_label": r.a.label, "b_label": r.b.label,
            "gap": None if gap is None else f"{gap / GIB:+.2f}",
            "sites": [{"site": s.site, "a": gib(s.a_bytes), "b": gib(s.b_bytes), "delta": f"{s.delta_bytes / GIB:+.2f}"}
                      for s in r.peak_sites]}


def compare_logs_view(r: Any, t: Mapping[str, str], max_legend: int = 16) -> dict[str, Any]:
    """Peak allocated per step, one line per rank and log (A solid, B dashed, a rank keeps its colour)."""
    by_rank: dict[Any, list[Any]] = {}
    for p in r.points:  # grouped once: a scan of every point per rank was quadratic in the ranks
        by_rank.setdefault(p.rank, []).append(p)
    ranks = sorted(by_rank, key=lambda v: (v is None, v or 0))
    iters = sorted({p.iteration for p in r.points}, key=lambda v: (v is None, v or 0))
    x_of = {it: (float(it) if it is not None else float(len(iters))) for it in iters}
    series = []
    for n, rank in enumerate(ranks):
        colour = PALETTE[n % len(PALETTE)]
        rows = by_rank[rank]
        for side, dash in (("a", ""), ("b", "6 3")):
            pts = [(x_of[p.iteration], vars_of(p, side)) for p in rows if vars_of(p, side) is not None]
            if pts:
                series.append({"name": f"{side.upper()} {t['html-rank']} {'?' if rank is None else rank}",
                               "colour": colour, "dash": dash, "points": pts})
    chart = line_chart(series, t["html-iteration"]) if series else None
    legend = [{"colour": s["colour"], "dash": s["dash"], "text": s["name"]} for s in series[: 2 * max_legend]]
    div = r.divergence
    return {"chart": chart, "legend": legend, "more": max(0, len(series) - len(legend)),
            "a_label": r.a.label, "b_label": r.b.label,
            "divergence": None if div is None else {"iteration": div.iteration, "rank": div.rank, "metric": div.metric,
                                                    "a": gib(div.a_bytes), "b": gib(div.b_bytes)}}


def vars_of(point: Any, side: str) -> float | None:
    return (point.a if side == "a" else point.b).get("peak_allocated")


# --------------------------------------------------------------------------- plan

SCATTER_TOP = 200  # the best-ranked layouts are always drawn; the rest are thinned to MAX_POINTS in all


def plan_view(data: Mapping[str, Any], t: Mapping[str, str], highlight: int = 5) -> dict[str, Any]:
    """The fitting layouts as peak memory (x) against relative throughput (y), the budget as a vertical line.

    With ``--all`` there can be 10^5 layouts: the best SCATTER_TOP are kept and the rest thinned evenly by rank,
    so the cloud keeps its shape; the first ``highlight`` ranks and the user's own layout are labelled.
    """
    table = data.get("all")
    if table:  # every fitting layout, as rows of the table's columns
        rows, columns = table["rows"], table["columns"]
        stride = max(1, math.ceil(max(0, len(rows) - SCATTER_TOP) / max(1, MAX_POINTS - SCATTER_TOP)))
        picked = [*range(min(SCATTER_TOP, len(rows))), *range(SCATTER_TOP, len(rows), stride)]
        drawn = [dict(zip(columns, rows[i], strict=True)) for i in picked]
        layouts = drawn
    else:
        layouts = [lay for lay in data["layouts"] if lay.get("peak_with_overheads_bytes") is not None]
        rest = layouts[SCATTER_TOP:]
        stride = max(1, math.ceil(len(rest) / max(1, MAX_POINTS - SCATTER_TOP)))
        drawn = layouts[:SCATTER_TOP] + rest[::stride]
    ref = data.get("reference")
    marked = [ref] if ref and ref.get("peak_with_overheads_bytes") is not None else []
    xs = [lay["peak_with_overheads_bytes"] / GIB for lay in drawn + marked] + [data["budget_bytes"] / GIB]
    ys = [lay["relative_throughput"] for lay in drawn + marked] or [1.0]
    box = plot_box()
    x_hi = max(xs) * 1.05 or 1.0
    x_ticks = nice_ticks(x_hi)
    y_ticks = nice_ticks(max(ys) * 1.05 or 1.0)
    x_top, y_top = x_ticks[-1], y_ticks[-1]

    def point(lay: Mapping[str, Any]) -> dict[str, Any]:
        return {"x": _x(box, lay["peak_with_overheads_bytes"] / GIB, 0, x_top),
                "y": _y(box, lay["relative_throughput"], 0, y_top), "rank": lay.get("rank"),
                "text": f"{lay.get('rank') or '-'}: TP{lay['tp']} PP{lay['pp']} VPP{lay['vpp']} CP{lay['cp']} "
                        f"EP{lay['ep']} MBS{lay['micro_batch_size']}, {lay['recompute']}, {lay['model_state']}"
                        f"{', ' + lay['activation_offload'] if lay.get('activation_offload') else ''}: "
                        f"{gib(lay['peak_with_overheads_bytes'])} GiB, x{lay['relative_throughput']:.3f}"}

    return {
        "box": box, "points": [point(lay) for lay in drawn[highlight:]],
        "top": [point(lay) for lay in drawn[:highlight]], "reference": [point(lay) for lay in marked],
        "budget": {"x": _x(box, data["budget_bytes"] / GIB, 0, x_top),
                   "text": f"{t['html-plan-budget']} {gib(data['budget_bytes'])} GiB"},
        "x_ticks": [{"x": _x(box, v, 0, x_top), "text": f"{v:g}"} for v in x_ticks],
        "y_ticks": [{"y": _y(box, v, 0, y_top), "text": f"{v:g}"} for v in y_ticks],
        "fitting": len(table["rows"]) if table else len(layouts), "drawn": len(drawn),
        "table": [point(lay) for lay in drawn[:highlight]],
    }


# --------------------------------------------------------------------------- page


@lru_cache(maxsize=1)
def _environment():
    """One environment per process: each page template is compiled once (see render._environment)."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True, trim_blocks=True,
                              lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def page(block: str, view: Mapping[str, Any], t: Mapping[str, str], lang: str, title: str) -> str:
    """The whole HTML document: report.html.j2 around ``html_<block>.html.j2``."""
    return _environment().get_template(f"html_{block}.html.j2").render(v=view, t=t, lang=lang, title=title)


# --------------------------------------------------------------------------- one page per command


def diagnose_page(report: Mapping[str, Any], kb: Any, lang: str) -> str:
    from .render import lead_lines

    t = labels(kb, lang)
    lead = [line.replace("**", "").replace("`", "") for line in lead_lines(report, t)]
    return page("diagnose", ledger_view({**report, "lead": lead}, t), t, lang, t["html-title-diagnose"])


def estimate_page(result: Mapping[str, Any], kb: Any, lang: str) -> str:
    t = labels(kb, lang)
    return page("estimate", estimate_view(result, t), t, lang, t["html-title-estimate"])


def plan_page(data: Mapping[str, Any], kb: Any, lang: str) -> str:
    from .plan import tie_note

    t = labels(kb, lang)
    view = {**plan_view(data, t), "tie": tie_note(data, prefixed(kb, lang, "plan-"))}
    return page("plan", view, t, lang, t["html-title-plan"])


def snapshot_page(summary: Mapping[str, Any], trace: Any, kb: Any, lang: str) -> str:
    t = labels(kb, lang)
    return page("snapshot", snapshot_view(summary, trace, t), t, lang, t["html-title-snapshot"])


def compare_page(result: Any, kb: Any, lang: str, traces: Sequence[Any] = ()) -> str:
    """``traces``: the two snapshots' full event lists (a snapshot comparison keeps only its summary)."""
    t = labels(kb, lang)
    if result.kind == "configs":
        view = compare_configs_view(result, t)
    elif result.kind == "logs":
        view = compare_logs_view(result, t)
    else:
        view = compare_snapshots_view(result, traces, t)
    return page(f"compare_{result.kind}", view, t, lang, t[f"html-title-compare-{result.kind}"])
