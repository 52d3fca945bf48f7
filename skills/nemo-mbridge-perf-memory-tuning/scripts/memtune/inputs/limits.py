"""Size and work bounds for everything read that is not a streamed log.

A config, launch script, stats dump or HF config is kilobytes; a file a thousand times that
is not one, and reading it whole would cost its size in memory (a 1 GB ``--config`` was 2 GB
RSS).  Snapshots are the one large input, so their bound is on the work they cause instead:
memory while unpickling, items visited while summarising (see snapshot.py).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import UserError

MIB = 1024 * 1024
# The largest real inputs seen: a Bridge config dump ~60 KB, a Megatron-LM launch script ~20 KB,
# a memory_stats() JSON ~40 KB, an HF config ~10 KB.  The caps leave 8-12x room (a long dataset
# blend, comments) and keep the slowest reader near a second on a crafted file of that size:
# the shell-word splitter runs ~17 us per word, pure-Python YAML ~20 us per node.
MAX_TEXT_INPUT_BYTES = 512 * 1024
MAX_LAUNCH_SCRIPT_BYTES = 256 * 1024
# PyTorch snapshots of big runs reach several GB (100 000 trace entries with stacks).
MAX_SNAPSHOT_BYTES = 8 * 1024 * MIB
# Unpickling builds Python objects; measured on the two real snapshots (1 and 3 MB): ~20x the
# file in RSS.  64x plus a floor is the most a genuine file needs; a memo-index bomb asks for GBs.
SNAPSHOT_MEMORY_PER_BYTE = 64
SNAPSHOT_MEMORY_FLOOR = 256 * MIB
# A .gz log is streamed like a plain one, but 1 MB of gzip can stand for 1 GB of text (48 s of
# scanning).  Training logs compress 3-15x (the bundled examples 2-3x; a log that is nearly all
# report lines ~60x), so the bound leaves room above that; a longer one can be gunzipped and passed
# as text, which has no bound.
GZIP_MAX_RATIO = 64
GZIP_FLOOR = 16 * MIB


def _check_regular(path: Path, what: str, cap: int) -> int:
    try:
        info = path.stat()
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise UserError(f"{path}: is a directory, not {what}")
    if stat.S_ISREG(info.st_mode) and info.st_size > cap:
        raise UserError(f"{path}: {info.st_size} bytes is more than {cap // 1024} KiB, too large for {what}; "
                        "pass the file itself, not an archive or a log")
    return info.st_size


def read_bytes(path: Path, what: str, cap: int = MAX_TEXT_INPUT_BYTES) -> bytes:
    """The whole file, refused before reading when larger than ``cap`` (FIFOs are read up to ``cap``)."""
    _check_regular(path, what, cap)
    try:
        with path.open("rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise UserError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if len(data) > cap:
        raise UserError(f"{path}: more than {cap // 1024} KiB, too large for {what}")
    return data


def read_text(path: Path, what: str, cap: int = MAX_TEXT_INPUT_BYTES, errors: str = "replace") -> str:
    data = read_bytes(path, what, cap)
    try:
        return data.decode("utf-8", errors=errors)
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start}); expected {what}") from None


def _address_space_now() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


@contextlib.contextmanager
def memory_bound(extra_bytes: int) -> Iterator[bool]:
    """Cap this process's address space at its current size plus ``extra_bytes`` for the block.

    An allocation past it fails with MemoryError instead of taking the machine's memory. Yields
    False where the limit cannot be set (no ``/proc`` or RLIMIT_AS, e.g. macOS): the caller must
    then bound the work itself.
    """
    try:
        import resource
    except ImportError:
        yield False
        return
    now = _address_space_now()
    if now is None or not hasattr(resource, "RLIMIT_AS"):
        yield False
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = now + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield True  # already tighter than ours
        return
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class _CappedReader(io.RawIOBase):
    """Bytes from ``inner``; a read that passes ``cap`` bytes in all raises a one-line UserError."""

    def __init__(self, inner: IO[bytes], cap: int, message: str) -> None:
        self.inner, self.cap, self.message, self.total = inner, cap, message, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.inner.readinto(buffer)  # type: ignore[attr-defined]
        self.total += n or 0
        if self.total > self.cap:
            raise UserError(self.message)
        return n

    def close(self) -> None:
        self.inner.close()
        super().close()


def gzip_text(path: Path, what: str, newline: str | None = "\n") -> IO[str]:
    """A .gz file as text, refused (UserError) once it has decompressed past GZIP_MAX_RATIO x its size."""
    compressed = path.stat().st_size
    cap = max(GZIP_FLOOR, GZIP_MAX_RATIO * compressed)
    message = (f"{path}: refused: decompresses to more than {cap // MIB} MiB ({GZIP_MAX_RATIO}x its {compressed} "
               f"bytes), more than {what} compresses to; gunzip it and pass the text file")
    import gzip  # only a .gz log needs it

    raw = _CappedReader(gzip.open(path, "rb"), cap, message)  # type: ignore[arg-type]
    return io.TextIOWrapper(io.BufferedReader(raw, 1 << 16), encoding="utf-8", errors="replace", newline=newline)
