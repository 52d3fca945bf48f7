"""Every memory report line of a training log, per rank and per step (``memtune compare`` of two logs).

``parse_log`` keeps only each rank's latest report (what diagnosis needs, in bounded state); a
regression between two runs needs the whole series.  ``scan_log`` reads the log once, in chunks of
whole lines, and hands the same text to ``parse_log`` while it picks out the report lines with the
same compiled ``memory-report`` signatures of knowledge/signatures.yaml (launcher prefixes stripped
the same way, ``pairs`` converted with the same units), so a line counts here exactly when it counts
there.  No line is held past ``max_line_chars``; a .gz is bounded (limits.gzip_text)."""

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
from .oom_log import Patterns, compile_signatures, report_pairs

# A log is streamed; the series kept is bounded (a 100k-step run reporting on 64 ranks still fits).
MAX_REPORTS = 500_000
_MAX_PREFIX_LAYERS = 6  # as oom_log's scanner: "0: [rank3]:[E0501 ...] text" loses all three
CHUNK_CHARS = 1 << 20  # text read at a time: whole lines are handed on, the rest waits for the next read


def read_memory_steps(path: str | Path, kb: Knowledge) -> list[MemoryReport]:
    """Every report line of the log at ``path`` (``.gz`` read decompressed), in file order."""
    out: list[MemoryReport] = []
    scan_log(path, kb, out.append)
    return out


def scan_log(path: str | Path, kb: Knowledge, sink: Callable[[MemoryReport], None]) -> LogFacts:
    """Read the log at ``path`` once: ``parse_log``'s facts, and every report line handed to ``sink`` in file order.

    The file is read in chunks of whole lines (no line held longer than ``max_line_chars``; a .gz is
    bounded, limits.gzip_text), and only lines that carry a report trigger are split out, so the cost is
    a C-speed search per chunk, not Python work per line.
    """
    from .oom_log import parse_log

    patterns = compile_signatures(kb)
    triggers = tuple({t for sig in patterns.reports for t in sig.triggers})
    kept = 0

    def chunks() -> Iterator[str]:
        nonlocal kept
        lineno = 1
        for chunk in log_chunks(Path(path), patterns.params["max_line_chars"]):
            if kept < MAX_REPORTS:
                pos = 0
                for start in _trigger_lines(chunk, triggers):
                    lineno += chunk.count("\n", pos, start)
                    pos = start
                    try:
                        found = reports_in_line(chunk[start:chunk.index("\n", start)].rstrip("\r"), lineno, patterns)
                    except ValueError as exc:  # a figure past any size (units.OutOfRange), or int() of > 4300 digits
                        raise UserError(f"{path}:{lineno}: cannot read this line ({str(exc).split(';')[0]})") from None
                    for report in found:
                        if kept < MAX_REPORTS:
                            sink(report)
                            kept += 1
                lineno += chunk.count("\n", pos)
            yield chunk

    return parse_log(chunks(), kb)


def _trigger_lines(chunk: str, triggers: tuple[str, ...]) -> list[int]:
    """Start of every line of ``chunk`` that holds a trigger, in order (each once)."""
    starts: set[int] = set()
    for trigger in triggers:
        at = chunk.find(trigger)
        while at >= 0:
            start = chunk.rfind("\n", 0, at) + 1
            starts.add(start)
            at = chunk.find(trigger, chunk.index("\n", at) + 1)
    return sorted(starts)


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
