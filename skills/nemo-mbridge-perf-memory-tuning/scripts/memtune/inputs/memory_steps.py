"""Every memory report line of a training log, per rank and per step (``memtune compare`` of two logs).

``parse_log`` keeps only each rank's latest report (what diagnosis needs, in bounded state); a
regression between two runs needs the whole series.  This module rereads the log with the same
compiled ``memory-report`` signatures of knowledge/signatures.yaml (launcher prefixes stripped the
same way, ``pairs`` converted with the same units), so a line counts here exactly when it counts there.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..errors import UserError
from ..facts import MemoryReport
from ..knowledge import Knowledge
from .oom_log import Patterns, compile_signatures, report_pairs

# A log is streamed; the series kept is bounded (a 100k-step run reporting on 64 ranks still fits).
MAX_REPORTS = 500_000
_MAX_PREFIX_LAYERS = 6  # as oom_log's scanner: "0: [rank3]:[E0501 ...] text" loses all three


def read_memory_steps(path: str | Path, kb: Knowledge) -> list[MemoryReport]:
    """Every report line of the log at ``path`` (``.gz`` read decompressed), in file order."""
    patterns = compile_signatures(kb)
    triggers = tuple({t for sig in patterns.reports for t in sig.triggers})
    out: list[MemoryReport] = []
    with _open(Path(path)) as fh:
        for lineno, line in enumerate(fh, 1):
            if not any(t in line for t in triggers):
                continue
            try:
                out.extend(reports_in_line(line.rstrip("\r\n"), lineno, patterns))
            except ValueError as exc:  # a figure past any size (units.OutOfRange), or int() of > 4300 digits
                raise UserError(f"{path}:{lineno}: cannot read this line ({str(exc).split(';')[0]})") from None
            if len(out) >= MAX_REPORTS:
                break
    return out


def reports_in_line(raw: str, lineno: int, patterns: Patterns) -> list[MemoryReport]:
    """The reports on one log line (loggers sometimes glue two ranks' reports on one line)."""
    text = patterns.noise.sub("", raw) if "\x1b" in raw else raw
    text, prefix_rank = _strip(text, patterns)
    found: list[MemoryReport] = []
    for sig in patterns.reports:
        if sig.regex is None or not any(t in text for t in sig.triggers):
            continue
        for m in sig.regex.finditer(text):
            groups = m.groupdict()
            values = report_pairs(sig, groups.get("pairs"))
            if not values:
                continue
            counts = {k: int(v) for k, v in values.items() if not k.endswith("_bytes")}
            found.append(MemoryReport(
                rank=int(groups["rank"]) if groups.get("rank") else prefix_rank, line=lineno,
                iteration=int(groups["iteration"]) if groups.get("iteration") else None, **{**values, **counts}))
    return found


def _strip(line: str, patterns: Patterns) -> tuple[str, int | None]:
    rank = None
    for _ in range(_MAX_PREFIX_LAYERS):
        m = patterns.prefix.match(line)
        if not m or not m.end():
            break
        for group in patterns.prefix_ranks:
            if m.group(group) is not None:
                rank = int(m.group(group))
                break
        line = line[m.end():]
    return line, rank




@contextmanager
def _open(path: Path) -> Iterator[IO[str]]:
    try:
        if path.suffix == ".gz":
            fh: IO[str] = gzip.open(path, "rt", encoding="utf-8", errors="replace")
        else:
            fh = open(path, encoding="utf-8", errors="replace")  # noqa: SIM115
    except FileNotFoundError:
        raise UserError(f"{path}: log file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read log ({exc.strerror or exc})") from None
    try:
        with fh:
            yield fh
    except (OSError, EOFError) as exc:
        raise UserError(f"{path}: cannot read log ({exc})") from None
