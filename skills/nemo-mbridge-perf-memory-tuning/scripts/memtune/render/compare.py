"""Lay out a ``memtune compare`` result: plain-text tables and bars, or the JSON document.

Only layout lives here; every number comes from the comparison (memtune/compare/) and every label
from knowledge/ui.yaml (``compare-*`` ids, en and zh).
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass, replace
from itertools import islice
from typing import Any

from ..compare.logs import Point, Points
from ..knowledge import Knowledge
from .grid import bar, table
from .labels import labels

GIB = 2**30


def to_json(result: Any) -> dict[str, Any]:
    """The JSON document (knowledge/schema/compare.schema.json): the result's dataclasses as plain data."""
    if not is_dataclass(result):
        return dict(result)
    if isinstance(getattr(result, "points", None), Points):  # logs: points are made on demand, not held
        doc = asdict(replace(result, points=[]))
        doc["points"] = [_point_json(p) for p in islice(result.points, MAX_JSON_POINTS)]
        if len(result.points) > MAX_JSON_POINTS:
            doc["points_left_out"] = len(result.points) - MAX_JSON_POINTS
        return doc
    return asdict(result)


# Points a JSON answer lists: two 50 MB report-dense logs hold 726k (a 147 MB answer built in 1.4 GB, which no
# agent reads); the per-rank peaks and the first divergence are computed from all of them either way.
MAX_JSON_POINTS = 20_000


def _point_json(p: Point) -> dict[str, Any]:
    """``asdict(p)``, written out: a 50 MB log has 330k points and asdict's generic walk was most of their cost."""
    return {"rank": p.rank, "iteration": p.iteration,
            "a": {"peak_allocated": p.a.peak_allocated, "allocated": p.a.allocated,
                  "peak_reserved": p.a.peak_reserved, "reserved": p.a.reserved},
            "b": {"peak_allocated": p.b.peak_allocated, "allocated": p.b.allocated,
                  "peak_reserved": p.b.peak_reserved, "reserved": p.b.reserved}}


def render_text(result: Any, kb: Knowledge, lang: str = "en") -> str:
    t = labels(kb, lang)
    lines = {"configs": _configs, "logs": _logs, "snapshots": _snapshots}[result.kind](result, t)
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- numbers


def size(value: float | None) -> str:
    """GiB from 1 GiB up, MiB from 1 MiB, else KiB; '-' for unknown."""
    if value is None:
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= GIB:
        return f"{value / GIB:.2f} GiB"
    if magnitude >= 2**20:
        return f"{value / 2**20:.1f} MiB"
    return f"{value / 2**10:.1f} KiB"


def signed(value: float | None) -> str:
    if value is None:
        return "-"
    text = size(value)
    return text if text.startswith("-") or value == 0 else "+" + text


def gib(value: float | None, sign: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value / GIB:+.2f}" if sign else f"{value / GIB:.2f}"


