"""Read a PyTorch CUDA memory snapshot pickle safely and reduce it to the numbers rules use.

A snapshot (``torch.cuda.memory._dump_snapshot`` / Bridge's OOM observer) is plain
data: dicts, lists, strings, ints, floats and tuples.  Ordinary ``pickle.load``
would run any callable a crafted file names, so the unpickler here refuses every
global lookup and persistent id: a file that needs one is not a snapshot and is
rejected before anything in it runs.

Two layouts are accepted: the dict form (``segments``, ``device_traces``, and in
newer PyTorch ``allocator_settings`` / ``external_annotations``) and the old bare
list of segments.  Field meanings follow PyTorch's ``torch/cuda/_memory_viz.py``
and ``memory_snapshot.cpp`` (see research/peers.md sec. 3.5).
"""

from __future__ import annotations

import io
import pickle
import re
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..textfmt import brief as _brief
from . import limits

ALLOCATED = "active_allocated"
PENDING_FREE = ("active_pending_free", "active_awaiting_free")  # C++ name, Python docstring name
INACTIVE = "inactive"
BLOCK_STATES = (ALLOCATED, *PENDING_FREE, INACTIVE)
DEFAULT_POOL = (0, 0)

# Frames that say nothing about *who* allocated: interpreter/C++ frames and library plumbing.
_INTERNAL_FRAME = re.compile(
    r"(^<)|([/\\](torch|functorch|triton|importlib)[/\\])|([/\\]lib[/\\]python3\.\d+[/\\](?!site-packages|dist-packages))"
)
_THIRD_PARTY = re.compile(r"[/\\](site|dist)-packages[/\\]")
# Package roots whose dotted module name is more telling than a file name.
_NAMED_PACKAGES = ("megatron", "transformer_engine")


class _Refused(Exception):
    """The pickle asked for something a plain-data snapshot never needs."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds only what pickle opcodes create natively (dict, list, tuple, str, bytes, numbers)."""

    def find_class(self, module: str, name: str) -> Any:  # noqa: D401 - pickle hook
        raise _Refused(f"{module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise _Refused(f"persistent id {_brief(pid)}")


def _memo_indices_bounded(data: bytes) -> bool:
    """Every PUT index below the opcode count, as a real pickler writes them (portable, slower check).

    Only where the address-space bound is unavailable: the C unpickler sizes its memo array by
    the largest index, so a 10-byte file with index 2**28 would take 4 GB.
    """
    import pickletools

    count = 0
    for op, arg, _ in pickletools.genops(data):
        count += 1
        if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and int(arg) > count:
            return False
    return True


# Hashing a tuple recurses in C with no depth check (tuplehash), so a 150 KB pickle holding a
# 150,000-deep tuple used as a dict key overflowed the main thread's stack (SIGSEGV, no message).  Each
# level takes ~60 bytes of C stack (CPython 3.11, measured); the unpickler runs on a thread whose stack
# covers twice that for the deepest tuple the file could build.
STACK_PER_LEVEL = 128
STACK_FLOOR = 16 * limits.MIB
STACK_CAP = 2048 * limits.MIB  # virtual; only touched pages cost memory
# Opcodes that build a tuple or frozenset from items already on the stack (TUPLE1-3, FROZENSET; TUPLE
# needs a MARK too): no tuple can nest deeper than the file holds these bytes, wherever they appear.
_TUPLE_OPS = (b"\x85", b"\x86", b"\x87", b"\x91")


def nesting_bound(data: bytes) -> int:
    """An upper bound on how deep tuples / frozensets in ``data`` can nest, at C speed (bytes.count)."""
    return sum(data.count(op) for op in _TUPLE_OPS) + min(data.count(b"("), data.count(b"t")) + 1


def tuple_depth(data: bytes) -> int:
    """The exact deepest tuple / frozenset nesting ``data`` builds (a slow opcode walk, for huge bounds only).

    Lists and dicts count 0: they are unhashable, so hashing stops at them.
    """
    import pickletools

    stack: list[int] = []
    marks: list[int] = []
    memo: dict[int, int] = {}
    deepest = 0
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name == "MARK":
            marks.append(len(stack))
            continue
        if name in ("TUPLE", "FROZENSET"):
            start = marks.pop() if marks else 0
            depth = 1 + max(stack[start:], default=0)
            del stack[start:]
            stack.append(depth)
            deepest = max(deepest, depth)
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            depth = 1 + max(stack[-n:], default=0)
            del stack[-n:]
            stack.append(depth)
            deepest = max(deepest, depth)
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = stack[-1] if stack else 0
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1] if stack else 0
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(int(arg), 0))
        elif name == "DUP":
            stack.append(stack[-1] if stack else 0)
        else:
            if any(s is pickletools.markobject for s in op.stack_before):
                del stack[marks.pop() if marks else 0:]
                popped = len([s for s in op.stack_before if s is not pickletools.markobject and
                              s is not pickletools.stackslice])
            else:
                popped = len(op.stack_before)
            if popped:
                del stack[-popped:]
            stack.extend(0 for _ in op.stack_after)
    return deepest


