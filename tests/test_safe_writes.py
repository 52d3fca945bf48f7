"""apply / rollback under faults: full disk, concurrent applies, hand edits, planted or tampered backups.

Each test reproduces a way a file was lost or a backup trusted blindly before (issue 10) and
checks that nothing the tool touches is lost.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import read_kb
from memtune.actions import apply as actions
from memtune.actions import safewrite
from memtune.errors import UserError

pytestmark = pytest.mark.usefixtures("private_home")  # the backup journal lives in $HOME

ROOT = Path(__file__).resolve().parents[1]
SKILL = ROOT / "skills" / "nemo-mbridge-perf-memory-tuning"  # the folder users install
PATTERNS = read_kb("validations")["launch_script"]["command_patterns"]
FIX_A = {"id": "t-a", "apply": {"env": ["PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"]}}
FIX_B = {"id": "t-b", "apply": {"env": ["NCCL_GRAPH_REGISTER=0"]}}
LAUNCH = "#!/bin/bash\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\n" + "# padding line\n" * 200 + "torchrun pretrain_gpt.py\n"


def _launch(tmp_path: Path, mode: int = 0o644) -> Path:
    path = tmp_path / "launch.sh"
    path.write_text(LAUNCH)
    path.chmod(mode)
    return path


def _apply(path: Path, fix: dict = FIX_A, **kw) -> tuple[Path, list[str]]:
    return actions.write_with_backup(actions.plan_apply(fix, path, PATTERNS), **kw)


def _cli(*args: str, preexec=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SKILL / "scripts" / "memtune.py"), *args], capture_output=True,
                          text=True, preexec_fn=preexec, timeout=60)


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --------------------------------------------------------------------------- full disk


def _file_size_limit(limit: int):
    def preexec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


@pytest.mark.parametrize("limit_from_size", [lambda old: old // 2, lambda old: old + 8])
def test_full_disk_leaves_the_file_and_no_partial_backup(tmp_path, limit_from_size):
    """Backup write fails (limit below the file) or the new text fails (limit between old and new size)."""
    path = _launch(tmp_path)
    before = path.read_bytes()
    done = _cli("apply", "expandable-segments", "--to", str(path), "--yes",
                preexec=_file_size_limit(limit_from_size(len(before))))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "launch.sh is unchanged" in done.stderr
    assert path.read_bytes() == before and _names(tmp_path) == ["launch.sh"]
    later = _cli("rollback", str(path), "--yes")
    assert later.returncode == 2 and "no memtune backup" in later.stderr and path.read_bytes() == before


# --------------------------------------------------------------------------- concurrency


def _race(path: str, fix: dict, barrier, results) -> None:
    plan = actions.plan_apply(fix, Path(path), PATTERNS)
    barrier.wait()  # both have planned on the same old text before either writes
    try:
        actions.write_with_backup(plan)
        results.put((fix["id"], "ok"))
    except UserError as exc:
        results.put((fix["id"], str(exc)))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_two_concurrent_applies_never_both_succeed_on_the_same_text(tmp_path):
    ctx = multiprocessing.get_context("fork")
    for round_ in range(12):
        directory = tmp_path / str(round_)
        directory.mkdir()
        path = _launch(directory)
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(str(path), fix, barrier, results)) for fix in (FIX_A, FIX_B)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        outcome = dict(results.get(timeout=5) for _ in procs)
        winners = [k for k, v in outcome.items() if v == "ok"]
        assert len(winners) == 1, outcome
        loser = next(v for k, v in outcome.items() if k not in winners)
        assert "changed since it was read" in loser
        text = path.read_text()
        assert ("expandable_segments" in text) == (winners == ["t-a"])
        assert ("NCCL_GRAPH_REGISTER" in text) == (winners == ["t-b"])
        assert len(actions.backups(path)) == 1


def test_concurrent_cli_applies_lose_no_reported_fix(tmp_path):
    """Whatever interleaving the OS picks: every apply that reports success is in the final file."""
    lines = {"expandable-segments": "expandable_segments:True", "nccl-graph-register-off": "NCCL_GRAPH_REGISTER=0"}
    for round_ in range(4):
        directory = tmp_path / str(round_)
        directory.mkdir()
        path = _launch(directory)
        procs = {fix: subprocess.Popen([sys.executable, str(SKILL / "scripts" / "memtune.py"), "apply", fix, "--to",
                                        str(path), "--yes"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True) for fix in lines}
        text_after = {fix: p.communicate(timeout=60) + (p.returncode,) for fix, p in procs.items()}
        final = path.read_text()
        for fix, (_, err, rc) in text_after.items():
            assert rc in (0, 2), err
            if rc == 0:
                assert lines[fix] in final, (fix, final)
            else:
                assert "changed since it was read" in err


# --------------------------------------------------------------------------- rollback after a hand edit


def test_rollback_keeps_a_hand_edit_unless_forced_and_then_saves_it(tmp_path):
    path = _launch(tmp_path)
    _apply(path)
    edited = path.read_text() + "echo my own change\n"
    path.write_text(edited)
    with pytest.raises(UserError, match="changed since memtune apply wrote it"):
        actions.rollback(path)
    assert path.read_text() == edited
    plan, _ = actions.plan_rollback(path)
    assert plan.edited_since
    backup, notes = actions.rollback(path, force=True)
    assert path.read_text() == LAUNCH
    saved = [p for p in tmp_path.iterdir() if safewrite.SAVED_TAG in p.name]
    assert len(saved) == 1 and saved[0].read_text() == edited and saved[0].name in notes[0]
    assert not backup.exists() and actions.backups(path) == []


def test_cli_rollback_after_edit_exits_2_with_one_line(tmp_path):
    path = _launch(tmp_path)
    assert _cli("apply", "expandable-segments", "--to", str(path), "--yes").returncode == 0
    path.write_text(path.read_text() + "# edit\n")
    done = _cli("rollback", str(path), "--yes")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "--force" in done.stderr
    dry = _cli("rollback", str(path))
    assert dry.returncode == 0 and "needs --force" in dry.stdout


# --------------------------------------------------------------------------- planted and tampered backups


def test_tampered_backup_is_not_restored(tmp_path):
    path = _launch(tmp_path)
    backup, _ = _apply(path)
    current = path.read_bytes()
    backup.write_text("echo tampered\n")
    with pytest.raises(UserError, match="does not match what memtune recorded"):
        actions.rollback(path)
    assert path.read_bytes() == current


def test_backup_apply_never_made_is_not_restored(tmp_path):
    path = _launch(tmp_path)
    planted = path.with_name("launch.sh.memtune-backup-29990101T000000")
    planted.write_text("echo planted\n")
    with pytest.raises(UserError, match="no record of apply writing it.*were not written by memtune"):
        actions.plan_rollback(path)
    assert path.read_text() == LAUNCH


def test_planted_huge_backup_is_refused_before_reading(tmp_path):
    path = _launch(tmp_path)
    backup, _ = _apply(path)
    with backup.open("r+b") as fh:
        fh.truncate(3 * 1024**3)  # sparse: 3 GiB on paper, nothing on disk
    started = time.perf_counter()
    with pytest.raises(UserError, match="more than the"):
        actions.plan_rollback(path)
    assert time.perf_counter() - started < 1


def test_rollback_of_a_directory_or_missing_backup_is_one_line(tmp_path):
    (tmp_path / "d").mkdir()
    done = _cli("rollback", str(tmp_path / "d"))
    assert done.returncode == 2 and "not a regular file" in done.stderr and "Traceback" not in done.stderr


# --------------------------------------------------------------------------- what the file is


def test_read_only_target_is_refused_unless_allowed_and_keeps_its_mode(tmp_path):
    path = _launch(tmp_path, mode=0o444)
    with pytest.raises(UserError, match="read-only"):
        _apply(path)
    assert path.read_text() == LAUNCH and _names(tmp_path) == ["launch.sh"]
    _apply(path, allow_read_only=True)
    assert "expandable_segments" in path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    with pytest.raises(UserError, match="read-only"):
        actions.rollback(path)
    actions.rollback(path, allow_read_only=True)
    assert path.read_text() == LAUNCH and stat.S_IMODE(path.stat().st_mode) == 0o444


def test_hard_links_are_kept(tmp_path):
    path = _launch(tmp_path)
    other = tmp_path / "same-file.sh"
    os.link(path, other)
    inode = path.stat().st_ino
    _, notes = _apply(path)
    assert path.stat().st_ino == inode and other.read_text() == path.read_text() != LAUNCH
    assert "hard links" in notes[0]
    actions.rollback(path)
    assert other.read_text() == LAUNCH and path.stat().st_ino == inode


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="only root can give a file away")
def test_owner_is_kept_when_root_edits_another_users_file(tmp_path):
    path = _launch(tmp_path)
    os.chown(path, 4321, 4321)
    _apply(path)
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321)
    actions.rollback(path)
    assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321) and path.read_text() == LAUNCH


def test_no_temp_files_left_after_success(tmp_path):
    path = _launch(tmp_path)
    backup, _ = _apply(path)
    assert _names(tmp_path) == sorted(["launch.sh", backup.name])
    actions.rollback(path)
    assert _names(tmp_path) == ["launch.sh"]
