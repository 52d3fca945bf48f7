"""``memtune snapshot FILE.pickle``: what a PyTorch memory snapshot says about reserved vs allocated memory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..inputs.snapshot import analyze_snapshot
from ..textfmt import human
from . import argtypes, htmlopt

EPILOG = """The pickle is read with an unpickler that imports nothing, so a file that is not
plain data is refused without running any of it. Numbers are for one device:
the one with an OOM entry in device_traces, else the one with most memory reserved.

exit codes: 0 report printed, 2 unreadable or refused file."""

_COLUMNS = ("reserved_bytes", "allocated_bytes", "active_bytes", "inactive_split_bytes", "releasable_bytes")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("snapshot", help="analyse a torch.cuda.memory._dump_snapshot() pickle",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", type=Path, metavar="FILE.pickle")
    parser.add_argument("--top", type=argtypes.count(1, 100_000), default=10,
                        help="allocation sites to list (default 10)")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    parser.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the --html page")
    htmlopt.add_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise UserError(f"{args.file}: no such file")
    if args.html:  # the page needs the trace's events; load_trace reads the file once and summarizes it too
        from ..inputs.snapshot_trace import load_trace

        trace = load_trace(args.file, top=max(args.top, 0))
        summary = trace.summary
        write_page(args.html, summary, trace, args.lang)
    else:
        summary = analyze_snapshot(args.file, top=max(args.top, 0))
    if args.format == "json":
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        sys.stdout.write(render_text(summary))
    return 0


def write_page(path: Path, summary: dict[str, Any], trace: Any, lang: str) -> None:
    from .. import knowledge
    from ..render import html

    t = html.labels_for(knowledge.load(), lang)
    htmlopt.write(path, html.page("snapshot", html.snapshot_view(summary, trace, t), t, lang, t["html-title-snapshot"]))


def _gib(value: Any) -> str:
    """GiB for large numbers, MiB below 1 GiB, so small snapshots do not read as zeros."""
    if value is None:
        return "?"
    return human(value, "gib" if abs(value) >= 2**30 else "mib")


def render_text(s: dict[str, Any]) -> str:
    out = [f"snapshot {s['file']}: {s['layout']} layout, device {s['device']} (devices {s['devices']}), "
           f"{s['segments']} segments", ""]
    out.append(f"{'':<16}" + "".join(f"{c.removesuffix('_bytes').replace('_', '-'):>16}" for c in _COLUMNS))
    rows = [("all", {c: s[c] for c in _COLUMNS})]
    rows += [(f"{name} segments", v) for name, v in s["segment_types"].items()]
    rows += [(f"{name} pool" if name == "default" else f"graph pools ({s['graph_pool_count']})", v)
             for name, v in s["pools"].items()]
    for label, vals in rows:
        out.append(f"{label:<16}" + "".join(f"{_gib(vals.get(c)):>16}" for c in _COLUMNS))
    out.append("")
    out.append(f"fragmentation: {human(s['fragmentation_ratio'], 'pct')} of reserved not allocated; "
               f"{human(s['inactive_split_ratio'], 'pct')} free inside split segments")
    out.append(f"largest free block: {human(s['largest_free_block_bytes'], 'mib')} "
               f"({s['free_blocks']} free blocks, {_gib(s['pending_free_bytes'])} pending free)")
    out.append(f"CUDA-graph / private pools: {_gib(s['graph_pool_bytes'])} "
               f"({human(s['graph_pool_share'], 'pct')} of reserved)")
    out.append(f"allocator: expandable_segments={human(s['expandable_segments'], None)}, "
               f"PYTORCH_CUDA_ALLOC_CONF={s['alloc_conf']!r}")
    if s.get("oom"):
        out.append(f"failed request: {human(s['oom_requested_bytes'], 'mib')} with "
                   f"{human(s.get('oom_device_free_bytes'), 'mib')} free on the device; largest free block it "
                   f"could use {human(s['largest_free_for_request_bytes'], 'mib')} -> {s['oom_kind']}")
    if "trace_events" in s:
        out.append(f"timeline ({s['trace_events']} events): allocated peak {_gib(s['timeline_peak_bytes'])}, "
                   f"reserved peak {_gib(s['timeline_reserved_peak_bytes'])}")
    else:
        out.append("timeline: no device_traces (record with torch.cuda.memory._record_memory_history)")
    if s["top_sites"]:
        out.append(f"\ntop allocation sites ({human(s['sited_share'], 'pct')} of allocated bytes have a stack):")
        for site in s["top_sites"]:
            out.append(f"  {_gib(site['bytes']):>12}  {site['blocks']:>6} blocks  {site['site']}")
    elif not s["stacks_recorded"]:
        out.append("\nno allocation stacks recorded")
    return "\n".join(out) + "\n"