def _unpickle_on_big_stack(raw: bytes, allowance: int) -> Any:
    """Unpickle on a thread whose C stack outlasts any tuple ``raw`` can nest (see STACK_PER_LEVEL)."""
    need = STACK_PER_LEVEL * nesting_bound(raw) + STACK_FLOOR
    if need > STACK_CAP:
        need = STACK_PER_LEVEL * tuple_depth(raw) + STACK_FLOOR
        if need > STACK_CAP:
            raise _TooDeep
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            with limits.memory_bound(allowance) as bounded:
                if not bounded and not _memo_indices_bounded(raw):
                    raise MemoryError
                box["data"] = _PlainDataUnpickler(io.BytesIO(raw)).load()
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    with _STACK_LOCK:  # stack_size is process-wide: set it only for this thread
        old = threading.stack_size(need)
        try:
            worker = threading.Thread(target=work, name="memtune-unpickle")
            worker.start()
        finally:
            threading.stack_size(old)
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["data"]


class _TooDeep(Exception):
    """Tuples nested deeper than any stack this process can give the unpickler."""


_STACK_LOCK = threading.Lock()


def load_snapshot(path: str | Path) -> Any:
    """Unpickle ``path`` refusing every import and bounding its memory; the result is plain Python data."""
    path = Path(path)
    raw = limits.read_bytes(path, "a memory snapshot", limits.MAX_SNAPSHOT_BYTES)
    allowance = limits.SNAPSHOT_MEMORY_FLOOR + limits.SNAPSHOT_MEMORY_PER_BYTE * len(raw)
    try:
        return _unpickle_on_big_stack(raw, allowance)
    except MemoryError:
        raise UserError(f"{path}: refused: unpickling would need more than {allowance // limits.MIB} MiB for a "
                        f"{len(raw)}-byte file (memo indices or sizes no real snapshot has); nothing in it was "
                        "run") from None
    except (_TooDeep, RecursionError):
        raise UserError(f"{path}: refused: tuples nested deeper than any real snapshot has; nothing in it was "
                        "run") from None
    except _Refused as exc:
        raise UserError(
            f"{path}: refused: the pickle asks to load {exc}; a memory snapshot holds only plain data, "
            "so this file is not one (or was altered). Nothing in it was run."
        ) from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    except Exception as exc:  # any malformed byte stream: the message says which file
        raise UserError(f"{path}: not a readable snapshot pickle ({type(exc).__name__}: {exc})") from None


def analyze_snapshot(path: str | Path, top: int = 10) -> dict[str, Any]:
    """Summary of the snapshot at ``path``; keys become ``snapshot.<key>`` facts."""
    data = load_snapshot(path)
    try:
        return summarize(data, str(path), top=top, file_bytes=Path(path).stat().st_size)
    except (OverflowError, ValueError) as exc:  # an int far past 64 bits: a damaged file, not what PyTorch writes
        reason = str(exc).split(";")[0]
        raise UserError(f"{path}: not a readable snapshot (a number is out of range: {reason})") from None


def _text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


