#!/usr/bin/env python3
"""Throughput and peak memory of the log reader on a synthetic multi-rank training log.

    python3 benchmarks/bench_log_parse.py [--mb 200] [--keep]

Writes a ~200 MB log into a temp dir: Megatron iteration lines from every rank, NCCL INFO
chatter, a warning and a logged-and-retried exception with its traceback every 50 iterations,
periodic memory reports,
and at the end a traceback with a PyTorch OOM on one rank plus NCCL timeouts on the others.
Times a bare ``for line in file`` loop (the I/O floor), ``parse_log(path)`` and
``parse_log(open file)`` (the line-iterator path), and prints MB/s and the process's peak RSS.
Not a test: the numbers depend on the machine.  The reader must stay in bounded memory,
so peak RSS should not grow with --mb.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
sys.path.insert(0, str(SKILL / "scripts"))

from memtune import knowledge  # noqa: E402
from memtune.inputs.oom_log import parse_log  # noqa: E402

MB = 1_000_000


def _block(step: int, ranks: int) -> str:
    """About 10 KB of ordinary training output for one iteration."""
    lines = []
    for rank in range(ranks):
        lines.append(
            f"[rank{rank}]: node{rank // 8:03d}:{4000 + rank}:{4100 + rank} [{rank % 8}] NCCL INFO Channel 00/0 : "
            f"{rank} -> {(rank + 1) % ranks} via P2P/CUMEM/read"
        )
    lines.append(
        f" [2026-04-02 10:{step % 60:02d}:00] iteration {step:8d}/ 1000000 | consumed samples: {step * 32:12d} | "
        f"elapsed time per iteration (ms): 7944.7 | learning rate: 5.000000E-06 | global batch size:    32 | "
        f"lm loss: 1.790224E+00 | loss scale: 1.0 | grad norm: 7.402 | number of skipped iterations:   0 | "
        f"number of nan iterations:   0 |"
    )
    if step % 50 == 0:
        lines.append("/opt/megatron-lm/megatron/core/tensor_parallel/layers.py:612: UserWarning: async grad "
                     "allreduce is deprecated")
        lines.append("Traceback (most recent call last):")
        lines.append('  File "/opt/megatron-lm/megatron/training/ft_client.py", line 88, in send_heartbeat')
        lines.append("    sock.sendall(payload)")
        lines.append("ConnectionResetError: [Errno 104] Connection reset by peer")
        lines.append("heartbeat failed, retrying in 5 s")
    if step % 200 == 0:
        lines.append(f"[Rank 0] (after {step} iterations) memory (MB) | allocated: 41387.2 | max allocated: "
                     f"60211.5 | reserved: 75210.0 | max reserved: 75210.0")
    return "\n".join(lines) + "\n"


_TAIL = """[rank0]: Traceback (most recent call last):
[rank0]:   File "/opt/megatron-lm/megatron/core/pipeline_parallel/schedules.py", line 579, in backward_step
[rank0]:     custom_backward(output_tensor[0], output_tensor_grad[0])
[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB. GPU 0 has a total capacity of \
79.11 GiB of which 19.44 MiB is free. Including non-PyTorch memory, this process has 79.09 GiB memory in use. Of the \
allocated memory 54.81 GiB is allocated by PyTorch, and 19.87 GiB is reserved by PyTorch but unallocated.
[rank8]:[E0402 10:27:31.402117561 ProcessGroupNCCL.cpp:632] [Rank 8] Watchdog caught collective operation timeout
"""


def write_log(path: Path, megabytes: int, ranks: int = 32) -> int:
    target = megabytes * MB
    written, step = 0, 1
    with path.open("w", encoding="utf-8") as fh:
        while written < target:
            text = "".join(_block(step + i, ranks) for i in range(50))
            fh.write(text)
            written += len(text)
            step += 50
        fh.write(_TAIL)
    return path.stat().st_size


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _timed(label: str, size: int, fn) -> object:
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    print(f"{label:<28} {seconds:7.2f} s  {size / MB / seconds:8.1f} MB/s  peak RSS {_peak_rss_mb():7.1f} MB")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="size of the synthetic log in MB (default 200)")
    parser.add_argument("--keep", action="store_true", help="print the temp path and keep the file")
    args = parser.parse_args()
    kb = knowledge.load()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.log"
        size = write_log(path, args.mb)
        print(f"log: {size / MB:.1f} MB, {sum(1 for _ in path.open(encoding='utf-8'))} lines; "
              f"peak RSS after writing {_peak_rss_mb():.1f} MB")

        def floor() -> int:
            with path.open(encoding="utf-8") as fh:
                return sum(1 for _ in fh)

        _timed("read lines only (floor)", size, floor)
        facts = _timed("parse_log(path)", size, lambda: parse_log(path, kb))

        def lines() -> object:
            with path.open(encoding="utf-8") as fh:
                return parse_log(fh, kb)

        _timed("parse_log(open file lines)", size, lines)
        print(f"found: kind={facts.oom_kind} rank={facts.rank} phase={facts.phase} "
              f"events={len(facts.events)} timeout={facts.nccl_timeout} "
              f"memory reports={len(facts.memory_reports)} env={len(facts.env)}")
        if args.keep:
            kept = Path(tempfile.gettempdir()) / "memtune-bench-train.log"
            path.replace(kept)
            print(f"kept {kept}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
