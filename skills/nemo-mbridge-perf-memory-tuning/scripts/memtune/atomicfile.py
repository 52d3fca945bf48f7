"""Write a new file whole or not at all: a hidden temp file beside it, fsynced, then hard-linked onto its name.

``open(path, "x")`` wrote straight into the final name, so a full disk or a character UTF-8 cannot hold left
a truncated (or 0-byte) page that then blocked the path ("file exists").  Here the text goes to a temp file in
the same folder first; ``os.link`` of the temp onto the final name fails with EEXIST for anything already there
(a file, a symlink, a FIFO, /dev/stdout), in one step, so never-overwrite stays free of races, and the temp is
removed on every path out.  Where the file system has no hard links (FAT, some network mounts) the name is
reserved with O_EXCL and the temp renamed over that reservation.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterable
from pathlib import Path

from .errors import UserError

TEMP_PREFIX = ".memtune-"
TEMP_SUFFIX = ".tmp"
_FLUSH_BYTES = 1 << 20  # small chunks (a plan's rows) are gathered into writes of about this size
# link() errors that mean "no hard links here", not "cannot write here"
_NO_LINK = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS, errno.EMLINK, errno.EXDEV})
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)


def unencodable(exc: UnicodeEncodeError) -> str:
    """What could not be encoded, and the text around it, for a one-line error."""
    bad = exc.object[exc.start:exc.end]
    around = exc.object[max(0, exc.start - 30):exc.end + 30]
    return (f"the answer holds {ascii(bad)}, which UTF-8 cannot encode (near {ascii(around)}): a file name or "
            "value in an input is not valid UTF-8 (a non-UTF-8 file name, or a lone surrogate such as YAML's "
            "\"\\ud800\"); rename the file or fix the value")


def write_new(path: Path, chunks: Iterable[str], label: str) -> None:
    """Write ``chunks`` as UTF-8 to ``path``, which must not exist; UserError (``label`` names the option) on any
    failure, and then neither ``path`` nor a temp file is left behind."""
    if os.path.lexists(path):  # early, so a long answer is not written only to be refused; link() decides
        raise _exists(path, label)
    tmp: Path | None = None
    try:
        tmp, fd = _temp_beside(path)
        try:
            _write_chunks(fd, chunks)
            os.fsync(fd)
        finally:
            os.close(fd)
        _link(tmp, path)
    except UnicodeEncodeError as exc:
        raise UserError(f"{label} {path}: {unencodable(exc)}; nothing written") from None
    except FileExistsError:
        raise _exists(path, label) from None
    except OSError as exc:
        raise UserError(f"{label} {path}: cannot write ({exc.strerror or exc}); nothing written") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    _sync_folder(path.parent)


def _exists(path: Path, label: str) -> UserError:
    return UserError(f"{label} {path}: file exists; choose a new path")


def _temp_beside(path: Path) -> tuple[Path, int]:
    """A new hidden file in ``path``'s folder (same file system, so it can be linked), mode 0666 less the umask."""
    for _ in range(100):
        tmp = path.parent / f"{TEMP_PREFIX}{secrets.token_hex(6)}{TEMP_SUFFIX}"
        try:
            return tmp, os.open(tmp, _CREATE, 0o666)
        except FileExistsError:
            continue
    raise OSError(errno.EAGAIN, "no free temporary name", str(path.parent))


def _write_chunks(fd: int, chunks: Iterable[str]) -> None:
    buf = bytearray()
    for chunk in chunks:
        buf += chunk.encode("utf-8")  # strict: a lone surrogate raises before anything is linked
        if len(buf) >= _FLUSH_BYTES:
            _write_all(fd, bytes(buf))
            buf.clear()
    if buf:
        _write_all(fd, bytes(buf))


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is out (a write may take fewer than asked, e.g. at a quota)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _link(tmp: Path, path: Path) -> None:
    """Give the finished temp file its name, refusing (EEXIST) whatever already holds the name."""
    try:
        os.link(tmp, path)
        return
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    os.close(os.open(path, _CREATE, 0o666))  # reserve the name; EEXIST here is the same refusal
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _sync_folder(folder: Path) -> None:
    """Make the new name durable too (best effort: not every platform can open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