class _Budget:
    """Items a summary may visit: shared references let a 12 KB pickle stand for 10^10 blocks or frames.

    The two real snapshots visit 0.02-0.07 items per file byte; the bound is far above that.
    """

    PER_BYTE = 4
    FLOOR = 200_000

    def __init__(self, file_bytes: int | None) -> None:
        self.left = self.FLOOR + self.PER_BYTE * file_bytes if file_bytes is not None else None

    def spend(self, n: int, source: str) -> None:
        if self.left is None:
            return
        self.left -= n
        if self.left < 0:
            raise UserError(f"{source}: refused: the snapshot refers to the same data over and over (more blocks "
                            "and frames than a file this size can hold); it is not what PyTorch writes")


# --------------------------------------------------------------------------- data model


@dataclass
class _Totals:
    reserved: int = 0
    allocated: int = 0
    active: int = 0
    inactive_split: int = 0
    releasable: int = 0
    segments: int = 0

    def add(self, seg: _Segment) -> None:
        self.reserved += seg.total
        self.allocated += seg.allocated
        self.active += seg.active
        self.segments += 1
        if seg.active == 0:
            self.releasable += seg.total
        else:
            self.inactive_split += seg.total - seg.active

    def as_dict(self) -> dict[str, int]:
        return {
            "reserved_bytes": self.reserved,
            "allocated_bytes": self.allocated,
            "active_bytes": self.active,
            "inactive_split_bytes": self.inactive_split,
            "releasable_bytes": self.releasable,
            "segments": self.segments,
        }


@dataclass
class _Block:
    size: int
    state: str
    requested: int | None
    frames: list[Any]


@dataclass
class _Segment:
    device: int
    stream: int
    total: int
    allocated: int
    active: int
    segment_type: str
    pool: tuple[int, int]
    expandable: bool | None
    blocks: list[_Block] = field(default_factory=list)


# --------------------------------------------------------------------------- parsing


def _where_int(obj: dict, key: str, where: str, source: str, default: int | None = None) -> int:
    value = obj.get(key, default)
    if value is None:
        raise UserError(f"{source}: {where}: missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{source}: {where}: {key!r} is {type(value).__name__}, expected an integer")
    if not 0 <= value < 2**63:  # sizes, addresses and device ids: what the C++ allocator can hold
        raise UserError(f"{source}: {where}: {key!r} is {_brief(value)}, outside 0 .. 2**63")
    return value


def _parse_segment(raw: Any, idx: int, source: str, budget: _Budget) -> _Segment:
    where = f"segments[{idx}]"
    if not isinstance(raw, dict):
        raise UserError(f"{source}: {where}: expected a dict, found {type(raw).__name__}")
    total = _where_int(raw, "total_size", where, source)
    blocks_raw = raw.get("blocks", [])
    if not isinstance(blocks_raw, list):
        raise UserError(f"{source}: {where}: 'blocks' is {type(blocks_raw).__name__}, expected a list")
    budget.spend(1 + len(blocks_raw), source)
    blocks = []
    for j, blk in enumerate(blocks_raw):
        bwhere = f"{where}.blocks[{j}]"
        if not isinstance(blk, dict):
            raise UserError(f"{source}: {bwhere}: expected a dict, found {type(blk).__name__}")
        state = blk.get("state")
        if state not in BLOCK_STATES:
            raise UserError(f"{source}: {bwhere}: unknown block state {_brief(state)} "
                            f"(known: {', '.join(BLOCK_STATES)})")
        requested = blk.get("requested_size")
        frames = blk.get("frames") or []
        blocks.append(_Block(
            size=_where_int(blk, "size", bwhere, source),
            state=state,
            requested=_int_or_none(requested),
            frames=frames if isinstance(frames, list) else [],
        ))
    from_blocks_alloc = sum(b.size for b in blocks if b.state == ALLOCATED)
    from_blocks_active = sum(b.size for b in blocks if b.state != INACTIVE)
    pool_raw = raw.get("segment_pool_id")
    pool = DEFAULT_POOL
    if isinstance(pool_raw, (tuple, list)) and len(pool_raw) == 2 and all(isinstance(p, int) for p in pool_raw):
        pool = (int(pool_raw[0]), int(pool_raw[1]))
    expandable = raw.get("is_expandable")
    return _Segment(
        device=_where_int(raw, "device", where, source, default=0),
        stream=_where_int(raw, "stream", where, source, default=0),
        total=total,
        allocated=_where_int(raw, "allocated_size", where, source, default=from_blocks_alloc),
        active=_where_int(raw, "active_size", where, source, default=from_blocks_active),
        segment_type=_text(raw.get("segment_type"), "large"),
        pool=pool,
        expandable=expandable if isinstance(expandable, bool) else None,
        blocks=blocks,
    )


