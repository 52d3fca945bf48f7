"""Two memory snapshots: their timeline peaks, where the allocation sequences part, and which sites make the gap.

Each trace is replayed from the state its snapshot ends in (a trace may start mid-run), so the live
bytes after every event, and the peak, are those ``memtune snapshot`` reports.  Live memory at a
moment is grouped by allocation site; memory allocated before the trace started counts under
BEFORE_TRACE, so the site groups add up to the live total exactly, and the site differences to the gap.

Runs are aligned by the order of their alloc / free events, not by clock time (two runs never start at
the same microsecond): the divergence is the first event whose action or size differs.  ``--at`` takes
a time in microseconds since each trace's first event, or ``step:N``, the end of the N-th optimizer
step (``Optimizer.step#`` annotations; ``step:0`` is the start of the trace).
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from ..errors import UserError
from ..inputs.snapshot_trace import LIVE_ACTIONS, SEGMENT_ACTIONS, SnapshotTrace, TraceEvent
from .tolerance import Tolerance

BEFORE_TRACE = "<before-trace>"  # allocated before the first traced event and still live
NO_FRAME = "<no-python-frame>"  # allocated from C++ only (autograd engine, NCCL ...)
OTHER = "<other-sites>"  # the sites past --top, summed
NO_PEAK = -1  # peak_position of a snapshot without a trace
_AT = re.compile(r"^(?:step:(?P<step>\d+)|(?P<us>\d+)(?:\s*us)?)$")


@dataclass(frozen=True, slots=True)
class At:
    text: str
    step: int | None = None
    offset_us: int | None = None


@dataclass(slots=True)
class SiteGap:
    site: str
    a_bytes: int
    b_bytes: int
    delta_bytes: int


@dataclass(slots=True)
class Moment:
    """One side at one moment: after trace event ``event`` (None: before the first event)."""

    event: int | None  # index in the snapshot's device trace
    offset_us: int | None  # since the trace's first event
    live_bytes: int
    reserved_bytes: int


@dataclass(slots=True)
class EventView:
    event: int  # index in the snapshot's device trace
    action: str
    size: int
    site: str | None
    offset_us: int | None
    live_before_bytes: int


@dataclass(slots=True)
class SnapSide:
    label: str
    file: str
    device: int
    events: int
    peak: Moment | None  # None: the snapshot has no trace
    end_allocated_bytes: int
    end_reserved_bytes: int
    oom_kind: str | None  # capacity | fragmentation | unclear, when the trace ends in an OOM
    optimizer_steps: int


@dataclass(slots=True)
class Divergence:
    position: int | None  # alloc/free events alike before it; None: the memory live before the traces differs
    a: EventView | None  # None: that trace ended first
    b: EventView | None


@dataclass(slots=True)
class Replay:
    at: str
    a: Moment | None
    b: Moment | None
    a_note: str | None
    b_note: str | None
    sites: list[SiteGap]


@dataclass(slots=True)
class SnapshotComparison:
    kind: str
    tolerance: str
    a: SnapSide
    b: SnapSide
    peak_gap_bytes: int | None
    first_different_event: Divergence | None
    first_gap_over_tolerance: Divergence | None
    peak_sites: list[SiteGap]  # live at each run's own peak, by site, largest difference first; sums to the gap
    at: Replay | None


def parse_at(text: str) -> At:
    """``step:N`` or a time in microseconds since the trace's first event (``1500000`` / ``1500000us``)."""
    m = _AT.match(text.strip())
    if not m:
        raise UserError(f"--at {text!r}: expected step:N or a time in microseconds since the trace start")
    if m.group("step") is not None:
        return At(text=text.strip(), step=int(m.group("step")))
    return At(text=text.strip(), offset_us=int(m.group("us")))


