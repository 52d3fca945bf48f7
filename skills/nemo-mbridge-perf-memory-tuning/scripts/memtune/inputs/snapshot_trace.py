"""The allocation trace of a memory snapshot, as events ``memtune compare`` can replay.

``snapshot.summarize`` reduces the trace to a few numbers; comparing two runs needs the events
themselves (what was live when, allocated where).  The file is read only through snapshot.py's
restricted loader, and each event's site is named by the same rule as ``memtune snapshot``'s top
sites, so the two commands name a site alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from .snapshot import SiteNamer, _int_or_none, load_snapshot, summarize

LIVE_ACTIONS = ("alloc", "free_completed")  # what the timeline peak counts, as snapshot._timeline does
SEGMENT_ACTIONS = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
# torch.optim.Optimizer wraps every step in record_function(f"Optimizer.step#{cls}.step") (torch/optim/optimizer.py);
# with record_memory_history on, its START / END land in the snapshot's external_annotations.
STEP_ANNOTATION = "Optimizer.step#"


@dataclass(frozen=True, slots=True)
class TraceEvent:
    index: int  # position among the replayed events (0 = first)
    trace_index: int  # position in the snapshot's device trace, as PyTorch's memory viz numbers it
    action: str  # alloc | free_completed | segment_* | oom
    addr: int | None
    size: int
    time_us: int | None
    site: str | None  # innermost Megatron/TE frame, else user code, else library; None without a Python frame


@dataclass(slots=True)
class SnapshotTrace:
    file: str
    device: int
    summary: dict[str, Any]  # snapshot.summarize of the same data
    events: list[TraceEvent]
    start_bytes: int  # allocated before the first event (anchored at the snapshot's end state)
    start_reserved_bytes: int
    start_time_us: int | None
    step_ends_us: list[int] = field(default_factory=list)  # END of each optimizer step annotation, in order


def load_trace(path: str | Path, top: int = 10) -> SnapshotTrace:
    """The replayable trace of the device ``memtune snapshot`` reports on (the OOM one, else the fullest);
    ``top``: allocation sites its summary lists, as ``memtune snapshot --top``."""
    path = Path(path)
    data = load_snapshot(path)
    try:
        summary = summarize(data, str(path), top=top, file_bytes=path.stat().st_size)
    except (OverflowError, ValueError) as exc:
        raise UserError(f"{path}: not a readable snapshot (a number is out of range: {str(exc).split(';')[0]})") \
            from None
    device = summary["device"]
    traces = data.get("device_traces") if isinstance(data, dict) else None
    raw = traces[device] if isinstance(traces, list) and 0 <= device < len(traces) else None
    events = _events(raw if isinstance(raw, list) else [])
    live = sum(e.size if e.action == "alloc" else -e.size for e in events if e.action in LIVE_ACTIONS)
    reserved = sum(SEGMENT_ACTIONS[e.action] * e.size for e in events if e.action in SEGMENT_ACTIONS)
    times = [e.time_us for e in events if e.time_us is not None]
    return SnapshotTrace(
        file=path.name, device=device, summary=summary, events=events,
        start_bytes=summary["active_bytes"] - live, start_reserved_bytes=summary["reserved_bytes"] - reserved,
        start_time_us=min(times) if times else None,
        step_ends_us=_step_ends(data.get("external_annotations") if isinstance(data, dict) else None, device))


def _events(trace: list[Any]) -> list[TraceEvent]:
    """Events that change live or reserved memory, plus OOMs; a frame list shared by many events is read once."""
    sites: dict[int, str | None] = {}
    namer = SiteNamer()
    out: list[TraceEvent] = []
    for raw_index, ev in enumerate(trace):
        if not isinstance(ev, dict):
            continue
        action, size = ev.get("action"), _int_or_none(ev.get("size"))
        if size is None or not isinstance(action, str) or not (
                action in LIVE_ACTIONS or action in SEGMENT_ACTIONS or action == "oom"):
            continue
        site = None
        if action == "alloc":
            frames = ev.get("frames")
            if isinstance(frames, list):
                if id(frames) not in sites:
                    found = namer.site(frames)
                    sites[id(frames)] = found[0] if found else None
                site = sites[id(frames)]
        out.append(TraceEvent(index=len(out), trace_index=raw_index, action=action, addr=_int_or_none(ev.get("addr")),
                              size=size, time_us=_int_or_none(ev.get("time_us")), site=site))
    return out


def _step_ends(annotations: Any, device: int) -> list[int]:
    if not isinstance(annotations, list):
        return []
    ends = [_int_or_none(a.get("time_us")) for a in annotations
            if isinstance(a, dict) and a.get("stage") == "END" and isinstance(a.get("name"), str)
            and a["name"].startswith(STEP_ANNOTATION)
            and a.get("device", device) == device]
    return sorted(t for t in ends if t is not None)
