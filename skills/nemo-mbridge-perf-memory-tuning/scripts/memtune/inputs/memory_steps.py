"""Every memory report line of a training log, per rank and per step (``memtune compare`` of two logs).

``parse_log`` keeps only each rank's latest report (what diagnosis needs, in bounded state); a
regression between two runs needs the whole series.  ``scan_log`` reads the log once, in chunks of
whole lines, and has ``parse_log`` hand on every report line it parses (its ``on_report``), so a line
counts here exactly when it counts there and is parsed once.  No line is held past ``max_line_chars``;
a .gz is bounded (limits.gzip_text)."""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..errors import UserError
from ..facts import LogFacts, MemoryReport
from ..knowledge import Knowledge
from . import limits
from .oom_log import compile_signatures

# A log is streamed; the series kept is bounded (a 100k-step run reporting on 64 ranks still fits).
MAX_REPORTS = 500_000
CHUNK_CHARS = 1 << 20  # text read at a time: whole lines are handed on, the rest waits for the next read


def read_memory_steps(path: str | Path, kb: Knowledge) -> list[MemoryReport]:
    """Every report line of the log at ``path`` (``.gz`` read decompressed), in file order."""
    out: list[MemoryReport] = []
    scan_log(path, kb, out.append)
    return out


def scan_log(path: str | Path, kb: Knowledge, sink: Callable[[MemoryReport], None]) -> LogFacts:
    """Read the log at ``path`` once: ``parse_log``'s facts, and every report line handed to ``sink`` in file order.

    The file is read in chunks of whole lines (no line held longer than ``max_line_chars``; a .gz is
    bounded, limits.gzip_text); ``parse_log`` parses each report line once and hands it on, so the cost
    is its C-speed search per chunk plus one parse per report line.
    """
    from .oom_log import parse_log

    patterns = compile_signatures(kb)
    kept = 0

    def keep(report: MemoryReport) -> None:
        nonlocal kept
        if kept < MAX_REPORTS:
            sink(report)
            kept += 1

    return parse_log(log_chunks(Path(path), patterns.params["max_line_chars"]), kb, on_report=keep, name=str(path))


def log_chunks(path: Path, max_line: int) -> Iterator[str]:
    """The text of the log in pieces of whole lines, each ending in a newline; a line past ``max_line``
    characters keeps its first ``max_line`` (the rest, up to its newline, is skipped)."""
    carry = ""
    skipping = False
    with _open(path) as fh:
        while chunk := fh.read(CHUNK_CHARS):
            if skipping:
                nl = chunk.find("\n")
                if nl < 0:
                    continue
                chunk, skipping = chunk[nl + 1:], False
            text = carry + chunk
            end = text.rfind("\n") + 1
            carry = text[end:]
            if len(carry) > max_line:
                text, end, carry, skipping = text[:end] + carry[:max_line] + "\n", end + max_line + 1, "", True
            if end:
                yield text[:end]
    if carry:
        yield carry + "\n"


@contextmanager
def _open(path: Path) -> Iterator[IO[str]]:
    try:
        if path.suffix == ".gz":
            fh: IO[str] = limits.gzip_text(path, "a training log")
        else:
            fh = open(path, encoding="utf-8", errors="replace", newline="\n")  # noqa: SIM115
    except FileNotFoundError:
        raise UserError(f"{path}: log file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read log ({exc.strerror or exc})") from None
    try:
        with fh:
            yield fh
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"{path}: cannot read log ({exc})") from None