def compare_snapshots(a: SnapshotTrace, b: SnapshotTrace, tolerance: Tolerance, *, at: At | None = None,
                      top: int = 10, labels: tuple[str, str] = ("A", "B")) -> SnapshotComparison:
    traces = (a, b)
    live = [_live(t) for t in traces]
    found = [peak_position(t, lv) for t, lv in zip(traces, live, strict=True)]
    peaks = [_moment(t, lv, p) if p != NO_PEAK else None for t, lv, p in zip(traces, live, found, strict=True)]
    sides = [_side(t, p, label) for t, p, label in zip(traces, peaks, labels, strict=True)]
    gap = sites = None
    if peaks[0] and peaks[1]:
        gap = peaks[1].live_bytes - peaks[0].live_bytes
        sites = site_gaps(live_sites(a, found[0]), live_sites(b, found[1]), top)
    return SnapshotComparison(
        kind="snapshots", tolerance=tolerance.text, a=sides[0], b=sides[1], peak_gap_bytes=gap,
        first_different_event=first_different_event(a, b), first_gap_over_tolerance=first_gap(a, b, tolerance),
        peak_sites=sites or [], at=replay_at(a, b, at, top) if at else None)


def _live(trace: SnapshotTrace) -> list[tuple[int, int]]:
    """(live, reserved) bytes after each event."""
    cur, res = trace.start_bytes, trace.start_reserved_bytes
    out = []
    for e in trace.events:
        if e.action == "alloc":
            cur += e.size
        elif e.action == "free_completed":
            cur -= e.size
        elif e.action in SEGMENT_ACTIONS:
            res += SEGMENT_ACTIONS[e.action] * e.size
        out.append((cur, res))
    return out


def _offset(trace: SnapshotTrace, event: TraceEvent) -> int | None:
    if event.time_us is None or trace.start_time_us is None:
        return None
    return event.time_us - trace.start_time_us


def _moment(trace: SnapshotTrace, live: list[tuple[int, int]], index: int | None) -> Moment:
    if index is None:
        return Moment(event=None, offset_us=0 if trace.start_time_us is not None else None,
                      live_bytes=trace.start_bytes, reserved_bytes=trace.start_reserved_bytes)
    cur, res = live[index]
    event = trace.events[index]
    return Moment(event=event.trace_index, offset_us=_offset(trace, event), live_bytes=cur, reserved_bytes=res)


def peak_position(trace: SnapshotTrace, live: list[tuple[int, int]]) -> int | None:
    """Position of the first event at which live memory is highest (the moment snapshot.py's timeline peak
    names); None when nothing in the trace rises above its start, NO_PEAK when there is no trace."""
    if not trace.events:
        return NO_PEAK
    best = max(range(len(live)), key=lambda i: (live[i][0], -i))
    return best if live[best][0] > trace.start_bytes else None


def _side(trace: SnapshotTrace, peak: Moment | None, label: str) -> SnapSide:
    s = trace.summary
    return SnapSide(label=label, file=trace.file, device=trace.device, events=len(trace.events), peak=peak,
                    end_allocated_bytes=s["allocated_bytes"], end_reserved_bytes=s["reserved_bytes"],
                    oom_kind=s.get("oom_kind"), optimizer_steps=len(trace.step_ends_us))


def live_sites(trace: SnapshotTrace, index: int | None) -> dict[str, int]:
    """Bytes live after event ``index`` by allocation site; they add up to the live total."""
    blocks: dict[int | None, tuple[int, str]] = {}
    before = trace.start_bytes
    extra: dict[str, int] = defaultdict(int)  # allocs without an address cannot be freed by address
    for e in trace.events[: index + 1] if index is not None else ():
        if e.action == "alloc":
            site = e.site or NO_FRAME
            if e.addr is None:
                extra[site] += e.size
            else:
                blocks[e.addr] = (e.size, site)
        elif e.action == "free_completed":
            held = blocks.pop(e.addr, None) if e.addr is not None else None
            if held is None:
                before -= e.size  # allocated before the trace started
    out: dict[str, int] = defaultdict(int, extra)
    for size, site in blocks.values():
        out[site] += size
    if before:
        out[BEFORE_TRACE] += before
    return dict(out)


