"""Read a training log, streamed, and reduce its memory failures, crashes and timeouts to LogFacts.

The same single pass also keeps what the log says besides failures: each rank's latest
memory report, the theoretical footprint line and the memory-relevant variables the
launch echoed, so no other module reads the log again.

Why streamed: real logs reach several GB.  The reader keeps only bounded state: the
frames of tracebacks still open (per rank), one wrapped allocator message being joined,
a few counters and at most ``parser.max_events`` events.  Files are read in chunks and a
C-level pre-filter (every trigger literal of knowledge/signatures.yaml) skips the
ordinary lines, so Python only looks at lines that can matter.

Every text recognised here comes from knowledge/signatures.yaml (compiled once per
Knowledge object by ``compile_signatures``), constraint errors from
knowledge/constraints.yaml ``error_pattern`` and the variable names worth keeping from
knowledge/vocabulary.yaml ``env``; this package holds no message text.

This module is the streaming driver (files, chunks, the pre-filter loop) and the public API.  The rest:
signatures.py compiles the table, triggers.py is the pre-filter and per-line plan, scanner.py the line state
machine with its mixins events.py (allocator messages, event numbers), side_facts.py (memory reports, footprint,
variables) and frames.py (tracebacks, phases), pairs.py reads report items and assemble.py builds the LogFacts.
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO

from ...errors import UserError
from ...facts import LogFacts, MemoryReport
from ...knowledge import Knowledge
from .. import limits
from .pairs import report_pairs
from .scanner import _Scanner
from .signatures import SIZE_GROUPS, LazyPattern, Patterns, PhaseRule, Signature, compile_signatures
from .signatures import _required_literals as _required_literals
from .triggers import _FINDER_WINDOW as _FINDER_WINDOW
from .triggers import _Finder
from .triggers import _longer_triggers as _longer_triggers
from .triggers import _shortest_triggers as _shortest_triggers

__all__ = ["SIZE_GROUPS", "LazyPattern", "Patterns", "PhaseRule", "Signature", "compile_signatures", "parse_log",
           "report_pairs"]

_CHUNK_CHARS = 1 << 20


def parse_log(source: str | Path | Iterable[str], kb: Knowledge,
              on_report: Callable[[MemoryReport], None] | None = None, name: str | None = None) -> LogFacts:
    """Read a whole training log and return what it says about memory failures.

    ``source`` is a path (``str`` without a newline or ``Path``; ``.gz`` is decompressed,
    ``"-"`` is stdin), log text (a ``str`` containing newlines) or an iterable of lines.
    ``on_report`` receives every memory report line as it is read (the facts keep the latest per rank);
    ``name`` is what error messages call an iterable source (default ``<lines>``).
    """
    scanner = _Scanner(compile_signatures(kb), on_report)
    if isinstance(source, (str, Path)) and not (isinstance(source, str) and "\n" in source):
        name = str(source)
        with _open_log(Path(source) if str(source) != "-" else None) as fh:
            _scan_chunks(iter(partial(fh.read, _CHUNK_CHARS), ""), scanner, name)
    elif isinstance(source, str):
        name = "<text>"
        _scan_chunks((source[i : i + _CHUNK_CHARS] for i in range(0, len(source), _CHUNK_CHARS)), scanner, name)
    else:
        name = name or "<lines>"
        _scan_chunks(_batched_lines(source), scanner, name)
    try:
        return scanner.finish()  # the last block's message is read here
    except ValueError as exc:
        raise _unreadable(name, scanner.lineno, exc) from None


def _unreadable(name: str, lineno: int, exc: ValueError) -> UserError:
    """A line no real log has: int() of a digit run past Python's 4300-digit limit, or a figure past any size
    (units.OutOfRange, which knows the first line of the message it was read from)."""
    line = getattr(exc, "line", None) or lineno
    return UserError(f"{name}:{line}: cannot read this line ({str(exc).split(';')[0]})")


def _batched_lines(lines: Iterable[str]) -> Iterator[str]:
    """Lines (with or without their newline) glued into chunks, so they share the chunked scan."""
    batch: list[str] = []
    size = 0
    for item in lines:
        batch.append(item if item.endswith("\n") else item + "\n")
        size += len(item) + 1
        if size >= _CHUNK_CHARS:
            yield "".join(batch)
            batch, size = [], 0
    if batch:
        yield "".join(batch)


@contextmanager
def _open_log(path: Path | None) -> Iterator[IO[str]]:
    if path is None:
        yield sys.stdin
        return
    try:
        if path.suffix == ".gz":  # bounded: a small .gz must not expand into minutes of reading
            fh: IO[str] = limits.gzip_text(path, "a training log", newline="")
        else:
            fh = open(path, encoding="utf-8", errors="replace", newline="")  # noqa: SIM115
    except FileNotFoundError:
        raise UserError(f"{path}: log file not found") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read log ({exc.strerror or exc})") from None
    with fh:
        yield fh


def _scan_chunks(chunks: Iterator[str], scanner: _Scanner, name: str) -> None:
    """Feed complete lines; while the scanner is idle, jump straight to the next pre-filter hit."""
    finder = _Finder(scanner.p)
    max_line = scanner.p.params["max_line_chars"]
    buf = ""
    try:
        for chunk in chunks:
            buf += chunk
            end = buf.rfind("\n") + 1
            pos = 0
            finder.reset()
            while pos < end:
                if scanner.idle:
                    hit = finder.first(buf, pos, end)
                    if hit < 0:
                        scanner.skip(buf.count("\n", pos, end))
                        pos = end
                        break
                    start = buf.rfind("\n", pos, hit) + 1 or pos
                    scanner.skip(buf.count("\n", pos, start))
                    pos = start
                    after = scanner.report_run(buf, pos, end)
                    if after > pos:  # a run of plain report lines, read in one go
                        pos = after
                        continue
                nl = buf.index("\n", pos, end)
                scanner.feed(buf[pos:nl])
                pos = nl + 1
            buf = buf[end:]
            while len(buf) > max_line:
                scanner.feed(buf[:max_line], complete=False)
                buf = buf[max_line:]
        if buf:
            scanner.feed(buf)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise UserError(f"{name}: cannot read log ({exc})") from None
    except ValueError as exc:
        raise _unreadable(name, scanner.lineno, exc) from None