def value_text(value: Any) -> str:
    """A setting's value as the user would write it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={v}" for k, v in sorted(value.items())) + "}" if value else "{}"
    return str(value)


# --------------------------------------------------------------------------- configs


def _env_diff(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, str]:
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return (value_text({k: a[k] for k in keys if k in a}), value_text({k: b[k] for k in keys if k in b}))


def _configs(r: Any, t: dict[str, str]) -> list[str]:
    metric = t["compare-metric-allocated"] if r.metric == "allocated_peak_bytes" else t["compare-metric-overheads"]
    out = [f"{t['compare-title-configs']} ({metric}, {t['compare-unit-gib']})",
           f"A = {r.a.label}", f"B = {r.b.label}"]
    if r.gpu:
        out.append(f"{t['compare-gpu']}: {r.gpu['name']} ({gib(r.gpu['capacity_bytes'])} GiB); "
                   f"{t['compare-capacity']} A {_pct(r.a.capacity_ratio)}, B {_pct(r.b.capacity_ratio)}")
    out.append("")
    a_by, b_by = ({s.pp_rank: s.bytes for s in side.stages} for side in (r.a, r.b))
    a_last, b_last = r.a.stages[-1], r.b.stages[-1]
    out += table([
        ["", "A", "B", "B - A"],
        [t["compare-peak-stage"], f"{gib(max(a_by.values()))} ({r.a.peak_stage})",
         f"{gib(max(b_by.values()))} ({r.b.peak_stage})", gib(r.total.peak, True)],
        [t["compare-stage-0"], gib(a_by[0]), gib(b_by[0]), gib(r.total.first, True)],
        [t["compare-last-stage"], f"{gib(a_last.bytes)} ({a_last.pp_rank})", f"{gib(b_last.bytes)} ({b_last.pp_rank})",
         gib(r.total.last, True)],
    ])
    out += ["", f"{t['compare-bars']}:"]
    scale = max([*a_by.values(), *b_by.values()])
    for rank in range(max(len(a_by), len(b_by))):
        for side, by in (("A", a_by), ("B", b_by)):
            head = f"{t['compare-stage']} {rank}" if side == "A" else ""
            value = by.get(rank)
            shown = f"{bar(value, scale)} {gib(value)}" if value is not None else t["compare-no-stage"]
            out.append(f"  {head:<10} {side} {shown}")
    out += ["", f"{t['compare-attribution']} ({t['compare-order']}: {r.order_text}; {t['compare-telescoping']}):"]
    if not r.changes:
        out.append(f"  {t['compare-no-changes']}")
        return out
    rows = [[t["compare-setting"], "A -> B", t["compare-peak"], t["compare-stage-0"], t["compare-last-stage"]]]
    for c in r.changes:
        for i, name in enumerate(c.fields):
            a_text, b_text = (_env_diff(c.a[name], c.b[name]) if name == "env_vars"
                              else (value_text(c.a[name]), value_text(c.b[name])))
            given = f"  (--set {c.given[name]})" if name in c.given else ""
            first = i == 0
            rows.append([("" if first else "+ ") + name, f"{a_text} -> {b_text}{given}",
                         *((gib(c.shares.peak, True), gib(c.shares.first, True), gib(c.shares.last, True)) if first
                           else ("", "", ""))])
    rows.append([t["compare-total"], "", gib(r.total.peak, True), gib(r.total.first, True), gib(r.total.last, True)])
    out += ["  " + line for line in table(rows, left=2)]
    grouped = [c for c in r.changes if c.grouped_because]
    for c in grouped:
        out.append(f"  {' + '.join(c.fields)}: {t['compare-grouped']} ({c.grouped_because})")
    for side in (r.a, r.b):
        for warning in side.warnings:
            out.append(f"  {side.label}: {warning}")
    return out


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f} %"


# --------------------------------------------------------------------------- logs

_LOG_METRICS = ("peak_allocated", "allocated", "reserved")  # JSON has peak_reserved too
_OOM_ROWS = (("requested_bytes", "compare-oom-requested"), ("capacity_bytes", "compare-oom-capacity"),
             ("free_bytes", "compare-oom-free"), ("allocated_bytes", "compare-oom-allocated"),
             ("reserved_bytes", "compare-oom-reserved"), ("reserved_unallocated_bytes", "compare-oom-unallocated"),
             ("process_bytes", "compare-oom-process"))


def _rank(rank: int | None, t: dict[str, str]) -> str:
    return t["compare-rank-unknown"] if rank is None else str(rank)


def _span(values: list[int | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{min(known)}..{max(known)}" if known else "-"


def _logs(r: Any, t: dict[str, str]) -> list[str]:
    out = [f"{t['compare-title-logs']} ({t['compare-unit-gib']})"]
    for name, side in (("A", r.a), ("B", r.b)):
        out.append(f"{name} = {side.label}: {side.reports} {t['compare-report-lines']}, "
                   f"{t['compare-ranks']} {', '.join(_rank(x, t) for x in side.ranks) or '-'}, "
                   f"{t['compare-iterations']} {_span(side.iterations)}")
    out.append("")
    if r.ranks:
        out.append(f"{t['compare-per-rank']}:")
        head = [t["compare-rank"]]
        for m in _LOG_METRICS:
            head += [f"{t['compare-log-' + m.replace('_', '-')]} A", "B", "B - A"]
        rows = [head]
        for rp in r.ranks:
            row = [_rank(rp.rank, t)]
            for m in _LOG_METRICS:
                x, y = rp.a[m], rp.b[m]
                row += [gib(x), gib(y), gib(y - x, True) if x is not None and y is not None else "-"]
            rows.append(row)
        out += ["  " + line for line in table(rows)]
    else:
        out.append(t["compare-no-common-rank"])
    for name, only in (("A", r.only_in_a), ("B", r.only_in_b)):
        if only:
            out.append(f"{t['compare-only-in']} {name}: {t['compare-ranks']} {', '.join(_rank(x, t) for x in only)}")
    out.append("")
    d = r.divergence
    if d:
        metric = t["compare-log-" + d.metric.replace("_", "-")]
        out.append(f"{t['compare-divergence']} ({t['compare-tolerance']} {r.tolerance}): {t['compare-iteration']} "
                   f"{d.iteration}, {t['compare-rank']} {_rank(d.rank, t)}, {metric} "
                   f"{gib(d.a_bytes)} -> {gib(d.b_bytes)} GiB ({gib(d.b_bytes - d.a_bytes, True)})")
    else:
        out.append(f"{t['compare-divergence']} ({t['compare-tolerance']} {r.tolerance}): "
                   f"{t['compare-no-divergence'] if r.points else t['compare-no-common-step']} "
                   f"({len(r.points)} {t['compare-points']})")
    out += ["", f"{t['compare-oom']}:"]
    if not (r.a.oom or r.b.oom):
        out.append(f"  {t['compare-no-oom']}")
        return out
    rows = [["", "A", "B"]]
    ooms = (r.a.oom, r.b.oom)
    rows.append([t["compare-oom-kind"], *((o.kind or "-") if o else t["compare-none"] for o in ooms)])
    rows.append([t["compare-rank"], *(_rank(o.rank, t) if o else "-" for o in ooms)])
    rows.append([t["compare-oom-phase"], *((o.phase or "-") if o else "-" for o in ooms)])
    for key, label in _OOM_ROWS:
        rows.append([t[label], *(size(o.numbers.get(key)) if o else "-" for o in ooms)])
    out += ["  " + line for line in table(rows)]
    for name, o in (("A", ooms[0]), ("B", ooms[1])):
        if o and o.first_error:
            out.append(f"  {name}: {o.first_error}")
    return out


# --------------------------------------------------------------------------- snapshots


def _site(site: str | None, t: dict[str, str]) -> str:
    return {"<before-trace>": t["compare-site-before"], "<no-python-frame>": t["compare-site-no-frame"],
            "<other-sites>": t["compare-site-other"], None: t["compare-site-no-frame"]}.get(site, site or "")


def _event(view: Any, t: dict[str, str]) -> str:
    if view is None:
        return t["compare-trace-ended"]
    return (f"#{view.event} {view.action} {size(view.size)} @ {_site(view.site, t) if view.site else '-'}, "
            f"{view.offset_us if view.offset_us is not None else '?'} us, {t['compare-live-before']} "
            f"{size(view.live_before_bytes)}")


def _site_rows(sites: list[Any], t: dict[str, str]) -> list[str]:
    rows = [[t["compare-site"], "A", "B", "B - A"]]
    rows += [[_site(s.site, t), size(s.a_bytes), size(s.b_bytes), signed(s.delta_bytes)] for s in sites]
    return ["  " + line for line in table(rows)]


def _snapshots(r: Any, t: dict[str, str]) -> list[str]:
    out = [t["compare-title-snapshots"]]
    for name, side in (("A", r.a), ("B", r.b)):
        oom = f", OOM ({side.oom_kind})" if side.oom_kind else ""
        out.append(f"{name} = {side.file}: {t['compare-device']} {side.device}, {side.events} "
                   f"{t['compare-events']}, {side.optimizer_steps} {t['compare-optimizer-steps']}{oom}")
    out.append("")
    pa, pb = r.a.peak, r.b.peak
    rows = [["", "A", "B", "B - A"],
            [t["compare-timeline-peak"], size(pa.live_bytes if pa else None), size(pb.live_bytes if pb else None),
             signed(r.peak_gap_bytes)],
            [t["compare-peak-at"], *(str(p.offset_us) if p and p.offset_us is not None else "-" for p in (pa, pb)), ""],
            [t["compare-reserved-at-peak"], size(pa.reserved_bytes if pa else None),
             size(pb.reserved_bytes if pb else None),
             signed(pb.reserved_bytes - pa.reserved_bytes) if pa and pb else "-"],
            [t["compare-end-allocated"], size(r.a.end_allocated_bytes), size(r.b.end_allocated_bytes),
             signed(r.b.end_allocated_bytes - r.a.end_allocated_bytes)],
            [t["compare-end-reserved"], size(r.a.end_reserved_bytes), size(r.b.end_reserved_bytes),
             signed(r.b.end_reserved_bytes - r.a.end_reserved_bytes)]]
    out += ["  " + line for line in table(rows)]
    out.append("")
    d = r.first_different_event
    out.append(f"{t['compare-first-different']}: " + (
        t["compare-same-sequence"] if d is None else
        f"{t['compare-alike']}: {d.position}\n    A: {_event(d.a, t)}\n    B: {_event(d.b, t)}"))
    g = r.first_gap_over_tolerance
    out.append(f"{t['compare-first-gap']} ({t['compare-tolerance']} {r.tolerance}): " + (
        t["compare-no-divergence"] if g is None else t["compare-gap-at-start"] if g.position is None else
        f"{t['compare-position']} {g.position}\n    A: {_event(g.a, t)}\n    B: {_event(g.b, t)}"))
    if r.peak_sites:
        out += ["", f"{t['compare-peak-sites']}:"]
        out += _site_rows(r.peak_sites, t)
    if r.at:
        out += ["", f"{t['compare-at']} {r.at.at} ({t['compare-at-meaning']}):"]
        for name, m, note in (("A", r.at.a, r.at.a_note), ("B", r.at.b, r.at.b_note)):
            if m is None:
                out.append(f"  {name}: {t['compare-at-' + (note or 'no-trace')]}")
                continue
            where = f"#{m.event}" if m.event is not None else t["compare-trace-start"]
            extra = f" ({t['compare-at-past-end']})" if note == "past-end" else ""
            out.append(f"  {name}: {size(m.live_bytes)} {t['compare-live']}, {size(m.reserved_bytes)} "
                       f"{t['compare-reserved']} ({where}, {m.offset_us} us){extra}")
        if r.at.sites:
            out += _site_rows(r.at.sites, t)
    return out