def _layout(data: Any, source: str) -> tuple[str, list[Any], list[Any], dict[str, Any]]:
    if isinstance(data, list):
        return "list", data, [], {}
    if isinstance(data, dict) and isinstance(data.get("segments"), list):
        traces = data.get("device_traces") or []
        settings = data.get("allocator_settings") or {}
        if not isinstance(traces, list):
            raise UserError(f"{source}: 'device_traces' is {type(traces).__name__}, expected a list")
        return "dict", data["segments"], traces, settings if isinstance(settings, dict) else {}
    found = f"a dict with keys {sorted(map(_brief, data))[:6]}" if isinstance(data, dict) else type(data).__name__
    raise UserError(f"{source}: not a memory snapshot: expected a dict with 'segments' or a list of segments, "
                    f"found {found}")


# --------------------------------------------------------------------------- frames


# A frame's file name is a path (PATH_MAX 4096) and its function a name; one 1 MiB string shared by
# 1,500 frames (a 1 MB pickle) was split, searched and copied into a label per frame: 1.5 GB and 50 s.
# Each distinct file-name object is now read once, and a label keeps at most this much of each part.
MAX_PATH_CHARS = 4096
MAX_LABEL_PART = 120


def _clip(text: str, keep_end: bool = False) -> str:
    if len(text) <= MAX_LABEL_PART:
        return text
    return "..." + text[-MAX_LABEL_PART:] if keep_end else text[:MAX_LABEL_PART] + "..."


def _file_site(filename: str) -> tuple[str, str | None, bool] | None:
    """(label prefix, module, third-party) for a Python file worth naming, else None."""
    filename = filename[-MAX_PATH_CHARS:]
    if not filename.endswith(".py") or _INTERNAL_FRAME.search(filename):
        return None
    parts = re.split(r"[/\\]", filename[:-3])
    third_party = bool(_THIRD_PARTY.search(filename))
    for pkg in _NAMED_PACKAGES:
        if pkg in parts:
            module = _clip(".".join(parts[len(parts) - 1 - parts[::-1].index(pkg):]), keep_end=True)
            return module, module, third_party
    return _clip(f"{parts[-1]}.py", keep_end=True), None, third_party


class SiteNamer:
    """Names allocation sites; each distinct file-name string is analysed once (by identity, so the data
    must outlive the namer, as it does within one summary)."""

    def __init__(self) -> None:
        self._files: dict[int, tuple[str, tuple[str, str | None, bool] | None]] = {}
        self._stacks: dict[tuple[int, ...], tuple[tuple[str, str | None] | None]] = {}

    def _file(self, filename: str) -> tuple[str, str | None, bool] | None:
        hit = self._files.get(id(filename))
        if hit is None or hit[0] is not filename:
            hit = self._files[id(filename)] = (filename, _file_site(filename))
        return hit[1]

    def _file_of(self, frame: Any) -> tuple[str, str | None, bool] | None:
        """``(prefix, module, third_party)`` of a Python frame worth naming, or None."""
        if not isinstance(frame, dict):
            return None
        filename = frame.get("filename")
        return self._file(filename) if isinstance(filename, str) else None

    @staticmethod
    def _site(frame: dict[str, Any], found: tuple[str, str | None, bool]) -> tuple[str, str | None]:
        prefix, module, _ = found
        name, line = frame.get("name", "?"), frame.get("line", 0)
        name = _clip(name) if isinstance(name, str) else "?"
        line = line if isinstance(line, int) and not isinstance(line, bool) and abs(line) < 2**63 else "?"
        return f"{prefix}:{name}:{line}", module

    def site(self, frames: list[Any]) -> tuple[str, str | None] | None:
        """Innermost Megatron/TE frame, else innermost frame of the user's own code, else of any library.

        Picked once per stack of the same frame objects (a snapshot shares its few hundred frame records among
        thousands of stacks of tens of frames), and only the frame chosen is named."""
        key = tuple(map(id, frames))
        hit = self._stacks.get(key)
        if hit is None:
            hit = self._stacks[key] = (self._pick(frames),)
        return hit[0]

    def _pick(self, frames: list[Any]) -> tuple[str, str | None] | None:
        own = first = None
        for frame in frames:
            found = self._file_of(frame)
            if found is None:
                continue
            if found[1]:
                return self._site(frame, found)
            if own is None and not found[2]:
                own = (frame, found)
            if first is None:
                first = (frame, found)
        chosen = own or first
        return self._site(*chosen) if chosen else None


