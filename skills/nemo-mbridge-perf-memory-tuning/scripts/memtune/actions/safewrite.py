"""Crash-safe replace-with-backup and verified restore for the one file ``apply`` edits.

The invariants, each one a way a file was lost, or another file overwritten, before:

* a backup exists, is complete (fsynced and read back) and is recorded in the journal of the
  user running apply (journal.py: size and SHA-256 of the backup and of the text written over
  it) *before* the target is touched; a backup the journal does not list is never restored;
* the target is replaced atomically (temp file, fsync, ``os.replace``, directory fsync), or
  written in place when replacing would change what the file is (hard links, an owner we
  cannot give back): then through a descriptor opened with ``O_NOFOLLOW`` whose device and
  inode must be the ones checked, so a link swapped in meanwhile is never written through;
* permissions, owners and temp files are set on descriptors, never on names another user could
  swap; set-id and sticky bits are never written;
* check-then-write happens under an advisory lock on the target's directory, so two
  applies to one file cannot both succeed on the same old text;
* ``rollback`` restores only when the file is still what ``apply`` wrote; a hand edit is
  kept unless ``force``, which first saves it beside the file;
* any OSError becomes a one-line ``UserError`` and leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import UserError
from . import journal
from .journal import Entry, sha256

BACKUP_TAG = ".memtune-backup-"
SAVED_TAG = ".memtune-saved-"  # hand edits that ``rollback --force`` keeps
_BACKUP_RE = r"\.memtune-backup-(\d{8}T\d{6})(?:-(\d+))?$"
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


# --------------------------------------------------------------------------- file system primitives


def _os_error(path: Path, exc: OSError, what: str) -> UserError:
    reason = exc.strerror or errno.errorcode.get(exc.errno or 0, type(exc).__name__)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        reason += " (free some space and run it again)"
    return UserError(f"{path}: could not {what}: {reason}; {path.name} is unchanged")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on the target's directory (the target itself is replaced, its lock would not hold)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no advisory locks; the re-check under no lock is still done
        yield
        return
    fd = os.open(path.parent, os.O_RDONLY | _CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot fsync a directory; the data is already synced
        fd = os.open(directory, os.O_RDONLY | _CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _same_file(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _open_checked(path: Path, flags: int, expect: os.stat_result | None, what: str) -> int:
    """A descriptor on ``path`` itself (never through a link) that is the regular file ``expect`` describes."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOENT, errno.EMLINK):  # ELOOP: a link now stands there
            raise
        raise UserError(f"{path}: the {what} was replaced while memtune worked on it; nothing written "
                        "through it") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or (expect is not None and not _same_file(info, expect)):
        os.close(fd)
        raise UserError(f"{path}: the {what} was replaced while memtune worked on it; nothing changed")
    return fd


def _write_temp(directory: Path, prefix: str, data: bytes, mode: int | None = None,
                owner: tuple[int, int] | None = None) -> tuple[Path, bool]:
    """A fully written, fsynced, read-back-verified temp file in ``directory`` (removed on failure).

    Mode (permission bits only) and owner are set on the open descriptor before anything is
    written, so nothing can swap the name in between. Returns the path and whether the
    owner could be given (only root can give a file away).
    """
    fd, name = tempfile.mkstemp(dir=directory, prefix=prefix)
    tmp, owned = Path(name), True
    try:
        with os.fdopen(fd, "w+b") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode & journal.PERMISSION_BITS)
            if owner is not None and owner != (os.geteuid(), os.getegid()):
                try:
                    os.fchown(fh.fileno(), *owner)
                except PermissionError:
                    owned = False
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            fh.seek(0)
            if fh.read(len(data) + 1) != data:
                raise OSError(errno.EIO, "read-back differs from what was written")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp, owned