def site_gaps(a: dict[str, int], b: dict[str, int], top: int) -> list[SiteGap]:
    """Per-site difference B - A, largest magnitude first; sites past ``top`` are summed into OTHER."""
    rows = [SiteGap(site=s, a_bytes=a.get(s, 0), b_bytes=b.get(s, 0), delta_bytes=b.get(s, 0) - a.get(s, 0))
            for s in a.keys() | b.keys()]
    rows = [r for r in rows if r.a_bytes or r.b_bytes]
    rows.sort(key=lambda r: (-abs(r.delta_bytes), -max(r.a_bytes, r.b_bytes), r.site))
    head, tail = rows[:top], rows[top:]
    if tail:
        head.append(SiteGap(site=OTHER, a_bytes=sum(r.a_bytes for r in tail), b_bytes=sum(r.b_bytes for r in tail),
                            delta_bytes=sum(r.delta_bytes for r in tail)))
    return head


def _live_events(trace: SnapshotTrace) -> list[tuple[TraceEvent, int]]:
    """alloc / free events with the live bytes just before each."""
    cur = trace.start_bytes
    out = []
    for e in trace.events:
        if e.action in LIVE_ACTIONS:
            out.append((e, cur))
            cur += e.size if e.action == "alloc" else -e.size
    return out


def _view(trace: SnapshotTrace, item: tuple[TraceEvent, int] | None) -> EventView | None:
    if item is None:
        return None
    e, before = item
    return EventView(event=e.trace_index, action=e.action, size=e.size, site=e.site, offset_us=_offset(trace, e),
                     live_before_bytes=before)


def first_different_event(a: SnapshotTrace, b: SnapshotTrace) -> Divergence | None:
    """The first alloc/free whose action or size differs (or where one trace ends); None if they match."""
    xs, ys = _live_events(a), _live_events(b)
    for k in range(max(len(xs), len(ys))):
        x, y = (xs[k] if k < len(xs) else None), (ys[k] if k < len(ys) else None)
        if x is None or y is None or (x[0].action, x[0].size) != (y[0].action, y[0].size):
            return Divergence(position=k, a=_view(a, x), b=_view(b, y))
    return None


def first_gap(a: SnapshotTrace, b: SnapshotTrace, tolerance: Tolerance) -> Divergence | None:
    """The first aligned alloc/free after which live memory differs by more than ``tolerance``."""
    if tolerance.exceeded(a.start_bytes, b.start_bytes):
        return Divergence(position=None, a=None, b=None)
    xs, ys = _live_events(a), _live_events(b)
    for k, (x, y) in enumerate(zip(xs, ys, strict=False)):
        after = [item[1] + (item[0].size if item[0].action == "alloc" else -item[0].size) for item in (x, y)]
        if tolerance.exceeded(after[0], after[1]):
            return Divergence(position=k, a=_view(a, x), b=_view(b, y))
    return None


def resolve(trace: SnapshotTrace, at: At) -> tuple[int | None, str | None] | None:
    """(position of the last event at or before the moment, None: before the first; a note such as ``past-end``),
    or None when the trace has no such moment (no timestamps, or fewer optimizer steps than asked for)."""
    if trace.start_time_us is None:
        return None
    if at.step is not None:
        if at.step == 0:
            return None, None
        if at.step > len(trace.step_ends_us):
            return None
        target = trace.step_ends_us[at.step - 1]
    else:
        target = trace.start_time_us + (at.offset_us or 0)
    index = None
    for e in trace.events:
        if e.time_us is not None and e.time_us <= target:
            index = e.index
    last = max((e.time_us for e in trace.events if e.time_us is not None), default=trace.start_time_us)
    note = "past-end" if target > last else None
    return index, note


def replay_at(a: SnapshotTrace, b: SnapshotTrace, at: At, top: int) -> Replay:
    moments: list[Moment | None] = []
    notes: list[str | None] = []
    sites: list[dict[str, int]] = []
    for trace in (a, b):
        found = resolve(trace, at)
        if found is None:
            moments.append(None)
            notes.append("no-step" if at.step is not None and trace.start_time_us is not None else "no-trace")
            sites.append({})
            continue
        index, note = found
        moments.append(_moment(trace, _live(trace), index))
        notes.append(note)
        sites.append(live_sites(trace, index))
    return Replay(at=at.text, a=moments[0], b=moments[1], a_note=notes[0], b_note=notes[1],
                  sites=site_gaps(sites[0], sites[1], top))