# --------------------------------------------------------------------------- timeline


def _int_or_none(value: Any) -> int | None:
    """A non-negative 64-bit int, else None (a negative or huge size is not what the allocator records)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else None


def _timeline(trace: list[Any], end_active: int, end_reserved: int) -> dict[str, Any]:
    """Replay alloc/free events; the trace may start mid-run, so anchor it at the snapshot's end state."""
    cur = peak = rcur = rpeak = 0
    peak_time = None
    oom = None
    for ev in trace:
        if not isinstance(ev, dict):
            continue
        action, size = ev.get("action"), _int_or_none(ev.get("size"))
        if size is None:
            continue
        if action == "alloc":
            cur += size
            if cur > peak:
                peak, peak_time = cur, _int_or_none(ev.get("time_us"))
        elif action == "free_completed":
            cur -= size
        elif action in ("segment_alloc", "segment_map"):
            rcur += size
            rpeak = max(rpeak, rcur)
        elif action in ("segment_free", "segment_unmap"):
            rcur -= size
        elif action == "oom":
            oom = ev
    start = end_active - cur
    out: dict[str, Any] = {
        "trace_events": len(trace),
        "timeline_start_bytes": start,
        "timeline_peak_bytes": start + peak,
        "timeline_peak_time_us": peak_time,
        "timeline_reserved_peak_bytes": end_reserved - rcur + rpeak,
    }
    if oom is not None:
        out["oom_requested_bytes"] = oom["size"]
        out["oom_device_free_bytes"] = _int_or_none(oom.get("device_free"))
        out["oom_stream"] = _int_or_none(oom.get("stream"))
    return out


# --------------------------------------------------------------------------- summary


def _pick_device(segments: list[_Segment], traces: list[Any], budget: _Budget, source: str) -> int:
    """The device that hit an OOM, else the one with the most reserved memory."""
    for dev, trace in enumerate(traces):
        budget.spend(len(trace) if isinstance(trace, list) else 1, source)
        if isinstance(trace, list) and any(isinstance(e, dict) and e.get("action") == "oom" for e in trace):
            return dev
    reserved: dict[int, int] = defaultdict(int)
    for seg in segments:
        reserved[seg.device] += seg.total
    return max(reserved, key=lambda d: (reserved[d], -d)) if reserved else 0


