"""Crash-safe replace-with-backup and verified restore for the one file ``apply`` edits.

The invariants, each one a way a file was lost before:

* a backup exists, is complete (fsynced and read back) and has a manifest recording its
  size and SHA-256 and those of the text written over it *before* the target is touched;
  a backup without a matching manifest is never restored;
* the target is replaced atomically (temp file, fsync, ``os.replace``, directory fsync), or
  written in place when replacing would change what the file is (hard links, an owner we
  cannot give back), and only after the backup is safe;
* check-then-write happens under an advisory lock on the target's directory, so two
  applies to one file cannot both succeed on the same old text;
* ``rollback`` restores only when the file is still what ``apply`` wrote; a hand edit is
  kept unless ``force``, which first saves it beside the file;
* any OSError becomes a one-line ``UserError`` and leaves no partial file behind.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import UserError

BACKUP_TAG = ".memtune-backup-"
SAVED_TAG = ".memtune-saved-"  # hand edits that ``rollback --force`` keeps
MANIFEST_SUFFIX = ".manifest.json"
_BACKUP_RE = r"\.memtune-backup-(\d{8}T\d{6})(?:-(\d+))?$"
MAX_MANIFEST_BYTES = 4096


@dataclass(frozen=True)
class Manifest:
    """What a backup holds and what was written over it; JSON beside the backup."""

    target: str  # the target's file name (not a path: a moved pair still matches)
    backup_size: int
    backup_sha256: str
    written_size: int
    written_sha256: str
    mode: int

    def dump(self) -> bytes:
        return json.dumps(self.__dict__, indent=1, sort_keys=True).encode() + b"\n"

    @classmethod
    def parse(cls, data: bytes, source: Path) -> Manifest:
        try:
            raw = json.loads(data)
            fields = {k: raw[k] for k in cls.__dataclass_fields__}
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{source}: not a memtune backup manifest ({type(exc).__name__}); "
                            "nothing restored") from None
        types = {k: int if f.type == "int" else str for k, f in cls.__dataclass_fields__.items()}
        bad = [k for k, v in fields.items() if type(v) is not types[k]]
        if bad:
            raise UserError(f"{source}: manifest field {bad[0]!r} has the wrong type; nothing restored")
        return cls(**fields)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_path(backup: Path) -> Path:
    return backup.with_name(backup.name + MANIFEST_SUFFIX)


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
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # some file systems cannot fsync a directory; the data is already synced
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_temp(directory: Path, prefix: str, data: bytes, mode: int | None = None) -> Path:
    """A fully written, fsynced, read-back-verified temp file in ``directory`` (removed on failure).

    ``mode`` is set on the open descriptor before anything is written, so the file never exists
    under a different name with the final permissions and nothing can swap the path in between.
    """
    fd, name = tempfile.mkstemp(dir=directory, prefix=prefix)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if tmp.read_bytes() != data:
            raise OSError(errno.EIO, "read-back differs from what was written")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def write_new(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` atomically with ``data`` (a file memtune owns, or one it is restoring): no backup."""
    tmp = _write_temp(path.parent, f".{path.name}.memtune-", data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """The bytes of a regular file no larger than ``cap``, checked before reading (a planted 3 GB file is not read)."""
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            raise UserError(f"{path}: {what} is a symbolic link; nothing restored")
        if not stat.S_ISREG(info.st_mode):
            raise UserError(f"{path}: {what} is not a regular file; nothing restored")
        if info.st_size > cap:
            raise UserError(f"{path}: {what} is {info.st_size} bytes, more than the {cap} a launch script or "
                            "config can be; nothing restored")
        with path.open("rb") as fh:
            data = fh.read(cap + 1)
    except OSError as exc:
        raise _os_error(path, exc, f"read the {what}") from None
    if len(data) > cap:
        raise UserError(f"{path}: {what} grew past {cap} bytes while being read; nothing restored")
    return data


def _replace(path: Path, data: bytes, info: os.stat_result) -> str | None:
    """Put ``data`` at ``path`` keeping mode, owner and links; a note when it had to write in place."""
    keeps_identity = info.st_nlink == 1
    tmp = _write_temp(path.parent, f".{path.name}.memtune-", data, mode=stat.S_IMODE(info.st_mode))
    try:
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            try:
                os.chown(tmp, info.st_uid, info.st_gid)
            except PermissionError:
                keeps_identity = False
        if keeps_identity:
            os.replace(tmp, path)
            _fsync_dir(path.parent)
            return None
    finally:
        tmp.unlink(missing_ok=True)
    # Replacing would break hard links or hand the file to us: write through the same inode.
    # Not atomic, but the verified backup already exists, so a torn write is recoverable.
    with path.open("r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())
    why = f"{info.st_nlink} hard links" if info.st_nlink > 1 else "an owner this user cannot give back"
    return f"{path.name} has {why}; it was written in place (same inode) after the backup was verified"


def _writable(path: Path, info: os.stat_result, allow_read_only: bool) -> None:
    if not allow_read_only and not (info.st_mode & stat.S_IWUSR and os.access(path, os.W_OK)):
        raise UserError(f"{path}: is read-only (mode {stat.filemode(info.st_mode)}); nothing changed. "
                        "Make it writable, or pass --allow-read-only to edit it and keep its mode")


# --------------------------------------------------------------------------- backups


def backup_path(path: Path, now: datetime | None = None) -> Path:
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    candidate = path.with_name(f"{path.name}{BACKUP_TAG}{stamp}")
    n = 0
    while candidate.exists() or candidate.is_symlink() or manifest_path(candidate).exists():
        n += 1
        candidate = path.with_name(f"{path.name}{BACKUP_TAG}{stamp}-{n}")
    return candidate


def backups(path: Path) -> list[Path]:
    """memtune backups of ``path`` (with or without manifest), oldest first; UTC stamps sort in time order."""
    pattern = re.compile(re.escape(path.name) + _BACKUP_RE)
    found = []
    for cand in path.parent.glob(f"{glob_escape(path.name)}{BACKUP_TAG}*"):
        m = pattern.match(cand.name)
        if m and not cand.is_symlink() and cand.is_file():
            found.append(((m.group(1), int(m.group(2) or 0)), cand))
    return [p for _, p in sorted(found)]


def glob_escape(name: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", name)


def replace_with_backup(path: Path, old: bytes, new: bytes, now: datetime | None = None,
                        allow_read_only: bool = False) -> tuple[Path, list[str]]:
    """Back ``path`` up (verified, with manifest), then write ``new``; refuses when it no longer holds ``old``."""
    notes: list[str] = []
    try:
        with locked(path):
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode):
                raise UserError(f"{path}: is no longer a regular file; nothing changed")
            if info.st_size != len(old) or path.read_bytes() != old:
                raise UserError(f"{path}: changed since it was read; run apply again")
            _writable(path, info, allow_read_only)
            backup = backup_path(path, now)
            manifest = Manifest(path.name, len(old), sha256(old), len(new), sha256(new), stat.S_IMODE(info.st_mode))
            tmp_backup = _write_temp(path.parent, f".{path.name}.memtune-backup-", old)
            try:
                tmp_manifest = _write_temp(path.parent, f".{path.name}.memtune-manifest-", manifest.dump())
            except BaseException:
                tmp_backup.unlink(missing_ok=True)
                raise
            os.replace(tmp_backup, backup)
            os.replace(tmp_manifest, manifest_path(backup))  # the manifest last: a backup without one is incomplete
            _fsync_dir(path.parent)
            try:
                note = _replace(path, new, info)
            except BaseException:
                manifest_path(backup).unlink(missing_ok=True)
                backup.unlink(missing_ok=True)
                raise
            if note:
                notes.append(note)
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
    manifest: Manifest

    @property
    def edited_since(self) -> bool:
        return sha256(self.current) != self.manifest.written_sha256


def plan_restore(path: Path, cap: int) -> Restore:
    """The newest backup, verified against its manifest; refuses planted, tampered or oversized ones."""
    if path.is_symlink():
        raise UserError(f"{path}: is a symbolic link; nothing restored")
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: not a regular file; nothing restored")
    found = backups(path)
    if not found:
        raise UserError(f"{path}: no memtune backup found beside it ({path.name}{BACKUP_TAG}*)")
    backup = found[-1]
    mpath = manifest_path(backup)
    if not mpath.is_file() or mpath.is_symlink():
        raise UserError(f"{backup}: has no manifest ({mpath.name}), so memtune did not finish writing it or did not "
                        "write it; nothing restored (inspect it and copy it back by hand if it is yours)")
    manifest = Manifest.parse(read_capped(mpath, MAX_MANIFEST_BYTES, "manifest"), mpath)
    data = read_capped(backup, cap, "backup")
    if manifest.target != path.name or (len(data), sha256(data)) != (manifest.backup_size, manifest.backup_sha256):
        raise UserError(f"{backup}: does not match its manifest (size or SHA-256 differs, or it belongs to "
                        f"{manifest.target!r}); it was changed after apply wrote it; nothing restored")
    current = read_capped(path, cap, "file") if path.exists() else b""
    return Restore(backup, data, current, manifest)


def restore(path: Path, cap: int, force: bool = False, allow_read_only: bool = False,
            now: datetime | None = None) -> tuple[Restore, list[str]]:
    """Put the newest verified backup back; a hand edit since apply is refused, or saved first with ``force``."""
    notes: list[str] = []
    try:
        with locked(path):
            plan = plan_restore(path, cap)
            if not path.exists():
                info = None
            else:
                info = path.lstat()
                _writable(path, info, allow_read_only)
            if plan.edited_since and path.exists():
                if not force:
                    raise UserError(f"{path}: changed since memtune apply wrote it (SHA-256 differs from "
                                    f"{manifest_path(plan.backup).name}); nothing restored. Pass --force to restore "
                                    "anyway (your current text is saved beside it first)")
                saved = _saved_path(path, now)
                tmp = _write_temp(path.parent, f".{path.name}.memtune-saved-", plan.current)
                os.replace(tmp, saved)
                notes.append(f"your edited {path.name} was saved as {saved.name}")
            if info is None:
                write_new(path, plan.data, mode=plan.manifest.mode)
            else:
                note = _replace(path, plan.data, info)
                if note:
                    notes.append(note)
            manifest_path(plan.backup).unlink(missing_ok=True)
            plan.backup.unlink(missing_ok=True)
            _fsync_dir(path.parent)
    except OSError as exc:
        raise _os_error(path, exc, "restore the backup") from None
    return plan, notes
