#!/usr/bin/env python3
"""Throughput and peak memory of ``memtune snapshot`` on a synthetic snapshot of realistic size.

    python3 benchmarks/bench_snapshot.py [--segments 5000] [--events 100000]

Bridge records up to 100 000 trace entries (``trace_alloc_max_entries``), each
with a Python stack; the generated file has that many events with short stacks.
Prints file size, load+analyse time, MB/s and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(SKILL / "scripts"))

from memtune.inputs.snapshot import analyze_snapshot  # noqa: E402

MIB = 1024 * 1024
_FRAMES = [
    {"filename": "/opt/Megatron-LM/megatron/core/transformer/attention.py", "line": 700, "name": "forward"},
    {"filename": "/opt/Megatron-LM/megatron/core/transformer/transformer_layer.py", "line": 400, "name": "forward"},
    {"filename": "/workspace/pretrain.py", "line": 30, "name": "main"},
]


def build(segments: int, events: int) -> dict:
    segs = []
    for i in range(segments):
        blocks = [{"address": i * 64 * MIB, "size": 16 * MIB, "requested_size": 16 * MIB,
                   "state": "active_allocated", "frames": _FRAMES},
                  {"address": i * 64 * MIB + 16 * MIB, "size": 4 * MIB, "requested_size": 0, "state": "inactive",
                   "frames": []}]
        segs.append({"device": 0, "address": i * 64 * MIB, "total_size": 20 * MIB, "allocated_size": 16 * MIB,
                     "active_size": 16 * MIB, "requested_size": 16 * MIB, "stream": 0, "segment_type": "large",
                     "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": blocks})
    trace = []
    for j in range(events):
        action = "alloc" if j % 2 == 0 else "free_completed"
        trace.append({"action": action, "addr": j, "size": 2 * MIB, "stream": 0, "time_us": j, "frames": _FRAMES})
    return {"segments": segs, "device_traces": [trace], "allocator_settings": {"expandable_segments": False}}


def analyse(path: Path) -> None:
    """Runs in a fresh process so peak RSS counts only the reader, not the generator."""
    size = path.stat().st_size
    start = time.perf_counter()
    summary = analyze_snapshot(path)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"file {size / MIB:.1f} MiB, {summary['segments']} segments, {summary['trace_events']} events")
    print(f"analyse {seconds:.2f} s = {size / MIB / seconds:.1f} MiB/s; peak RSS {rss / 1024:.0f} MiB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, default=5000)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--analyse", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.analyse:
        analyse(args.analyse)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.pickle"
        path.write_bytes(pickle.dumps(build(args.segments, args.events), protocol=4))
        return subprocess.run([sys.executable, __file__, "--analyse", str(path)], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
