"""The record of what ``apply`` wrote, kept where only the user who ran it can write.

A backup beside the target proves nothing: anyone who can write the target's folder can
plant a file with the backup's name (and, before, a manifest beside it). So every backup
``apply`` makes is also recorded here, in a private directory of the user running it
(``$HOME/.local/state/memtune/journal``; mode 0700,
owned by that user, checked on every use). ``rollback`` restores only a backup this journal
lists for this very target, with the recorded size and SHA-256; anything else beside the
file is ignored, so a planted or far-future backup neither wins nor blocks.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import UserError

MAX_JOURNAL_BYTES = 1024 * 1024  # one target's records; thousands of applies fit
MAX_ENTRIES = 1000  # the oldest records go first past this (their backups stay, unrecorded)
PERMISSION_BITS = 0o777  # set-id and sticky bits are never restored
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # a link planted in place of a record is never followed


@dataclass(frozen=True)
class Entry:
    """One backup ``apply`` made: what it holds and what was written over it."""

    backup: str  # the backup's file name beside the target
    backup_size: int
    backup_sha256: str
    written_size: int
    written_sha256: str
    mode: int  # the target's permission bits when it was backed up

    @classmethod
    def parse(cls, raw: object, source: Path) -> Entry:
        fields = cls.__dataclass_fields__
        if not isinstance(raw, dict) or set(raw) != set(fields):
            raise UserError(f"{source}: not a memtune journal record; nothing restored")
        for key, f in fields.items():
            want = int if f.type == "int" else str
            if type(raw[key]) is not want:
                raise UserError(f"{source}: journal field {key!r} has the wrong type; nothing restored")
        if not 0 <= raw["mode"] <= PERMISSION_BITS:
            raise UserError(f"{source}: journal mode {raw['mode']!r} is not a permission mode; nothing restored")
        if "/" in raw["backup"] or raw["backup"] in ("", ".", ".."):
            raise UserError(f"{source}: journal backup name {raw['backup']!r} is not a file name; nothing restored")
        return cls(**raw)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def state_dir() -> Path:
    """``$HOME/.local/state/memtune/journal`` (the XDG state location; the helper reads no environment variable)."""
    home = os.path.expanduser("~")
    if not os.path.isabs(home):
        raise UserError("no home directory: memtune keeps the record of its backups in $HOME/.local/state/memtune")
    return Path(home) / ".local" / "state" / "memtune" / "journal"


def _private(directory: Path) -> None:
    """Refuse a journal directory another user could write (or swap: so its parent is checked too)."""
    for path in (directory.parent, directory):
        info = path.lstat()
        if not stat.S_ISDIR(info.st_mode):
            raise UserError(f"{path}: memtune's backup journal must be a real directory, not a link or file")
        if info.st_uid not in (os.geteuid(), 0) or info.st_mode & 0o022:
            raise UserError(f"{path}: memtune's backup journal is writable by another user "
                            f"(owner {info.st_uid}, mode {stat.filemode(info.st_mode)}); nothing written. "
                            "Make it yours with mode 0700 first")


def _ensure(directory: Path) -> Path:
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        _private(directory)
    except OSError as exc:
        raise UserError(f"{directory}: cannot use memtune's backup journal: {exc.strerror}") from None
    return directory


def _record_path(directory: Path, target: Path) -> Path:
    return directory / (hashlib.sha256(str(target).encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".json")


def target_key(path: Path) -> Path:
    """The target as the journal names it: its folder resolved, its own name kept (a link is never followed)."""
    return Path(os.path.realpath(path.parent)) / path.name


def entries(path: Path) -> list[Entry]:
    """The journal's records for ``path``, oldest first; [] when memtune never wrote it."""
    directory = state_dir()
    if not directory.exists():
        return []
    _private(directory)
    target = target_key(path)
    record = _record_path(directory, target)
    try:
        fd = os.open(record, os.O_RDONLY | _NOFOLLOW)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise UserError(f"{record}: cannot read memtune's backup journal: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid not in (os.geteuid(), 0) or info.st_mode & 0o022:
            raise UserError(f"{record}: memtune's journal record is not a private file of this user; nothing restored")
        data = fh.read(MAX_JOURNAL_BYTES + 1)
    if len(data) > MAX_JOURNAL_BYTES:
        raise UserError(f"{record}: memtune's journal record is over {MAX_JOURNAL_BYTES} bytes; nothing restored")
    try:
        raw = json.loads(data)
    except ValueError:
        raise UserError(f"{record}: memtune's journal record is not JSON; nothing restored") from None
    if not isinstance(raw, dict) or raw.get("target") != str(target) or not isinstance(raw.get("entries"), list):
        raise UserError(f"{record}: memtune's journal record is for another file; nothing restored")
    return [Entry.parse(item, record) for item in raw["entries"]]


def save(path: Path, records: list[Entry], write_new) -> None:
    """Replace the records of ``path`` (atomically, mode 0600); an empty list removes them."""
    directory = _ensure(state_dir())
    target = target_key(path)
    record = _record_path(directory, target)
    if not records:
        try:
            record.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise UserError(f"{record}: cannot update memtune's backup journal: {exc.strerror}") from None
        return
    body = {"target": str(target), "entries": [asdict(e) for e in records[-MAX_ENTRIES:]]}
    try:
        write_new(record, json.dumps(body, indent=1, sort_keys=True).encode() + b"\n", mode=0o600)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise UserError(f"{record}: no space for memtune's backup journal; nothing changed") from None
        raise