def write_new(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` atomically with ``data`` (a file memtune owns, or one it is restoring): no backup."""
    tmp, _ = _write_temp(path.parent, f".{path.name}.memtune-", data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def read_capped(path: Path, cap: int, what: str, expect: os.stat_result | None = None) -> bytes:
    """The bytes of a regular file no larger than ``cap``, checked on its descriptor before reading."""
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise UserError(f"{path}: {what} is a symbolic link; nothing restored")
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: {what} is not a regular file; nothing restored")
        if info.st_size > cap:
            raise UserError(f"{path}: {what} is {info.st_size} bytes, more than the {cap} a launch script or "
                            "config can be; nothing restored")
        with os.fdopen(_open_checked(path, os.O_RDONLY, expect or info, what), "rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise _os_error(path, exc, f"read the {what}") from None
    if len(data) > cap:
        raise UserError(f"{path}: {what} grew past {cap} bytes while being read; nothing restored")
    return data


def _write_in_place(path: Path, data: bytes, info: os.stat_result) -> None:
    """Write through the checked inode: ``O_NOFOLLOW`` and the same device/inode, or nothing is written."""
    fd = _open_checked(path, os.O_WRONLY, info, "file")
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())


def _replace(path: Path, data: bytes, info: os.stat_result) -> list[str]:
    """Put ``data`` at ``path`` keeping mode, owner and links; notes on what could not be kept as it was."""
    notes = []
    mode = stat.S_IMODE(info.st_mode)
    if mode & ~journal.PERMISSION_BITS:
        notes.append(f"{path.name} had set-id or sticky bits ({stat.filemode(info.st_mode)}); memtune never writes "
                     "them, so they were dropped")
    tmp, owned = _write_temp(path.parent, f".{path.name}.memtune-", data, mode=mode,
                             owner=(info.st_uid, info.st_gid))
    try:
        if info.st_nlink == 1 and owned:
            os.replace(tmp, path)
            _fsync_dir(path.parent)
            return notes
    finally:
        tmp.unlink(missing_ok=True)
    # Replacing would break hard links or hand the file to us: write through the same inode.
    # Not atomic, but the verified backup already exists, so a torn write is recoverable.
    _write_in_place(path, data, info)
    why = f"{info.st_nlink} hard links" if info.st_nlink > 1 else "an owner this user cannot give back"
    return [*notes, f"{path.name} has {why}; it was written in place (same inode) after the backup was verified"]


def _writable(path: Path, info: os.stat_result, allow_read_only: bool) -> None:
    if not allow_read_only and not (info.st_mode & stat.S_IWUSR and os.access(path, os.W_OK)):
        raise UserError(f"{path}: is read-only (mode {stat.filemode(info.st_mode)}); nothing changed. "
                        "Make it writable, or pass --allow-read-only to edit it and keep its mode")


# --------------------------------------------------------------------------- backups


def backup_path(path: Path, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    candidate = path.with_name(f"{path.name}{BACKUP_TAG}{stamp}")
    n = 0
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}{BACKUP_TAG}{stamp}-{n}")
    return candidate


def backups(path: Path) -> list[Path]:
    """The backups of ``path`` this user's journal lists and that still exist, oldest first."""
    return [path.with_name(e.backup) for e in journal.entries(path) if path.with_name(e.backup).is_file()]


def lookalikes(path: Path) -> list[Path]:
    """Files beside ``path`` named like memtune backups (planted or recorded: the name proves nothing)."""
    pattern = re.compile(re.escape(path.name) + _BACKUP_RE)
    return sorted(c for c in path.parent.glob(f"{glob_escape(path.name)}{BACKUP_TAG}*") if pattern.match(c.name))


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def replace_with_backup(path: Path, old: bytes, new: bytes, now: datetime | None = None,
                        allow_read_only: bool = False) -> tuple[Path, list[str]]:
    """Back ``path`` up (verified, in the journal), then write ``new``; refuses when it no longer holds ``old``."""
    try:
        with locked(path):
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
                raise UserError(f"{path}: is no longer a regular file; nothing changed")
            if info.st_size != len(old) or read_capped(path, len(old), "file", info) != old:
                raise UserError(f"{path}: changed since it was read; run apply again")
            _writable(path, info, allow_read_only)
            recorded = journal.entries(path)
            backup = backup_path(path, now)
            entry = Entry(backup.name, len(old), sha256(old), len(new), sha256(new),
                          stat.S_IMODE(info.st_mode) & journal.PERMISSION_BITS)
            tmp_backup, _ = _write_temp(path.parent, f".{path.name}.memtune-backup-", old, mode=0o600)
            try:
                os.replace(tmp_backup, backup)
            except BaseException:
                tmp_backup.unlink(missing_ok=True)
                raise
            _fsync_dir(path.parent)
            try:
                journal.save(path, [*recorded, entry], write_new)  # recorded before the target is touched
                try:
                    notes = _replace(path, new, info)
                except BaseException:
                    journal.save(path, recorded, write_new)
                    raise
            except BaseException:
                backup.unlink(missing_ok=True)
                raise
    except OSError as exc:
        raise _os_error(path, exc, "write the change") from None
    return backup, notes


# --------------------------------------------------------------------------- rollback


def _saved_path(path: Path, now: datetime | None) -> Path:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    candidate, n = path.with_name(f"{path.name}{SAVED_TAG}{stamp}"), 0
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}{SAVED_TAG}{stamp}-{n}")
    return candidate


@dataclass(frozen=True)
class Restore:
    """What ``rollback`` would do: the verified backup bytes and whether the file still holds apply's text."""

    backup: Path
    data: bytes
    current: bytes
    entry: Entry
    earlier: tuple[Entry, ...]  # the journal's older records for this file

    @property
    def edited_since(self) -> bool:
        return sha256(self.current) != self.entry.written_sha256


def plan_restore(path: Path, cap: int) -> Restore:
    """The newest backup this user's journal records, verified; refuses planted, tampered or oversized ones."""
    if path.is_symlink():
        raise UserError(f"{path}: is a symbolic link; nothing restored")
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: not a regular file; nothing restored")
    recorded = journal.entries(path)
    if not recorded:
        beside = lookalikes(path)
        extra = (f"; the {len(beside)} file(s) beside it named like backups ({beside[-1].name}, ...) were not "
                 "written by memtune as this user, so they are not restored" if beside else "")
        raise UserError(f"{path}: no memtune backup found: this user's journal ({journal.state_dir()}) has no record "
                        f"of apply writing it{extra}")
    entry = recorded[-1]
    backup = path.with_name(entry.backup)
    if not backup.exists() and not backup.is_symlink():
        raise UserError(f"{backup}: the backup memtune recorded is gone; nothing restored")
    data = read_capped(backup, cap, "backup")
    if (len(data), sha256(data)) != (entry.backup_size, entry.backup_sha256):
        raise UserError(f"{backup}: does not match what memtune recorded when it wrote it (size or SHA-256 "
                        "differs): it was changed after apply; nothing restored")
    current = read_capped(path, cap, "file") if path.exists() else b""
    return Restore(backup, data, current, entry, tuple(recorded[:-1]))


def restore(path: Path, cap: int, force: bool = False, allow_read_only: bool = False,
            now: datetime | None = None) -> tuple[Restore, list[str]]:
    """Put the newest verified backup back; a hand edit since apply is refused, or saved first with ``force``."""
    notes: list[str] = []
    try:
        with locked(path):
            plan = plan_restore(path, cap)
            info = None if not path.exists() else path.lstat()
            if info is not None:
                _writable(path, info, allow_read_only)
            if plan.edited_since and info is not None:
                if not force:
                    raise UserError(f"{path}: changed since memtune apply wrote it (its SHA-256 differs from the "
                                    "text apply recorded); nothing restored. Pass --force to restore "
                                    "anyway (your current text is saved beside it first)")
                saved = _saved_path(path, now)
                tmp, _ = _write_temp(path.parent, f".{path.name}.memtune-saved-", plan.current, mode=0o600)
                os.replace(tmp, saved)
                notes.append(f"your edited {path.name} was saved as {saved.name}")
            if info is None:
                write_new(path, plan.data, mode=plan.entry.mode)
            else:
                notes += _replace(path, plan.data, info)
            journal.save(path, list(plan.earlier), write_new)
            plan.backup.unlink(missing_ok=True)
            _fsync_dir(path.parent)
    except OSError as exc:
        raise _os_error(path, exc, "restore the backup") from None
    return plan, notes