def summarize(data: Any, source: str = "<snapshot>", top: int = 10, file_bytes: int | None = None) -> dict[str, Any]:
    """Pure reduction of loaded snapshot data to flat numbers (bytes, ratios) plus breakdowns.

    ``file_bytes`` (the pickle's size) bounds the items visited; None trusts in-memory data.
    """
    budget = _Budget(file_bytes)
    layout, raw_segments, traces, settings = _layout(data, source)
    all_segments = [_parse_segment(raw, i, source, budget) for i, raw in enumerate(raw_segments)]
    device = _pick_device(all_segments, traces, budget, source)
    segments = [s for s in all_segments if s.device == device]

    totals, by_type, by_pool = _Totals(), defaultdict(_Totals), defaultdict(_Totals)
    pending = inactive = requested = free_blocks = largest_free = 0
    sites: dict[str, list[Any]] = {}
    sited_bytes = 0
    namer = SiteNamer()
    for seg in segments:
        totals.add(seg)
        by_type[seg.segment_type].add(seg)
        by_pool["default" if seg.pool == DEFAULT_POOL else "graph"].add(seg)
        for blk in seg.blocks:
            if blk.state == INACTIVE:
                inactive += blk.size
                free_blocks += 1
                largest_free = max(largest_free, blk.size)
            elif blk.state in PENDING_FREE:
                pending += blk.size
            else:
                requested += blk.requested if blk.requested is not None else blk.size
                budget.spend(len(blk.frames), source)
                site = namer.site(blk.frames)
                if site:
                    entry = sites.setdefault(site[0], [site[1], 0, 0])
                    entry[1] += blk.size
                    entry[2] += 1
                    sited_bytes += blk.size

    reserved, allocated = totals.reserved, totals.allocated
    graph_pools = {s.pool for s in segments if s.pool != DEFAULT_POOL}
    expandable = settings.get("expandable_segments")
    if not isinstance(expandable, bool):
        flags = [s.expandable for s in segments if s.expandable is not None]
        expandable = any(flags) if flags else None
    alloc_conf = settings.get("PYTORCH_CUDA_ALLOC_CONF")

    summary: dict[str, Any] = {
        "provided": True,
        "file": Path(source).name,
        "layout": layout,
        "device": device,
        "devices": sorted({s.device for s in all_segments}),
        **totals.as_dict(),
        "requested_bytes": requested,
        "inactive_bytes": inactive,
        "pending_free_bytes": pending,
        "free_blocks": free_blocks,
        "largest_free_block_bytes": largest_free,
        "fragmentation_ratio": (reserved - allocated) / reserved if reserved else None,
        "inactive_split_ratio": totals.inactive_split / reserved if reserved else None,
        "graph_pool_bytes": by_pool["graph"].reserved if graph_pools else 0,
        "graph_pool_allocated_bytes": by_pool["graph"].allocated if graph_pools else 0,
        "graph_pool_share": by_pool["graph"].reserved / reserved if reserved and graph_pools else 0.0,
        "graph_pool_count": len(graph_pools),
        "expandable_segments": expandable,
        "alloc_conf": alloc_conf if isinstance(alloc_conf, str) else None,
        "stacks_recorded": bool(sites),
        "sited_share": sited_bytes / allocated if allocated else None,
        "segment_types": {k: v.as_dict() for k, v in sorted(by_type.items())},
        "pools": {k: v.as_dict() for k, v in sorted(by_pool.items())},
        "top_sites": [
            {"site": site, "module": mod, "bytes": size, "blocks": count}
            for site, (mod, size, count) in sorted(sites.items(), key=lambda kv: (-kv[1][1], kv[0]))[:top]
        ],
        "oom": False,
    }
    trace = traces[device] if 0 <= device < len(traces) and isinstance(traces[device], list) else None
    if trace:
        budget.spend(len(trace), source)
        summary.update(_timeline(trace, totals.active, reserved))
    if summary.get("oom_requested_bytes") is not None:
        summary.update(_oom_verdict(summary, segments))
    return summary


def _oom_verdict(summary: dict[str, Any], segments: list[_Segment]) -> dict[str, Any]:
    """Capacity vs fragmentation, by the test in research/peers.md sec. 3.5.

    Capacity: the request exceeds free device memory plus every cached-but-unallocated
    byte, so no compaction could have served it.  Fragmentation: it would fit in that
    sum but exceeds both free device memory and the largest free block in the
    default pool of the failing stream.
    """
    size = summary["oom_requested_bytes"]
    device_free = summary.get("oom_device_free_bytes") or 0
    stream = summary.get("oom_stream")
    candidates = [
        b.size
        for s in segments
        if s.pool == DEFAULT_POOL and (stream is None or s.stream == stream)
        for b in s.blocks
        if b.state == INACTIVE
    ]
    largest = max(candidates, default=0)
    slack = summary["reserved_bytes"] - summary["allocated_bytes"]
    if size > device_free + slack:
        kind = "capacity"
    elif size > max(device_free, largest):
        kind = "fragmentation"
    else:
        kind = "unclear"
    return {"oom": True, "largest_free_for_request_bytes": largest, "oom_kind": kind}
